"""This process's lease on a PostgreSQL ledger (``leases.Lease``, on a psycopg
connection of its own).

Its connection also holds a **shared** session advisory lock on the key older undogate
versions (one owner per ledger) took exclusively: an older gateway cannot start beside
leased ones, nor these beside it, so no process ever treats the in-flight writes of one
that does not hold a lease as its own. A connection lost is replaced at the next renewal
(and shares that key again first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from ..errors import LedgerInUse
from .leases import LEASE_S, Lease
from .sql_base import Cursor

#: The key an undogate without leases held exclusively to own a ledger ("ownr").
LEGACY_OWNER_LOCK = 0x6F776E72
CONNECT_TIMEOUT_S = 10
#: How long opening waits for an older owner's key (its backend may still be exiting).
OWNER_EXIT_S = 3
_translated: dict[str, str] = {}


def pg_sql(sql: str) -> str:
    """``?`` placeholders as psycopg spells them (the verbs' SQL holds no other ``?``)."""
    found = _translated.get(sql)
    if found is None:
        found = _translated[sql] = sql.replace("%", "%%").replace("?", "%s")
    return found


class PostgresLease(Lease[psycopg.Connection[Any]]):
    """A lease on a PostgreSQL ledger, judged by the database's clock."""

    now_sql = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"
    errors = (psycopg.Error,)

    def __init__(self, url: str, lease_s: float, shown_url: str) -> None:
        super().__init__(lease_s)
        self.url = url
        self.shown_url = shown_url

    def share(self, conn: psycopg.Connection[Any]) -> None:
        """Hold the older undogate's owner key shared, on ``conn``'s session.

        Raises:
            LedgerInUse: an undogate without leases owns the ledger.
            psycopg.Error: the database refused.
        """
        conn.execute(
            "SELECT set_config('application_name', %s, false)",
            (f"undogate lease {self.holder}"[:63],),
        )
        # Waited for, briefly: an older owner that just stopped holds its key until its
        # backend process has exited, a moment after its connection closed (a start
        # right after the stop was refused about one time in twenty).
        try:
            conn.execute(f"SET lock_timeout = '{OWNER_EXIT_S}s'")
            conn.execute("SELECT pg_advisory_lock_shared(%s)", (LEGACY_OWNER_LOCK,))
            return
        except psycopg.errors.LockNotAvailable:
            pass
        finally:
            conn.execute("RESET lock_timeout")
        found = conn.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a "
            "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
            "AND l.mode = 'ExclusiveLock' AND l.objid = %s AND a.datname = current_database()",
            (LEGACY_OWNER_LOCK,),
        ).fetchone()
        owner = str(found[0]) if found else "an undogate without leases"
        raise LedgerInUse(
            f"the PostgreSQL ledger at {self.shown_url} is owned by {owner}, an undogate "
            "that does not share its ledger; stop it (or upgrade it) first",
            owner=owner,
        )

    def _execute(
        self, conn: psycopg.Connection[Any], sql: str, parameters: Sequence[Any] = ()
    ) -> Cursor:
        return conn.execute(pg_sql(sql).encode(), parameters)

    def _usable(self, conn: psycopg.Connection[Any]) -> bool:
        return not (conn.closed or conn.broken)

    def _reconnect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        try:
            self.share(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _close_connection(self, conn: psycopg.Connection[Any]) -> None:
        conn.close()  # the shared owner key goes with the session


__all__ = ["LEASE_S", "LEGACY_OWNER_LOCK", "PostgresLease", "pg_sql"]
