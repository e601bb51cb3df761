"""This process's lease on a SQLite ledger (``leases.Lease``, on a connection of its
own to the file). Every process sharing the file is on this machine, so the clock it is
judged by is this machine's, read by SQLite.

Each write of the lease waits for its turn to write (``sqlite_files.WriteTurn``) as the
store's writes do, on a descriptor of its own: the kernel queues it with the writers of
this process and of the others alike. Left to SQLite's busy wait alone, a renewal slept
through every gap between other processes' back-to-back writes, the lease expired, and
other processes settled this live process's writes in flight as uncertain. The store's
own turn is not shared with it: the store holds that one behind a mutex its requests
queue on for as long as a write runs, and a renewal must not wait behind them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from .leases import Lease
from .sql_base import Cursor
from .sqlite_files import WriteTurn


class SQLiteLease(Lease[sqlite3.Connection]):
    """A lease on a SQLite ledger; each renewal is one short write of its own, in its
    turn."""

    now_sql = "((julianday('now') - 2440587.5) * 86400.0)"
    errors = (sqlite3.Error,)

    def __init__(self, db_path: Path, lease_s: float, busy_s: float) -> None:
        super().__init__(lease_s)
        self.db_path = db_path
        self.busy_s = busy_s
        self._turn = WriteTurn(db_path.parent)

    def connect(self) -> sqlite3.Connection:
        """The lease's own connection: each statement commits at once, durably.

        Raises: sqlite3.Error."""
        conn = sqlite3.connect(
            self.db_path, isolation_level=None, check_same_thread=False, timeout=self.busy_s
        )
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def close(self) -> None:
        super().close()
        self._turn.close()

    def _writing(self) -> AbstractContextManager[None]:
        return self._turn.held(self.busy_s)

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
