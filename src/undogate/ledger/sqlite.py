"""The SQLite engine: one file that holds every job, action, preview and event.

One process owns it (an exclusive ``flock`` on ``ledger.lock``). Every write goes
through ``SQLiteStore.write``: one function, on the one connection, inside
``BEGIN IMMEDIATE``, so a state change and its event row commit together. Reads run on
one read-only connection per thread, so a read never waits for the writer's fsync.
Events (and jobs, changes, actions) cannot be deleted, and events cannot be updated:
triggers in the database refuse it, whatever the caller does. What SQLite raises
leaves this module as ``LedgerError`` (damage as ``LedgerDamaged``).
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import LedgerError, LedgerInUse
from .identity import LedgerIdentity, check_before_open, damage_error, remember
from .migrations import migrate
from .sql_verbs import SqlVerbs
from .store import Reader, ReadShortcuts, Store, Transaction

log = logging.getLogger(__name__)

T = TypeVar("T")
DB_NAME = "ledger.sqlite3"
LOCK_NAME = "ledger.lock"
_NETWORK_FS = {
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "fuse.sshfs",
    "9p",
    "afs",
    "ceph",
    "glusterfs",
}


class SQLiteTransaction(SqlVerbs):
    """The verbs of ``store.Transaction`` on one connection, inside the transaction the
    store opened. ``connection`` is for the engine's own checks and for tests; nothing
    outside ``ledger/`` writes SQL (tests/test_sql_boundary.py). Its locks do nothing:
    ``BEGIN IMMEDIATE`` already runs one write at a time."""

    connection: sqlite3.Connection

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection


class SQLiteStore(ReadShortcuts):
    """The single owner of the SQLite file. Use ``SQLiteStore.open`` and ``close``."""

    identity: LedgerIdentity  # set by ``open``: which ledger this is, how it was checked

    def __init__(self, data_dir: Path, conn: sqlite3.Connection, lock_fd: int) -> None:
        self.data_dir = data_dir
        self.path = data_dir / DB_NAME
        self._conn = conn
        self._writer = SQLiteTransaction(conn)
        self._lock_fd = lock_fd
        self._mutex = threading.RLock()
        self._in_tx = False
        self._writer_thread: int | None = None
        # Readers: one read-only connection per thread, so a read never waits for the
        # writer's fsync (WAL lets readers see the last commit while a write is under way).
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()

    # -- opening -------------------------------------------------------------

    @classmethod
    def open(cls, data_dir: Path, *, new_ledger: bool = False) -> SQLiteStore:
        """Create or open the ledger in ``data_dir`` and take ownership of it, after
        checking it is the ledger the data dir holds and is whole (``identity``).

        ``new_ledger``: replace a missing, empty, foreign or damaged ledger with a new one
        (its files are set aside, never deleted).

        Raises:
            LedgerInUse: another live process owns it (its pid is named).
            LedgerMissing, LedgerForeign: the data dir remembers another ledger.
            LedgerError: damaged (LedgerDamaged), permissions too open, or SQLite
                refused the settings.
            InvalidRequest: ``new_ledger`` on a ledger that is whole.
        """
        data_dir = Path(data_dir)
        if not data_dir.exists():
            data_dir.mkdir(mode=0o700, parents=True)
            os.chmod(data_dir, 0o700)
        _check_private(data_dir, 0o700, "directory")
        fs = _filesystem_type(data_dir)
        if fs in _NETWORK_FS or (fs or "").startswith("nfs"):
            log.warning(
                "the ledger directory %s is on a network filesystem (%s): SQLite locking and "
                "fsync are not trustworthy there; use a local disk",
                data_dir,
                fs,
            )
        lock_fd = take_lock(data_dir / LOCK_NAME)
        conn: sqlite3.Connection | None = None
        try:
            db_path = data_dir / DB_NAME
            found = check_before_open(db_path, new_ledger=new_ledger)
            _check_private(db_path, 0o600, "file")
            conn = sqlite3.connect(
                db_path, isolation_level=None, check_same_thread=False, timeout=5.0
            )
            ledger = cls(data_dir, conn, lock_fd)
            ledger._configure()
            with ledger._mutex:
                migrate(conn)
            ledger.identity = remember(conn, db_path, found)
        except BaseException:
            # A refused open keeps nothing: not the lock, not a half-configured connection.
            if conn is not None:
                conn.close()
            os.close(lock_fd)
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
        """Close the connections and release ownership (idempotent)."""
        with self._mutex:
            if self._lock_fd < 0:
                return
            with self._readers_lock:
                for reader in self._readers:
                    reader.close()
                self._readers.clear()
            self._conn.close()
            os.close(self._lock_fd)
            self._lock_fd = -1

    # -- the one door ----------------------------------------------------------

    def write(self, fn: Callable[[Transaction], T]) -> T:
        """Run ``fn`` inside one ``BEGIN IMMEDIATE`` transaction; commit or roll back.

        Raises:
            LedgerError: SQLite refused the write (LedgerDamaged: the file is damaged).
        """
        with self._mutex:
            if self._in_tx:
                return fn(self._writer)
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _ledger_failure("start a write", exc) from exc
            self._in_tx = True
            self._writer_thread = threading.get_ident()
            try:
                result = fn(self._writer)
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._roll_back()
                if isinstance(exc, sqlite3.Error):
                    raise _ledger_failure("commit", exc) from exc
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
        try:
            tx.connection.execute("BEGIN")
            try:
                return fn(tx)
            finally:
                tx.connection.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _ledger_failure("read", exc) from exc

    def _reader(self) -> SQLiteTransaction:
        tx: SQLiteTransaction | None = getattr(self._local, "tx", None)
        if tx is not None:
            return tx
        conn = sqlite3.connect(
            f"file:{self.path}?mode=ro",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=5.0,
        )
        with self._readers_lock:
            if self._lock_fd < 0:
                conn.close()
                raise LedgerError("the ledger is closed")
            self._readers.append(conn)
        tx = self._local.tx = SQLiteTransaction(conn)
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


def take_lock(lock_path: Path) -> int:
    """Own the data dir: an exclusive ``flock`` on ``lock_path`` holding our pid; returns
    its descriptor (closing it releases ownership, as does the process ending).

    Raises:
        LedgerInUse: another live process owns it (its pid is named).
    """
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            owner = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
        finally:
            os.close(fd)
        raise LedgerInUse(
            f"the ledger in {lock_path.parent} is owned by another process (pid {owner}); "
            "stop it, or go through its API",
            pid=owner,
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    os.fsync(fd)
    return fd


def _ledger_failure(doing: str, exc: sqlite3.Error) -> LedgerError:
    """SQLite's refusal as a sentence (its message names no value and no secret)."""
    damaged = damage_error(exc)
    if damaged is not None:
        return damaged
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


def _filesystem_type(path: Path) -> str | None:
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    best: tuple[str, str | None] = ("", None)
    target = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if (
            len(parts) >= 3
            and (target == parts[1] or target.startswith(parts[1].rstrip("/") + "/"))
            and len(parts[1]) >= len(best[0])
        ):
            best = (parts[1], parts[2])
    return best[1]


if TYPE_CHECKING:  # mypy holds the engine to the whole protocol
    _store: type[Store] = SQLiteStore
    _transaction: type[Transaction] = SQLiteTransaction
