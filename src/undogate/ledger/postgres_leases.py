"""This process's lease on a PostgreSQL ledger (SPEC §13), kept alive by a heartbeat.

Any number of processes share a PostgreSQL ledger. Each holds a lease: a row in
``leases`` with an expiry ``lease_s`` ahead, renewed every ``lease_s / 3`` by a thread on
a connection of its own (never the pool, which a busy gateway may hold for seconds).
Expiry is judged by the database's clock only. When the lease is found ended (other
processes saw it expire and settled its work) the process takes a new one: its writes
that were in flight are uncertain by then, and ``finish_action`` refuses their late
outcomes.

That same connection holds a **shared** session advisory lock on the key older
undogate versions (one owner per ledger) took exclusively: an older gateway cannot
start beside leased ones, nor these beside it, so no process ever treats the in-flight
writes of one that does not hold a lease as its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
from typing import Any

import psycopg

from ..errors import LedgerInUse

log = logging.getLogger(__name__)

#: How long a lease outlives its last renewal (``server.lease_s``).
LEASE_S = 30.0
#: The key an undogate without leases held exclusively to own a ledger ("ownr").
LEGACY_OWNER_LOCK = 0x6F776E72
CONNECT_TIMEOUT_S = 10
#: How long opening waits for an older owner's key (its backend may still be exiting).
OWNER_EXIT_S = 3
_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"


class Lease:
    """This process's lease; ``start`` takes it, ``close`` ends it (idempotent)."""

    def __init__(self, url: str, lease_s: float, shown_url: str) -> None:
        self.url = url
        self.lease_s = lease_s
        self.shown_url = shown_url
        self.holder = f"pid {os.getpid()} on {socket.gethostname()}"
        self.id = ""
        self._conn: psycopg.Connection[Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def share(self, conn: psycopg.Connection[Any]) -> None:
        """Hold the older undogate's owner key shared, on ``conn``'s session.

        Raises:
            LedgerInUse: an undogate without leases owns the ledger.
            psycopg.Error: the database refused.
        """
        self._share_with_leased(conn)

    def start(self, conn: psycopg.Connection[Any]) -> None:
        """Take a lease on ``conn`` (autocommit, ``share``d; kept for the heartbeat) and
        renew it from a thread until ``close``.

        Raises:
            psycopg.Error: the database refused.
        """
        self._conn = conn
        self._take(conn)
        self._thread = threading.Thread(target=self._beat, name="undogate-lease", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=CONNECT_TIMEOUT_S)
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is None or conn.closed:
            return
        # Ended, not left to expire: this process's work is recovery's at once.
        with contextlib.suppress(psycopg.Error):
            conn.execute(
                f"UPDATE leases SET ended_at = {_NOW}, ended_reason = 'closed' "  # noqa: S608
                "WHERE id = %s AND ended_at IS NULL",
                (self.id,),
            )
            conn.execute("SELECT pg_advisory_unlock_shared(%s)", (LEGACY_OWNER_LOCK,))
        conn.close()

    def _share_with_leased(self, conn: psycopg.Connection[Any]) -> None:
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

    def _take(self, conn: psycopg.Connection[Any]) -> None:
        lease_id = "lse_" + secrets.token_hex(8)
        conn.execute(
            "INSERT INTO leases(id, holder, started_at, renewed_at, expires_at) "  # noqa: S608
            f"SELECT %s, %s, now, now, now + %s FROM (SELECT {_NOW} AS now) AS clock",
            (lease_id, self.holder, self.lease_s),
        )
        self.id = lease_id

    def renew(self) -> None:
        """Push the expiry ``lease_s`` ahead; take a new lease if this one was ended.

        Raises:
            psycopg.Error: the database could not be reached.
        """
        with self._lock:
            conn = self._conn
            if conn is None:
                return
            if conn.closed or conn.broken:
                conn = self._conn = self._reconnect()
            renewed = conn.execute(
                f"UPDATE leases SET renewed_at = {_NOW}, expires_at = {_NOW} + %s "  # noqa: S608
                "WHERE id = %s AND ended_at IS NULL RETURNING id",
                (self.lease_s, self.id),
            ).fetchone()
            if renewed is None:
                lost = self.id
                self._take(conn)
                log.warning(
                    "this gateway's lease %s expired before it could renew it (the ledger "
                    "was out of reach or the process stalled): its writes in flight were "
                    "settled as uncertain by another process; now holding lease %s",
                    lost,
                    self.id,
                )

    def _reconnect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        try:
            self._share_with_leased(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _beat(self) -> None:
        every = self.lease_s / 3
        failing = False
        while not self._stop.wait(every):
            try:
                self.renew()
            except (psycopg.Error, LedgerInUse) as exc:
                if not failing:
                    log.warning(
                        "this gateway cannot renew its lease on the ledger (%s); it keeps "
                        "trying. Past %.0f s without a renewal, other processes settle its "
                        "writes in flight as uncertain",
                        (str(exc).strip().splitlines() or ["no answer"])[0],
                        self.lease_s,
                    )
                failing = True
            else:
                if failing:
                    log.warning("this gateway renews its lease %s again", self.id)
                failing = False
