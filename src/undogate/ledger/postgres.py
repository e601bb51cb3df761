"""The PostgreSQL engine: the same verbs as SQLite (sql_jobs, sql_admin) on a pool of
psycopg 3 connections.

- Every write is one ``READ COMMITTED`` transaction on one pooled connection, committed
  with ``synchronous_commit = on`` (set on every connection the pool makes). Writes run
  at once; each verb that reads for a decision first takes the lock it needs, held to
  the commit: ``pg_advisory_xact_lock(hashtext(name))`` on the idempotency key, the
  owner's quota and each resource (``lock_resources``); the job's row ``FOR UPDATE``
  before a preview is claimed or a write loads the job; the ledger-wide counter rows
  ``FOR UPDATE`` before the limits are checked (``UPDATE ... value + n`` keeps them
  exact).
- Every read is one ``REPEATABLE READ READ ONLY`` transaction: one snapshot.
- A read or write inside a write on the same thread joins it, as on SQLite.
- Until processes hold leases (the next step), one process owns the ledger, as on
  SQLite: a session advisory lock on a connection of its own, held while the store is
  open. A second owner gets ``LedgerInUse`` naming the first (pid and host).
- What psycopg raises leaves as ``LedgerError`` with a sentence (a database that went
  away too); the URL carries no password (config.py refuses one), so none is ever shown.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import LedgerError, LedgerInUse
from .postgres_schema import SCHEMA_VERSION, migrate
from .sql_admin import AdminVerbs
from .sql_base import Cursor
from .sql_jobs import JobVerbs
from .sql_passkeys import PasskeyVerbs
from .store import Reader, ReadShortcuts, Store, Transaction

log = logging.getLogger(__name__)

T = TypeVar("T")
CONNECT_TIMEOUT_S = 10
POOL_SIZE = 10
#: How long a request waits for a pooled connection (the database down: then it fails)
WAIT_S = 10.0
#: The session advisory lock of the one owning process ("ownr" in ASCII).
_OWNER_LOCK = 0x6F776E72
_OWNER_NAME = "undogate owner"
_translated: dict[str, str] = {}


def _pg(sql: str) -> str:
    """``?`` placeholders as psycopg spells them (the verbs' SQL holds no other ``?``)."""
    found = _translated.get(sql)
    if found is None:
        found = _translated[sql] = sql.replace("%", "%%").replace("?", "%s")
    return found


class PgConnection:
    """``sql_jobs.Connection`` over a psycopg connection."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        return self.raw.execute(_pg(sql).encode(), parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor:
        cur = self.raw.cursor()
        cur.executemany(_pg(sql).encode(), list(parameters))
        return cur


class PostgresTransaction(JobVerbs, AdminVerbs, PasskeyVerbs):
    """The verbs of ``store.Transaction`` on one pooled connection, inside the
    transaction the store opened; a write takes the locks its checks need."""

    connection: PgConnection

    def __init__(self, raw: psycopg.Connection[Any], *, writing: bool) -> None:
        self.connection = PgConnection(raw)
        self.writing = writing
        self.for_update = " FOR UPDATE" if writing else ""
        self.defer_chain = writing  # events are chained at the commit (sql_chain)
        self.pending = []

    def _lock(self, *names: str) -> None:
        if self.writing:
            for name in names:
                self.connection.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (name,))

    def _lock_job(self, job_id: str) -> None:
        if self.writing:
            self.connection.execute("SELECT 1 FROM jobs WHERE id = ? FOR UPDATE", (job_id,))


class PostgresStore(ReadShortcuts):
    """A PostgreSQL ledger, open. Use ``PostgresStore.open`` and ``close``."""

    def __init__(
        self,
        url: str,
        pool: ConnectionPool[Any],
        ledger_id: str,
        created: bool,
        owner: psycopg.Connection[Any] | None,
    ) -> None:
        self.url = url
        self._owner = owner
        self.ledger_id = ledger_id
        self.created = created
        self._pool = pool
        self._local = threading.local()
        self._closed = False

    @classmethod
    def open(
        cls,
        url: str,
        *,
        pool_size: int = POOL_SIZE,
        wait_s: float = WAIT_S,
        exclusive: bool = True,
    ) -> PostgresStore:
        """Connect, build or migrate the schema, check it is an undogate ledger, and
        (``exclusive``) own it. ``exclusive=False`` shares it: for tests of what several
        processes will do, until leases make that safe.

        Raises:
            LedgerInUse: another process owns it.
            LedgerError: the database cannot be reached, holds something else, or has a
                newer schema than this undogate.
        """
        owner: psycopg.Connection[Any] | None = None
        try:
            owner = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
            if exclusive:
                _take_ownership(owner, url)
            ledger_id, created = migrate(owner)
        except BaseException as exc:
            if owner is not None:
                owner.close()
            if isinstance(exc, psycopg.Error):
                raise failure("open", exc) from None
            raise
        if not exclusive:
            owner.close()
            owner = None
        pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
            configure=_configure,
            check=ConnectionPool.check_connection,
            timeout=wait_s,
            open=False,
            name="undogate-ledger",
        )
        try:
            pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout:
            pool.close()
            if owner is not None:
                owner.close()
            raise LedgerError(
                f"the PostgreSQL ledger at {redacted(url)} accepted one connection but the "
                "pool could not open more; check max_connections"
            ) from None
        store = cls(url, pool, ledger_id, created, owner)
        log.info("%s", store.describe())
        return store

    def describe(self) -> str:
        made = "new" if self.created else "opened"
        return (
            f"ledger {redacted(self.url)} (PostgreSQL, schema {SCHEMA_VERSION}): "
            f"{made}, id {self.ledger_id}"
        )

    @property
    def location(self) -> str:
        return redacted(self.url)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()
            if self._owner is not None:
                # Released before the session ends: a backend exits after the client has
                # closed, so a restart right after could otherwise find the lock held.
                with contextlib.suppress(psycopg.Error):
                    self._owner.execute("SELECT pg_advisory_unlock(%s)", (_OWNER_LOCK,))
                self._owner.close()

    # -- the one door ----------------------------------------------------------

    def write(self, fn: Callable[[Transaction], T]) -> T:
        """Run ``fn`` as one ``READ COMMITTED`` transaction; commit or roll back.

        Raises:
            LedgerError: PostgreSQL refused the write or went away (nothing was kept,
                unless the connection broke during the COMMIT itself).
        """
        current: PostgresTransaction | None = getattr(self._local, "tx", None)
        if current is not None and current.writing:
            return fn(current)
        with self._transaction("BEGIN ISOLATION LEVEL READ COMMITTED", "write") as tx:
            return fn(tx)

    def read(self, fn: Callable[[Reader], T]) -> T:
        """Run ``fn`` on one snapshot (``REPEATABLE READ READ ONLY``); inside a write on
        this thread it reads the write's own transaction.

        Raises:
            LedgerError: PostgreSQL could not be read.
        """
        current: PostgresTransaction | None = getattr(self._local, "tx", None)
        if current is not None:
            return fn(current)
        begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        with self._transaction(begin, "read", writing=False) as tx:
            return fn(tx)

    @contextmanager
    def _transaction(
        self, begin: str, doing: str, *, writing: bool = True
    ) -> Iterator[PostgresTransaction]:
        if self._closed:
            raise LedgerError("the ledger is closed")
        try:
            raw = self._pool.getconn()
        except (PoolTimeout, psycopg.Error) as exc:
            raise failure(doing, exc) from None
        outer = getattr(self._local, "tx", None)
        try:
            tx = PostgresTransaction(raw, writing=writing)
            self._local.tx = tx
            try:
                raw.execute(begin.encode())
                yield tx
                tx.flush_chain()
                raw.execute(b"COMMIT")
            except BaseException as exc:
                _roll_back(raw)
                if isinstance(exc, psycopg.Error):
                    raise failure(doing, exc) from None
                raise
        finally:
            self._local.tx = outer
            self._pool.putconn(raw)

    # -- for checks and tests ----------------------------------------------------------

    @contextmanager
    def raw(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection itself (autocommit), for checks and tests."""
        with self._pool.connection() as conn:
            yield conn


def _take_ownership(conn: psycopg.Connection[Any], url: str) -> None:
    """Hold the owner lock on ``conn``'s session, or raise LedgerInUse naming the owner."""
    me = f"{_OWNER_NAME} pid {os.getpid()} on {socket.gethostname()}"[:63]
    conn.execute("SELECT set_config('application_name', %s, false)", (me,))
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (_OWNER_LOCK,)).fetchone()
    if row is not None and row[0]:
        return
    found = conn.execute(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objid = %s "
        "AND a.datname = current_database()",
        (_OWNER_LOCK,),
    ).fetchone()
    owner = str(found[0]) if found else "another undogate process"
    raise LedgerInUse(
        f"the PostgreSQL ledger at {redacted(url)} is owned by {owner}; stop it, or go "
        "through its API (several processes on one ledger come with leases: docs/scaling.md)",
        owner=owner,
    )


def _configure(conn: psycopg.Connection[Any]) -> None:
    # Durability: a COMMIT returns only once its WAL is on disk (never trust a server or
    # role default that turned it off). application_name shows who holds a lock.
    conn.execute("SET synchronous_commit = on")
    conn.execute("SET application_name = 'undogate'")


def _roll_back(raw: psycopg.Connection[Any]) -> None:
    if raw.closed or raw.broken:
        return
    try:
        raw.execute(b"ROLLBACK")
    except psycopg.Error:
        log.warning("the ledger could not roll back a failed write; the connection is dropped")
        raw.close()


def redacted(url: str) -> str:
    """The URL as shown (config.py refuses one with a password; belt and braces)."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        userinfo, _, host = rest.rpartition("@")
        rest = userinfo.split(":", 1)[0] + "@" + host
    return scheme + sep + rest


def failure(doing: str, exc: BaseException) -> LedgerError:
    """What psycopg raised, as a sentence: no traceback, no password (none is in the URL;
    libpq's messages name the host, port, user and database at most)."""
    if isinstance(exc, psycopg.errors.RaiseException | psycopg.errors.RestrictViolation):
        message = exc.diag.message_primary or str(exc)
        return LedgerError(f"the ledger refused this change: {message}", postgres_error="refused")
    if isinstance(exc, psycopg.OperationalError | PoolTimeout):
        first = (str(exc).strip().splitlines() or ["no answer"])[0]
        return LedgerError(
            f"the ledger could not {doing}: the PostgreSQL database is unreachable or went "
            f"away ({first}). Nothing of this step was recorded unless its commit was under "
            "way; check the database and try again",
            postgres_error=type(exc).__name__,
        )
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return LedgerError(
        f"the ledger could not {doing}: PostgreSQL refused it ({first}). Nothing of this "
        "step was recorded",
        postgres_error=type(exc).__name__,
    )


if TYPE_CHECKING:  # mypy holds the engine to the whole protocol
    _store: type[Store] = PostgresStore
    _transaction: type[Transaction] = PostgresTransaction
