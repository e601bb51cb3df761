"""This process's lease on a shared ledger, kept alive by a heartbeat: the part every
engine shares (docs/scaling.md).

Several processes share one ledger (SQLite on one machine, PostgreSQL anywhere). Each
holds a lease: a row in ``leases`` with an expiry ``lease_s`` ahead, renewed every
``lease_s / 3`` by a thread on a connection of its own (never the one the requests
use, which a busy gateway may hold for seconds). Expiry is judged by the ledger's own
clock only (``now_sql``). When the lease is found ended (other processes saw it expire
and settled its work) the process takes a new one: its writes that were in flight are
uncertain by then, and ``finish_action`` refuses their late outcomes.

An engine's lease (``PostgresLease``, ``SQLiteLease``) says how its own connection is
made, spoken to and closed, what its driver raises, how the ledger's clock reads, and
what a write of the lease waits for first (``_writing``: on SQLite, its turn to write).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

from ..errors import LedgerError, LedgerInUse
from .sql_base import Cursor

log = logging.getLogger(__name__)

#: How long a lease outlives its last renewal (``server.lease_s``).
LEASE_S = 30.0
#: How long closing waits for the heartbeat thread to stop.
STOP_WAIT_S = 10.0

C = TypeVar("C")


class Lease(Generic[C]):
    """This process's lease; ``start`` takes it, ``close`` ends it (idempotent).

    ``C`` is the engine's connection; a subclass gives the hooks below."""

    #: SQL for the ledger's clock, in seconds since the epoch
    now_sql: str
    #: what the engine's driver raises when the ledger cannot be reached or refuses
    errors: tuple[type[Exception], ...]

    def __init__(self, lease_s: float) -> None:
        self.lease_s = lease_s
        self.holder = f"pid {os.getpid()} on {socket.gethostname()}"
        self.id = ""
        self._conn: C | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- the engine's hooks ----------------------------------------------------------

    def _execute(self, conn: C, sql: str, parameters: Sequence[Any] = ()) -> Cursor:
        """Run one statement (``?`` placeholders) on the lease's own connection, which
        commits it at once."""
        raise NotImplementedError

    def _usable(self, conn: C) -> bool:
        """Whether ``conn`` can still be spoken to (else ``_reconnect`` replaces it)."""
        raise NotImplementedError

    def _reconnect(self) -> C:
        """A new connection of the lease's own, ready as ``start`` was given one.

        Raises: one of ``errors``, or LedgerInUse."""
        raise NotImplementedError

    def _close_connection(self, conn: C) -> None:
        raise NotImplementedError

    def _writing(self) -> AbstractContextManager[object]:
        """Held around each write of the lease: what the engine's writers queue for.

        Raises: LedgerError (LedgerBusy): it was not had within the engine's busy wait."""
        return contextlib.nullcontext()

    # -- the lease -----------------------------------------------------------------------

    def start(self, conn: C) -> None:
        """Take a lease on ``conn`` (kept for the heartbeat) and renew it from a thread
        until ``close``.

        Raises: one of ``errors``: the ledger refused; LedgerBusy: other writers kept
        the ledger past the busy wait."""
        self._conn = conn
        self._take(conn)
        self._thread = threading.Thread(target=self._beat, name="undogate-lease", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=STOP_WAIT_S)
        # Under the lock: a heartbeat that outlived the join is not writing beside it.
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is None:
                return
            # Ended, not left to expire: this process's work is recovery's at once. A
            # ledger out of reach or busy leaves it to expire instead, and says so.
            failures: tuple[type[Exception], ...] = (*self.errors, LedgerError)
            try:
                if self._usable(conn):
                    with self._writing():
                        self._execute(
                            conn,
                            f"UPDATE leases SET ended_at = {self.now_sql}, "  # noqa: S608
                            "ended_reason = 'closed' WHERE id = ? AND ended_at IS NULL",
                            (self.id,),
                        )
            except failures as exc:
                log.warning(
                    "this gateway could not end its lease %s on the ledger as it stopped "
                    "(%s): it expires within %.0f s, and other processes then settle its "
                    "writes in flight as uncertain",
                    self.id,
                    (str(exc).strip().splitlines() or ["no answer"])[0],
                    self.lease_s,
                )
            self._close_connection(conn)

    def _take(self, conn: C) -> None:
        # Named before it is written: a SIGTERM landing once the INSERT is committed
        # still finds the lease that ``close`` must end.
        self.id = "lse_" + secrets.token_hex(8)
        with self._writing():
            self._execute(
                conn,
                "INSERT INTO leases(id, holder, started_at, renewed_at, expires_at) "  # noqa: S608
                f"SELECT ?, ?, now, now, now + ? FROM (SELECT {self.now_sql} AS now) AS clock",
                (self.id, self.holder, self.lease_s),
            )

    def renew(self) -> None:
        """Push the expiry ``lease_s`` ahead; take a new lease if this one was ended.

        Raises: one of ``errors`` (or LedgerInUse): the ledger could not be reached;
        LedgerBusy: other writers kept the ledger past the busy wait."""
        with self._lock:
            conn = self._conn
            if conn is None:
                return
            if not self._usable(conn):
                conn = self._conn = self._reconnect()
            with self._writing():
                renewed = self._execute(
                    conn,
                    f"UPDATE leases SET renewed_at = {self.now_sql}, "  # noqa: S608
                    f"expires_at = {self.now_sql} + ? WHERE id = ? AND ended_at IS NULL "
                    "RETURNING id",
                    (self.lease_s, self.id),
                ).fetchall()  # read to the end: SQLite ends the statement's write only then
            if not renewed:
                lost = self.id
                self._take(conn)
                log.warning(
                    "this gateway's lease %s expired before it could renew it (the ledger "
                    "was out of reach or the process stalled): its writes in flight were "
                    "settled as uncertain by another process; now holding lease %s",
                    lost,
                    self.id,
                )

    def _beat(self) -> None:
        every = self.lease_s / 3
        failing = False
        unreachable: tuple[type[Exception], ...] = (*self.errors, LedgerInUse, LedgerError)
        while not self._stop.wait(every):
            try:
                self.renew()
            except unreachable as exc:
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
