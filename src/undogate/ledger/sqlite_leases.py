"""This process's lease on a SQLite ledger (``leases.Lease``, on a connection of its
own to the file). Every process sharing the file is on this machine, so the clock it is
judged by is this machine's, read by SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .leases import Lease
from .sql_base import Cursor


class SQLiteLease(Lease[sqlite3.Connection]):
    """A lease on a SQLite ledger; each renewal is one short write of its own."""

    now_sql = "((julianday('now') - 2440587.5) * 86400.0)"
    errors = (sqlite3.Error,)

    def __init__(self, db_path: Path, lease_s: float, busy_s: float) -> None:
        super().__init__(lease_s)
        self.db_path = db_path
        self.busy_s = busy_s

    def connect(self) -> sqlite3.Connection:
        """The lease's own connection: each statement commits at once, durably.

        Raises: sqlite3.Error."""
        conn = sqlite3.connect(
            self.db_path, isolation_level=None, check_same_thread=False, timeout=self.busy_s
        )
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def _execute(
        self, conn: sqlite3.Connection, sql: str, parameters: Sequence[Any] = ()
    ) -> Cursor:
        return conn.execute(sql, parameters)

    def _usable(self, conn: sqlite3.Connection) -> bool:
        return True  # a local file: a failed statement is tried again on the same one

    def _reconnect(self) -> sqlite3.Connection:
        return self.connect()

    def _close_connection(self, conn: sqlite3.Connection) -> None:
        conn.close()


__all__ = ["SQLiteLease"]
