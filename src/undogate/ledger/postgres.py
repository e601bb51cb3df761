"""The PostgreSQL engine: the same verbs as SQLite (sql_jobs, sql_admin) on a pool of
psycopg 3 connections.

- Every write is one ``READ COMMITTED`` transaction on one pooled connection, committed
  with ``synchronous_commit = on`` (set on every connection the pool makes). Writes run
  at once; each verb that reads for a decision first takes the lock it needs, held to
  the commit: ``pg_advisory_xact_lock(hashtext(name))`` on the idempotency key and
  each resource (``lock_resources``); the job's row ``FOR UPDATE`` before a preview is
  claimed or a write loads the job. A prepare's quotas and the ledger's limits are
  counted at its commit (``check_before_commit``), under the hash chain's lock, which
  every write holds from its chained inserts to its commit: the counts and the counter
  rows' update (``value + n``, exact) ride in the one round trip before the commit, and
  no other lock is a queue of its own.
- Every read is one ``REPEATABLE READ READ ONLY`` transaction: one snapshot.
- Inside a transaction the statements are pipelined: one whose result is not read (an
  insert, an update, a lock) leaves with the next one that is, or with the ``COMMIT``,
  so a round trip is paid per answer the verbs wait for, not per statement. A verb
  whose answer can wait returns an ``Answer``, read when needed (the action an intent
  records: after the commit), and a check can wait for the commit
  (``check_before_commit``: an outcome's "still in flight"), where the checks' answers
  share one round trip.
- An event's insert reads the chain's head itself and PostgreSQL hashes the link
  (``sha256`` over ``chain.link_around``'s bytes around the head: what ``row_hash``
  computes), so the chain's lock, the inserts and the commit leave together: under the
  lock the write waits for nothing but its checks' answers and the commit.
- The pool hands out connections without a liveness round trip; one the server wrote
  to while it sat idle begins alone, and found dead there is replaced
  (``_checked_out``): before anything of the transaction was sent, the only point
  where a retry cannot apply anything twice.
- While the database is away the pool tries to connect again about every second
  (``RECONNECT_S``, never psycopg_pool's growing backoff, which left a gateway
  answering 503 for half a minute after its database was back): the first request
  after the database returns is served.
- A read or write inside a write on the same thread joins it, as on SQLite.
- Any number of processes share the ledger: each holds a lease (``postgres_leases``),
  renewed by a heartbeat (``leases``); the writes it starts name it, and recovery
  settles only the work of a process whose lease expired. ``lease_s=None`` opens
  without one (the copy, which only fills an empty ledger).
- What psycopg raises leaves as ``LedgerError`` with a sentence (a database that went
  away too); the URL carries no password (config.py refuses one), so none is ever shown.
"""

from __future__ import annotations

import logging
import select
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ..chain import GENESIS, ChainedRow, body_digest, link_around
from ..errors import LedgerError
from .postgres_leases import LEASE_S, PostgresLease, pg_sql
from .postgres_schema import SCHEMA_VERSION, migrate
from .records import Answer
from .sql_base import Cursor
from .sql_chain import CHAIN_LOCK, ROW_COLUMNS, row_values
from .sql_verbs import SqlVerbs
from .store import Reader, ReadShortcuts, Store, Transaction

log = logging.getLogger(__name__)

T = TypeVar("T")
CONNECT_TIMEOUT_S = 10
POOL_SIZE = 10
#: How long a request waits for a pooled connection (the database down: then it fails)
WAIT_S = 10.0
#: How long the pool tries to make a connection before it starts over (``_keep_trying``)
RECONNECT_S = 1.0
#: An event after the chain's head, read by the statement itself (a statement sees
#: what committed before it began, and this transaction's own earlier inserts), its
#: link hashed by the database around it: ``row_hash``, byte for byte.
_LINKED_INSERT = (
    f"INSERT INTO events({ROW_COLUMNS}, prev_hash, hash) "  # noqa: S608 - constants only
    "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, head.hash, "
    "encode(sha256(? || convert_to(head.hash, 'UTF8') || ?), 'hex') "
    "FROM (SELECT COALESCE((SELECT hash FROM events ORDER BY id DESC LIMIT 1), "
    f"'{GENESIS}') AS hash) AS head"
)


class PgConnection:
    """``sql_jobs.Connection`` over a psycopg connection."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        return self.raw.execute(pg_sql(sql).encode(), parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor:
        cur = self.raw.cursor()
        cur.executemany(pg_sql(sql).encode(), list(parameters))
        return cur


class PostgresTransaction(SqlVerbs):
    """The verbs of ``store.Transaction`` on one pooled connection, inside the
    transaction the store opened; a write takes the locks its checks need."""

    connection: PgConnection

    def __init__(
        self, raw: psycopg.Connection[Any], *, writing: bool, lease_id: str | None
    ) -> None:
        self.connection = PgConnection(raw)
        self.writing = writing
        self.lease_id = lease_id
        self.for_update = " FOR UPDATE" if writing else ""
        self.skip_locked = " FOR UPDATE SKIP LOCKED" if writing else ""
        self.defer_chain = writing  # events are chained at the commit (sql_chain)
        self.pending = []
        self.checks = []
        #: the advisory locks this transaction holds (a second ask is no round trip)
        self._held: set[str] = set()

    def _clock(self) -> float:
        row = self.connection.execute(
            "SELECT EXTRACT(EPOCH FROM clock_timestamp())::double precision"
        ).fetchone()
        return float(row[0])

    def _lock(self, *names: str) -> None:
        if self.writing:
            for name in names:
                if name not in self._held:
                    self.connection.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (name,))
                    self._held.add(name)

    def _answer(self, cursor: Cursor, read: Callable[[Cursor], T]) -> Answer[T]:
        return Answer(lambda: read(cursor))

    def _insert_chained(self, rows: list[ChainedRow]) -> None:
        # After the chain's lock, which every chained insert holds to its commit: each
        # insert's head is the newest committed event or this write's previous one.
        self._lock(CHAIN_LOCK)
        for row in rows:
            before, after = link_around(row.job_id, body_digest(row))
            self.connection.execute(_LINKED_INSERT, (*row_values(row), before, after))
        self._run_checks()

    def check_before_commit(self, check: Callable[[], None]) -> None:
        if self.defer_chain:
            self.checks.append(check)
        else:
            check()

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
        lease: PostgresLease | None,
    ) -> None:
        self.url = url
        self.lease = lease
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
        lease_s: float | None = LEASE_S,
    ) -> PostgresStore:
        """Connect, build or migrate the schema, check it is an undogate ledger, and
        (``lease_s``) take this process's lease, renewed until ``close``.

        Raises:
            LedgerInUse: an undogate that does not share its ledger (no leases) owns it.
            LedgerError: the database cannot be reached, holds something else, or has a
                newer schema than this undogate.
        """
        lease = PostgresLease(url, lease_s, redacted(url)) if lease_s is not None else None
        conn: psycopg.Connection[Any] | None = None
        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
            if lease is not None:
                lease.share(conn)  # before migrating: never under an older, sole owner
            ledger_id, created = migrate(conn)
            if lease is not None:
                lease.start(conn)  # it keeps the connection, for its heartbeat
            else:
                conn.close()
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, psycopg.Error):
                raise failure("open", exc) from None
            raise
        # Its warning for every attempt (one a second while the database is away) would
        # bury the log; the lease heartbeat says once that the ledger is out of reach
        # and once that it is back, and every refused request says so itself.
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
        pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
            configure=_configure,
            # No check on checkout (a round trip before every transaction):
            # _checked_out replaces a connection found dead at its BEGIN instead.
            timeout=wait_s,
            reconnect_timeout=RECONNECT_S,
            reconnect_failed=_keep_trying,
            open=False,
            name="undogate-ledger",
        )
        try:
            pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout:
            pool.close()
            if lease is not None:
                lease.close()
            raise LedgerError(
                f"the PostgreSQL ledger at {redacted(url)} accepted one connection but the "
                "pool could not open more; check max_connections"
            ) from None
        store = cls(url, pool, ledger_id, created, lease)
        log.info("%s", store.describe())
        return store

    def describe(self) -> str:
        made = "new" if self.created else "opened"
        leased = (
            f", lease {self.lease.id} ({self.lease.lease_s:g} s)" if self.lease is not None else ""
        )
        return (
            f"ledger {redacted(self.url)} (PostgreSQL, schema {SCHEMA_VERSION}): "
            f"{made}, id {self.ledger_id}{leased}"
        )

    @property
    def location(self) -> str:
        return redacted(self.url)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()
            if self.lease is not None:
                self.lease.close()

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
        raw, begun = self._checked_out(begin.encode(), doing)
        outer = getattr(self._local, "tx", None)
        try:
            lease_id = self.lease.id if self.lease is not None else None
            tx = PostgresTransaction(raw, writing=writing, lease_id=lease_id)
            self._local.tx = tx
            try:
                # Pipelined: a statement whose result nobody reads (an insert, a lock)
                # goes out with the next one that is read, or with the COMMIT; the
                # server still runs them in order, and an error fails the transaction.
                with raw.pipeline():
                    if not begun:
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

    def _checked_out(self, begin: bytes, doing: str) -> tuple[psycopg.Connection[Any], bool]:
        """A pooled connection, and whether its transaction has begun.

        The pool hands out connections unchecked, and a BEGIN normally leaves with the
        transaction's first statement. A connection the server wrote to while it sat
        idle (what a database that ended the session or went down leaves: its last
        words, then the end of the stream) gets its BEGIN alone instead: found dead
        there, it has run nothing of this transaction, so the BEGIN is tried once more
        on a fresh connection, after the pool has dropped every other dead one (a
        restart kills them all). Nothing later is ever retried: a statement may have
        taken effect, and a failed COMMIT leaves the outcome unknown (``failure`` says
        so); a connection that died silently fails its transaction that way.
        """
        retried = False
        while True:
            try:
                raw: psycopg.Connection[Any] = self._pool.getconn()
            except (PoolTimeout, psycopg.Error) as exc:
                raise failure(doing, exc) from None
            if not retried and not _spoke_while_idle(raw):
                return raw, False
            try:
                raw.execute(begin)
                return raw, True
            except BaseException as exc:
                self._pool.putconn(raw)  # a broken connection is discarded, not pooled
                if not isinstance(exc, psycopg.Error):
                    raise
                if retried or not raw.closed:
                    raise failure(doing, exc) from None
                retried = True
                log.info("a pooled ledger connection was dead; trying a fresh one")
                self._pool.check()

    # -- for checks and tests ----------------------------------------------------------

    @contextmanager
    def raw(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection itself (autocommit), for checks and tests."""
        with self._pool.connection() as conn:
            yield conn


def _configure(conn: psycopg.Connection[Any]) -> None:
    # Durability: a COMMIT returns only once its WAL is on disk (never trust a server or
    # role default that turned it off). application_name shows who holds a lock.
    conn.execute("SET synchronous_commit = on")
    conn.execute("SET application_name = 'undogate'")


def _keep_trying(pool: ConnectionPool[Any]) -> None:
    """The pool gave up connecting for ``RECONNECT_S``: start again at once. Its own
    backoff doubles the wait after each failure (1, 2, 4 ... 32 s), so a database back
    after a minute could wait half a minute more for a gateway to notice; this keeps
    one attempt about every second for as long as the database is away."""
    if not pool.closed:
        pool.check()


def _spoke_while_idle(raw: psycopg.Connection[Any]) -> bool:
    """Whether the server sent anything (or closed the stream) since the last reply."""
    try:
        readable, _, _ = select.select([raw.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)


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
