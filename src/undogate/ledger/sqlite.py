"""The SQLite engine: one file that holds every job, action, preview and event.

Several processes on one machine may share it (docs/scaling.md): each holds the data
dir's ``ledger.lock`` shared (``sqlite_files``) and a lease (``sqlite_leases``), so an
in-flight write names its process and only a process whose lease expired has its work
settled. Every write goes through ``SQLiteStore.write``: one function, on the process's
one writer connection, inside ``BEGIN IMMEDIATE``, so a state change and its event row
commit together, and SQLite's write lock runs one write at a time across every process.
Every writer (these writes, opening's migrations, the lease's renewals) first takes its
turn to write (``sqlite_files.WriteTurn``), so they queue in the kernel, not in SQLite's
sleeping busy wait. A write waits for its turn, then for SQLite's lock, at most
``busy_s`` each; past it the step is refused (``ledger_busy``) and nothing of it is
recorded. Reads run on one read-only connection
per thread, so a read never waits for a writer's fsync. Events (and jobs, changes,
actions) cannot be deleted, and events cannot be updated: triggers in the database
refuse it, whatever the caller does. What SQLite raises leaves this module as
``LedgerError`` (damage as ``LedgerDamaged``, a wait too long as ``LedgerBusy``).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import LedgerBusy, LedgerError
from .identity import (
    LedgerIdentity,
    check_before_open,
    check_beside_others,
    damage_error,
    remember,
)
from .leases import LEASE_S
from .migrations import migrate
from .sql_verbs import SqlVerbs
from .sqlite_files import (
    Hold,
    WriteTurn,
    hold_ledger,
    opening,
    refuse_network_filesystem,
)
from .sqlite_leases import SQLiteLease
from .store import Reader, ReadShortcuts, Store, Transaction

log = logging.getLogger(__name__)

T = TypeVar("T")
DB_NAME = "ledger.sqlite3"
#: How long a write waits for SQLite's write lock, held by another process's write.
BUSY_S = 5.0
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6


class SQLiteTransaction(SqlVerbs):
    """The verbs of ``store.Transaction`` on one connection, inside the transaction the
    store opened. ``connection`` is for the engine's own checks and for tests; nothing
    outside ``ledger/`` writes SQL (tests/test_sql_boundary.py). Its locks do nothing:
    ``BEGIN IMMEDIATE`` already runs one write at a time, across processes too."""

    connection: sqlite3.Connection

    def __init__(self, connection: sqlite3.Connection, lease_id: str | None) -> None:
        self.connection = connection
        self.lease_id = lease_id


class SQLiteStore(ReadShortcuts):
    """A SQLite ledger, open in this process. Use ``SQLiteStore.open`` and ``close``."""

    identity: LedgerIdentity  # set by ``open``: which ledger this is, how it was checked

    def __init__(self, data_dir: Path, conn: sqlite3.Connection, hold: Hold) -> None:
        self.data_dir = data_dir
        self.path = data_dir / DB_NAME
        self.lease: SQLiteLease | None = None  # set by ``open``
        self._conn = conn
        self._writer = SQLiteTransaction(conn, None)
        self._hold = hold
        self._turn = WriteTurn(data_dir)
        self._mutex = threading.RLock()
        self._in_tx = False
        self._writer_thread: int | None = None
        # Readers: one read-only connection per thread, so a read never waits for the
        # writer's fsync (WAL lets readers see the last commit while a write is under way).
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._busy_s = BUSY_S

    # -- opening -------------------------------------------------------------

    @classmethod
    def open(
        cls,
        data_dir: Path,
        *,
        new_ledger: bool = False,
        lease_s: float | None = LEASE_S,
        alone: bool = False,
        busy_s: float = BUSY_S,
    ) -> SQLiteStore:
        """Create or open the ledger in ``data_dir``, beside the other processes that
        serve it, after checking it is the ledger the data dir holds (``identity``) and,
        when no other process has it open, that it is whole; then (``lease_s``) take this
        process's lease, renewed until ``close``.

        ``new_ledger``: replace a missing, empty, foreign or damaged ledger with a new one
        (its files are set aside, never deleted); it needs the ledger to itself, as does
        ``alone`` (a copy that must see nothing change).

        Raises:
            LedgerInUse: other processes serve it and this open needs it alone, or an
                undogate that does not share its ledger owns it (its pid is named).
            LedgerOnNetworkFilesystem: ``data_dir`` is not on a local disk.
            LedgerMissing, LedgerForeign: the data dir remembers another ledger.
            LedgerError: damaged (LedgerDamaged), permissions too open, or SQLite
                refused the settings.
            InvalidRequest: ``new_ledger`` on a ledger that is whole.
        """
        data_dir = Path(data_dir)
        if not data_dir.exists():
            # Processes started at once may race to make it: the loser finds it made.
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(data_dir, 0o700)
        _check_private(data_dir, 0o700, "directory")
        refuse_network_filesystem(data_dir)
        with opening(data_dir):
            hold = hold_ledger(data_dir, alone=alone or new_ledger)
            conn: sqlite3.Connection | None = None
            ledger: SQLiteStore | None = None
            try:
                db_path = data_dir / DB_NAME
                if hold.alone:
                    found = check_before_open(db_path, new_ledger=new_ledger)
                else:
                    found = check_beside_others(db_path)
                _check_private(db_path, 0o600, "file")
                conn = sqlite3.connect(
                    db_path, isolation_level=None, check_same_thread=False, timeout=busy_s
                )
                ledger = cls(data_dir, conn, hold)
                ledger._busy_s = busy_s
                ledger._configure()
                # Its writes take their turn as every other write: processes already
                # serving the ledger keep writing while this one opens it.
                with ledger._mutex, ledger._turn.held(busy_s):
                    migrate(conn)
                    ledger.identity = remember(conn, db_path, found)
                    if hold.alone:
                        _end_leases_of_the_gone(conn)
                if lease_s is not None:
                    ledger.lease = SQLiteLease(db_path, lease_s, busy_s)
                    ledger.lease.start(ledger.lease.connect())
                if hold.alone and not alone:
                    hold.share()
            except BaseException as exc:
                # A refused open keeps nothing: not the hold, not a lease, not a
                # half-configured connection.
                if ledger is not None:
                    ledger._turn.close()
                    if ledger.lease is not None:
                        ledger.lease.close()
                if conn is not None:
                    conn.close()
                hold.release()
                if isinstance(exc, sqlite3.Error):
                    raise _ledger_failure("open", exc, busy_s) from exc
                raise
        return ledger

    def _configure(self) -> None:
        c = self._conn
        mode = c.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        c.execute("PRAGMA synchronous=FULL")
        c.execute("PRAGMA foreign_keys=ON")
        sync = c.execute("PRAGMA synchronous").fetchone()[0]
        fks = c.execute("PRAGMA foreign_keys").fetchone()[0]
        if str(mode).lower() != "wal" or sync != 2 or fks != 1:
            raise LedgerError(
                f"SQLite refused the ledger settings (journal_mode={mode}, "
                f"synchronous={sync}, foreign_keys={fks})"
            )

    @property
    def location(self) -> str:
        return str(self.path)

    def describe(self) -> str:
        return self.identity.describe(self.path)

    def close(self) -> None:
        """End the lease (this process's work is recovery's at once), close the
        connections and release the hold (idempotent)."""
        with self._mutex:
            if self._hold.fd < 0:
                return
            with self._readers_lock:
                for reader in self._readers:
                    reader.close()
                self._readers.clear()
            # The store's connection and turn first: a write a SIGTERM cut short may still
            # hold them (SQLite's write lock, the turn), and the lease's last write waits
            # for both.
            self._conn.close()
            self._turn.close()
            if self.lease is not None:
                self.lease.close()
            self._hold.release()

    # -- the one door ----------------------------------------------------------

    def write(self, fn: Callable[[Transaction], T]) -> T:
        """Run ``fn`` inside one ``BEGIN IMMEDIATE`` transaction, in this process's turn
        to write (``WriteTurn``); commit or roll back.

        Raises:
            LedgerBusy: other processes kept the turn, or SQLite's write lock, past the
                busy wait; nothing was recorded.
            LedgerError: SQLite refused the write (LedgerDamaged: the file is damaged).
        """
        with self._mutex:
            if self._in_tx:
                return fn(self._writer)
            with self._turn.held(self._busy_s):
                return self._write_in_turn(fn)

    def _write_in_turn(self, fn: Callable[[Transaction], T]) -> T:
        # Every writer of this ledger takes the turn first (this store's, every lease's,
        # every other process's), so SQLite's write lock is free here unless an older
        # undogate or a tool that is not undogate holds it: those are waited for by
        # SQLite's busy wait.
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _ledger_failure("start a write", exc, self._busy_s) from exc
        if self.lease is not None:
            self._writer.lease_id = self.lease.id  # a lease lost is replaced
        self._in_tx = True
        self._writer_thread = threading.get_ident()
        try:
            result = fn(self._writer)
            self._conn.execute("COMMIT")
        except BaseException as exc:
            self._roll_back()
            if isinstance(exc, sqlite3.Error):
                raise _ledger_failure("commit", exc, self._busy_s) from exc
            raise
        finally:
            self._in_tx = False
            self._writer_thread = None
        return result

    def _roll_back(self) -> None:
        # A failed COMMIT (a full disk) may leave the transaction open, or SQLite may have
        # rolled it back already; either way nothing of it is kept.
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                log.exception("the ledger could not roll back a failed write")

    def read(self, fn: Callable[[Reader], T]) -> T:
        """Run ``fn`` on one consistent snapshot of the last commit.

        Inside a ``write`` on the same thread it reads the writer's own transaction, so
        a write function always sees what it has written so far.

        Raises:
            LedgerError: SQLite could not read (LedgerDamaged: the file is damaged).
        """
        if self._writer_thread == threading.get_ident():
            return fn(self._writer)
        tx = self._reader()
        tx.lease_id = self.lease.id if self.lease is not None else None
        try:
            tx.connection.execute("BEGIN")
            try:
                return fn(tx)
            finally:
                tx.connection.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _ledger_failure("read", exc, self._busy_s) from exc

    def _reader(self) -> SQLiteTransaction:
        tx: SQLiteTransaction | None = getattr(self._local, "tx", None)
        if tx is not None:
            return tx
        conn = sqlite3.connect(
            f"file:{self.path}?mode=ro",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=self._busy_s,
        )
        with self._readers_lock:
            if self._hold.fd < 0:
                conn.close()
                raise LedgerError("the ledger is closed")
            self._readers.append(conn)
        tx = self._local.tx = SQLiteTransaction(conn, None)
        return tx

    # -- for checks and tests ----------------------------------------------------------

    @contextmanager
    def raw(self) -> Iterator[sqlite3.Connection]:
        """The writer connection itself, for checks (integrity, query plans) and tests."""
        with self._mutex:
            yield self._conn

    def pragma(self, name: str) -> Any:
        with self._mutex:
            return self._conn.execute(f"PRAGMA {name}").fetchone()[0]


def _ledger_failure(doing: str, exc: sqlite3.Error, busy_s: float) -> LedgerError:
    """SQLite's refusal as a sentence (its message names no value and no secret)."""
    damaged = damage_error(exc)
    if damaged is not None:
        return damaged
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return LedgerBusy(
            f"the ledger could not {doing}: other processes sharing it held its write lock "
            f"for more than {busy_s:g} s. Nothing of this step was recorded; try again",
            busy_s=busy_s,
        )
    return LedgerError(
        f"the ledger could not {doing}: {exc}. Nothing of this step was recorded; "
        "free disk space or restore the ledger from a backup, then try again",
        sqlite_error=type(exc).__name__,
    )


def _check_private(path: Path, want: int, what: str) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise LedgerError(
            f"the ledger {what} {path} is mode {mode:o}; it must be private "
            f"(chmod {want:o} {path})",
            path=str(path),
        )


if TYPE_CHECKING:  # mypy holds the engine to the whole protocol
    _store: type[Store] = SQLiteStore
    _transaction: type[Transaction] = SQLiteTransaction


def _end_leases_of_the_gone(conn: sqlite3.Connection) -> None:
    """End every open lease: this process holds the ledger alone, and every process that
    holds a lease holds the ledger's lock while it lives, so each is gone (a kill -9
    included). Their work is recovery's now, not when their last renewal runs out."""
    conn.execute(  # autocommit: one statement, durable at once
        "UPDATE leases SET ended_at = ?, ended_reason = 'gone' WHERE ended_at IS NULL",
        (time.time(),),
    )
