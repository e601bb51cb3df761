"""The ledger: one SQLite file that holds every job, action, preview and event.

One process owns it (an exclusive ``flock`` on ``ledger.lock``). Every write goes
through ``Ledger.write``: one function, on the one connection, inside
``BEGIN IMMEDIATE``, so a state change and its event row commit together. Events (and
jobs, changes, actions) cannot be deleted, and events cannot be updated: triggers in
the database refuse it, whatever the caller does.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .errors import ChangedSincePreview, LedgerError, LedgerInUse, PreviewUsed
from .jobs import (
    ABSENT,
    Action,
    ActionStatus,
    AssertionKind,
    Change,
    ChangeState,
    Job,
    JobState,
    Observation,
    Operation,
    SideValue,
)
from .jsonvalue import JsonObject, dumps, loads_object
from .ledger_identity import (
    LedgerIdentity,
    check_before_open,
    damage_error,
    remember,
)

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

_MIGRATIONS: list[str] = [
    # 1: the first schema.
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE jobs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        owner_id TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        summary TEXT NOT NULL,
        attribution_label TEXT,
        idempotency_key TEXT,
        request_digest TEXT NOT NULL,
        state TEXT NOT NULL,
        undo_started INTEGER NOT NULL DEFAULT 0,
        invalidated_reason TEXT,
        confirm_attempts INTEGER NOT NULL DEFAULT 0,
        payload_bytes INTEGER NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE UNIQUE INDEX jobs_idempotency ON jobs(owner_id, agent_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE INDEX jobs_by_agent ON jobs(owner_id, agent_id, seq DESC);
    CREATE INDEX jobs_unfinished ON jobs(state)
        WHERE state NOT IN ('undone', 'rejected', 'invalidated');
    CREATE TABLE changes (
        job_id TEXT NOT NULL REFERENCES jobs(id),
        idx INTEGER NOT NULL,
        resource_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        fields TEXT NOT NULL,
        before_json TEXT,
        after_json TEXT,
        before_text TEXT,
        after_text TEXT,
        media_type TEXT NOT NULL,
        prepared_etag TEXT NOT NULL,
        assertion_kind TEXT,
        state TEXT NOT NULL,
        applied_etag TEXT,
        applied_seq INTEGER,
        PRIMARY KEY (job_id, idx)
    );
    CREATE INDEX changes_live ON changes(resource_id, state)
        WHERE state IN ('applied', 'uncertain');
    CREATE TABLE actions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL REFERENCES jobs(id),
        change_idx INTEGER NOT NULL,
        operation TEXT NOT NULL,
        status TEXT NOT NULL,
        method TEXT NOT NULL,
        url TEXT NOT NULL,
        if_match TEXT,
        response_status INTEGER,
        result_etag TEXT,
        address TEXT,
        detail TEXT,
        observation TEXT,
        started_at REAL NOT NULL,
        finished_at REAL,
        FOREIGN KEY (job_id, change_idx) REFERENCES changes(job_id, idx)
    );
    CREATE INDEX actions_by_job ON actions(job_id, id);
    CREATE INDEX actions_in_flight ON actions(status) WHERE status = 'dispatching';
    CREATE TABLE previews (
        token_hash TEXT PRIMARY KEY,
        job_id TEXT NOT NULL REFERENCES jobs(id),
        operation TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        consumed_at REAL,
        op_seq INTEGER,
        snapshot TEXT NOT NULL,
        receipt_seq INTEGER
    );
    CREATE INDEX previews_by_job ON previews(job_id, consumed_at);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT,
        at REAL NOT NULL,
        actor TEXT NOT NULL,
        access_path TEXT NOT NULL,
        operation TEXT NOT NULL,
        target TEXT,
        from_state TEXT,
        to_state TEXT,
        detail TEXT
    );
    CREATE INDEX events_by_job ON events(job_id, id);
    CREATE TABLE resource_identities (
        resource_id TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL
    );
    CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER jobs_never_deleted BEFORE DELETE ON jobs
        BEGIN SELECT RAISE(ABORT, 'jobs are never deleted'); END;
    CREATE TRIGGER changes_never_deleted BEFORE DELETE ON changes
        BEGIN SELECT RAISE(ABORT, 'changes are never deleted'); END;
    CREATE TRIGGER actions_never_deleted BEFORE DELETE ON actions
        BEGIN SELECT RAISE(ABORT, 'actions are never deleted'); END;
    INSERT INTO meta(key, value) VALUES ('job_count', '0'), ('payload_bytes', '0');
    """,
    # 2: credentials (operator keys = owners, agent tokens). Only hashes are stored; a
    # credential is never deleted and never changed except to revoke it, so no scope
    # can be widened in place (issue a new key instead).
    """
    CREATE TABLE credentials (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('operator', 'agent')),
        owner_id TEXT NOT NULL,
        agent_id TEXT,
        scopes TEXT NOT NULL,
        agents TEXT,
        label TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        created_at REAL NOT NULL,
        revoked_at REAL,
        revoked_reason TEXT
    );
    CREATE INDEX credentials_by_owner ON credentials(owner_id);
    CREATE TRIGGER credentials_never_deleted BEFORE DELETE ON credentials
        BEGIN SELECT RAISE(ABORT, 'credentials are never deleted'); END;
    CREATE TRIGGER credentials_immutable BEFORE UPDATE OF
        id, kind, owner_id, agent_id, scopes, agents, label, key_hash, created_at
        ON credentials
        BEGIN SELECT RAISE(ABORT, 'credentials are immutable; issue a new one'); END;
    CREATE TRIGGER credentials_revocation_final BEFORE UPDATE ON credentials
        WHEN OLD.revoked_at IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'a revoked credential stays revoked'); END;
    """,
    # 3: start-up recovery finds running jobs through an index of exactly those states
    # (SQLite cannot prove "IN (applying, undoing)" implies the NOT IN of jobs_unfinished,
    # so without this it read every job).
    """
    CREATE INDEX jobs_running ON jobs(state) WHERE state IN ('applying', 'undoing');
    """,
    # 4: a preview remembers the job's last operation when it was made, so a token from
    # before a newer operation can never run on a job that merely looks the same again.
    """
    ALTER TABLE previews ADD COLUMN base_seq INTEGER NOT NULL DEFAULT 0;
    """,
    # 5: endpoint checks on a test copy (SPEC §11): evidence only (digests, counts,
    # statuses, outcomes; never values), append-only like events.
    """
    CREATE TABLE endpoint_checks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        resource_id TEXT NOT NULL,
        test_copy_id TEXT NOT NULL,
        production_fingerprint TEXT NOT NULL,
        test_copy_fingerprint TEXT NOT NULL,
        at REAL NOT NULL,
        passed INTEGER NOT NULL,
        evidence TEXT NOT NULL
    );
    CREATE INDEX endpoint_checks_by_resource ON endpoint_checks(resource_id, id DESC);
    CREATE TRIGGER endpoint_checks_append_only_update BEFORE UPDATE ON endpoint_checks
        BEGIN SELECT RAISE(ABORT, 'endpoint checks are append-only'); END;
    CREATE TRIGGER endpoint_checks_append_only_delete BEFORE DELETE ON endpoint_checks
        BEGIN SELECT RAISE(ABORT, 'endpoint checks are append-only'); END;
    """,
    # 6: the per-agent and per-owner quotas count unresolved jobs (jobs.UNRESOLVED_STATES,
    # same order) inside every prepare's write: this index holds only those, so a count
    # reads at most one owner's unresolved jobs, never the whole history.
    """
    CREATE INDEX jobs_unresolved ON jobs(owner_id, agent_id, state)
        WHERE state IN ('prepared', 'applying', 'partially_applied', 'needs_review',
                        'undoing', 'partially_undone');
    """,
    # 7: a change's two sides, kind-neutral: each is NULL (the resource does not exist
    # on that side) or the JSON text its kind's adapter defines. From the columns that
    # flattened the two kinds: a record's side is its lossless JSON text as it was; a
    # document's is {"text", "media_type"}.
    """
    ALTER TABLE changes ADD COLUMN before_side TEXT;
    ALTER TABLE changes ADD COLUMN after_side TEXT;
    UPDATE changes SET
        before_side = CASE WHEN before_text IS NOT NULL
            THEN json_object('text', before_text, 'media_type', media_type)
            ELSE before_json END,
        after_side = CASE WHEN after_text IS NOT NULL
            THEN json_object('text', after_text, 'media_type', media_type)
            ELSE after_json END;
    ALTER TABLE changes DROP COLUMN before_json;
    ALTER TABLE changes DROP COLUMN after_json;
    ALTER TABLE changes DROP COLUMN before_text;
    ALTER TABLE changes DROP COLUMN after_text;
    """,
]
SCHEMA_VERSION = len(_MIGRATIONS)


@dataclass(frozen=True)
class Event:
    id: int
    job_id: str | None
    at: float
    actor: str
    access_path: str
    operation: str
    target: str | None
    from_state: str | None
    to_state: str | None
    detail: JsonObject | None


@dataclass(frozen=True)
class OpenChange:
    """Another job's change that still holds a resource: applied, uncertain, or with a
    write in flight right now (an intent committed, no outcome yet)."""

    job_id: str
    kind: str
    fields: tuple[str, ...]
    state: ChangeState
    applied_seq: int | None
    fingerprint: str
    in_flight: bool


@dataclass(frozen=True)
class StoredPreview:
    token_hash: str
    job_id: str
    operation: Operation
    created_at: float
    expires_at: float
    consumed_at: float | None
    op_seq: int | None
    snapshot: JsonObject


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


class Ledger:
    """The single owner of the SQLite file. Use ``Ledger.open`` and ``close``."""

    identity: LedgerIdentity  # set by ``open``: which ledger this is, how it was checked

    def __init__(self, data_dir: Path, conn: sqlite3.Connection, lock_fd: int) -> None:
        self.data_dir = data_dir
        self.path = data_dir / DB_NAME
        self._conn = conn
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
    def open(cls, data_dir: Path, *, new_ledger: bool = False) -> Ledger:
        """Create or open the ledger in ``data_dir`` and take ownership of it, after
        checking it is the ledger the data dir holds and is whole (ledger_identity).

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
        lock_fd = cls._take_lock(data_dir / LOCK_NAME)
        try:
            db_path = data_dir / DB_NAME
            found = check_before_open(db_path, new_ledger=new_ledger)
            _check_private(db_path, 0o600, "file")
            conn = sqlite3.connect(
                db_path, isolation_level=None, check_same_thread=False, timeout=5.0
            )
            ledger = cls(data_dir, conn, lock_fd)
            ledger._configure()
            ledger._migrate()
            ledger.identity = remember(conn, db_path, found)
        except BaseException:
            os.close(lock_fd)
            raise
        return ledger

    @staticmethod
    def _take_lock(lock_path: Path) -> int:
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

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise LedgerError(
                f"the ledger has schema {version}, newer than this undogate ({SCHEMA_VERSION})"
            )
        for number in range(version, SCHEMA_VERSION):
            with self._mutex:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in _split_sql(_MIGRATIONS[number]):
                        self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version = {number + 1}")
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise

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

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` inside one ``BEGIN IMMEDIATE`` transaction; commit or roll back."""
        with self._mutex:
            if self._in_tx:
                return fn(self._conn)
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _ledger_failure("start a write", exc) from exc
            self._in_tx = True
            self._writer_thread = threading.get_ident()
            try:
                result = fn(self._conn)
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

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on one consistent snapshot of the last commit.

        Inside a ``write`` on the same thread it reads the writer's own transaction, so
        a write function always sees what it has written so far.
        """
        if self._writer_thread == threading.get_ident():
            return fn(self._conn)
        conn = self._reader()
        try:
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _ledger_failure("read", exc) from exc

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
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
        self._local.conn = conn
        return conn

    @contextmanager
    def raw(self) -> Iterator[sqlite3.Connection]:
        """The connection itself, for checks (integrity, pragmas) and tests."""
        with self._mutex:
            yield self._conn

    def pragma(self, name: str) -> Any:
        with self._mutex:
            return self._conn.execute(f"PRAGMA {name}").fetchone()[0]

    # -- counters --------------------------------------------------------------

    def counter(self, key: str) -> int:
        def q(c: sqlite3.Connection) -> int:
            row = c.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            return int(row[0]) if row else 0

        return self.read(q)

    @staticmethod
    def bump(c: sqlite3.Connection, key: str, by: int) -> None:
        c.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + ?",
            (key, str(by), by),
        )

    # -- events ------------------------------------------------------------------

    @staticmethod
    def add_event(
        c: sqlite3.Connection,
        *,
        job_id: str | None,
        actor: str,
        access_path: str,
        operation: str,
        target: str | None = None,
        from_state: str | None = None,
        to_state: str | None = None,
        detail: JsonObject | None = None,
    ) -> None:
        c.execute(
            "INSERT INTO events(job_id, at, actor, access_path, operation, target, "
            "from_state, to_state, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job_id,
                time.time(),
                actor,
                access_path,
                operation,
                target,
                from_state,
                to_state,
                dumps(detail) if detail is not None else None,
            ),
        )

    def events(self, job_id: str) -> list[Event]:
        def q(c: sqlite3.Connection) -> list[Event]:
            rows = c.execute(
                "SELECT id, job_id, at, actor, access_path, operation, target, from_state, "
                "to_state, detail FROM events WHERE job_id = ? ORDER BY id",
                (job_id,),
            ).fetchall()
            return [
                Event(*row[:9], loads_object(row[9]) if row[9] else None)  # type: ignore[call-arg]
                for row in rows
            ]

        return self.read(q)

    # -- jobs --------------------------------------------------------------------

    @staticmethod
    def insert_job(c: sqlite3.Connection, job: Job, request_digest: str, payload: int) -> None:
        c.execute(
            "INSERT INTO jobs(id, owner_id, agent_id, summary, attribution_label, "
            "idempotency_key, request_digest, state, undo_started, payload_bytes, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
            (
                job.id,
                job.owner_id,
                job.agent_id,
                job.summary,
                job.attribution_label,
                job.idempotency_key,
                request_digest,
                job.state.value,
                payload,
                job.created_at,
                job.updated_at,
            ),
        )
        for ch in job.changes:
            c.execute(_INSERT_CHANGE, (job.id, *_change_row(ch)))
        Ledger.bump(c, "job_count", 1)
        Ledger.bump(c, "payload_bytes", payload)

    def load_job(self, job_id: str, *, with_actions: bool = True) -> Job | None:
        return self.read(lambda c: self.load_job_in(c, job_id, with_actions=with_actions))

    @staticmethod
    def load_job_in(c: sqlite3.Connection, job_id: str, *, with_actions: bool = True) -> Job | None:
        row = c.execute(
            "SELECT id, owner_id, agent_id, summary, attribution_label, idempotency_key, state, "
            "undo_started, created_at, updated_at, invalidated_reason FROM jobs WHERE id = ?",
            (job_id,),
        ).fetchone()
        if row is None:
            return None
        changes = tuple(_change_from_row(r) for r in c.execute(_SELECT_CHANGES, (job_id,)))
        actions: tuple[Action, ...] = ()
        if with_actions:
            actions = tuple(
                _action_from_row(r)
                for r in c.execute(
                    "SELECT id, job_id, change_idx, operation, status, method, url, if_match, "
                    "response_status, result_etag, address, detail, observation, started_at, "
                    "finished_at FROM actions WHERE job_id = ? ORDER BY id",
                    (job_id,),
                )
            )
        return Job(
            id=row[0],
            owner_id=row[1],
            agent_id=row[2],
            summary=row[3],
            attribution_label=row[4],
            idempotency_key=row[5],
            state=JobState(row[6]),
            undo_started=bool(row[7]),
            created_at=row[8],
            updated_at=row[9],
            invalidated_reason=row[10],
            changes=changes,
            actions=actions,
        )

    @staticmethod
    def set_job_state(
        c: sqlite3.Connection,
        job_id: str,
        state: JobState,
        *,
        undo_started: bool | None = None,
        invalidated_reason: str | None = None,
    ) -> None:
        c.execute(
            "UPDATE jobs SET state = ?, updated_at = ?, "
            "undo_started = COALESCE(?, undo_started), "
            "invalidated_reason = COALESCE(?, invalidated_reason) WHERE id = ?",
            (
                state.value,
                time.time(),
                None if undo_started is None else int(undo_started),
                invalidated_reason,
                job_id,
            ),
        )

    @staticmethod
    def set_change_state(
        c: sqlite3.Connection,
        job_id: str,
        index: int,
        state: ChangeState,
        *,
        applied_etag: str | None = None,
        applied_seq: int | None = None,
    ) -> None:
        c.execute(
            "UPDATE changes SET state = ?, applied_etag = COALESCE(?, applied_etag), "
            "applied_seq = COALESCE(?, applied_seq) WHERE job_id = ? AND idx = ?",
            (state.value, applied_etag, applied_seq, job_id, index),
        )

    def list_jobs(
        self, owner_id: str, agent_id: str, limit: int = 100
    ) -> list[tuple[str, str, str, float, int]]:
        """Newest first: (id, state, summary, created_at, change count). No values."""

        def q(c: sqlite3.Connection) -> list[tuple[str, str, str, float, int]]:
            return [
                (r[0], r[1], r[2], r[3], r[4])
                for r in c.execute(
                    "SELECT j.id, j.state, j.summary, j.created_at, "
                    "(SELECT COUNT(*) FROM changes ch WHERE ch.job_id = j.id) "
                    "FROM jobs j WHERE j.owner_id = ? AND j.agent_id = ? "
                    "ORDER BY j.seq DESC LIMIT ?",
                    (owner_id, agent_id, limit),
                )
            ]

        return self.read(q)

    @staticmethod
    def open_changes(c: sqlite3.Connection, resource_id: str, exclude_job: str) -> list[OpenChange]:
        """Other jobs' changes that hold ``resource_id`` (any identity: a quarantine
        outlives a config change). Two indexed reads: changes_live and actions_in_flight."""
        held = c.execute(
            "SELECT job_id, kind, fields, state, applied_seq, fingerprint, 0 FROM changes "
            "WHERE resource_id = ? AND state IN ('applied', 'uncertain') AND job_id != ?",
            (resource_id, exclude_job),
        ).fetchall()
        flying = c.execute(
            "SELECT ch.job_id, ch.kind, ch.fields, ch.state, ch.applied_seq, ch.fingerprint, 1 "
            "FROM actions a JOIN changes ch ON ch.job_id = a.job_id AND ch.idx = a.change_idx "
            "WHERE a.status = 'dispatching' AND ch.resource_id = ? AND a.job_id != ?",
            (resource_id, exclude_job),
        ).fetchall()
        return [
            OpenChange(
                job_id=r[0],
                kind=r[1],
                fields=_fields_from_json(r[2]),
                state=ChangeState(r[3]),
                applied_seq=r[4],
                fingerprint=r[5],
                in_flight=bool(r[6]),
            )
            for r in (*flying, *held)
        ]

    # -- actions -------------------------------------------------------------------

    @staticmethod
    def begin_action(
        c: sqlite3.Connection,
        *,
        job_id: str,
        change_idx: int,
        operation: Operation,
        method: str,
        url: str,
        if_match: str | None,
    ) -> int:
        cur = c.execute(
            "INSERT INTO actions(job_id, change_idx, operation, status, method, url, if_match, "
            "started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job_id,
                change_idx,
                operation.value,
                ActionStatus.DISPATCHING.value,
                method,
                url,
                if_match,
                time.time(),
            ),
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    @staticmethod
    def finish_action(
        c: sqlite3.Connection,
        action_id: int,
        status: ActionStatus,
        *,
        response_status: int | None = None,
        result_etag: str | None = None,
        address: str | None = None,
        detail: str | None = None,
        observation: Observation | None = None,
    ) -> None:
        c.execute(
            "UPDATE actions SET status = ?, response_status = COALESCE(?, response_status), "
            "result_etag = COALESCE(?, result_etag), address = COALESCE(?, address), "
            "detail = COALESCE(?, detail), observation = COALESCE(?, observation), "
            "finished_at = ? WHERE id = ?",
            (
                status.value,
                response_status,
                result_etag,
                address,
                detail,
                observation.value if observation else None,
                time.time(),
                action_id,
            ),
        )

    # -- previews ------------------------------------------------------------------

    @staticmethod
    def insert_preview(
        c: sqlite3.Connection,
        *,
        token_hash: str,
        job_id: str,
        operation: Operation,
        expires_at: float,
        snapshot: JsonObject,
    ) -> None:
        c.execute(
            "INSERT INTO previews(token_hash, job_id, operation, created_at, expires_at, "
            "snapshot, base_seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                token_hash,
                job_id,
                operation.value,
                time.time(),
                expires_at,
                dumps(snapshot),
                Ledger.latest_consumed_seq(c, job_id) or 0,
            ),
        )

    @staticmethod
    def load_preview(c: sqlite3.Connection, token_hash: str) -> StoredPreview | None:
        row = c.execute(
            "SELECT token_hash, job_id, operation, created_at, expires_at, consumed_at, op_seq, "
            "snapshot FROM previews WHERE token_hash = ?",
            (token_hash,),
        ).fetchone()
        if row is None:
            return None
        return StoredPreview(
            token_hash=row[0],
            job_id=row[1],
            operation=Operation(row[2]),
            created_at=row[3],
            expires_at=row[4],
            consumed_at=row[5],
            op_seq=row[6],
            snapshot=loads_object(row[7]),
        )

    @staticmethod
    def latest_consumed_seq(c: sqlite3.Connection, job_id: str) -> int | None:
        row = c.execute(
            "SELECT MAX(op_seq) FROM previews WHERE job_id = ? AND consumed_at IS NOT NULL",
            (job_id,),
        ).fetchone()
        return row[0] if row and row[0] is not None else None

    @staticmethod
    def consume_preview(
        c: sqlite3.Connection, token_hash: str, job_id: str, expected_state: str
    ) -> int:
        """Claim the preview for one operation; returns its operation sequence number.

        Inside the write transaction, so of two concurrent confirms exactly one wins:
        the other finds the token spent, or the job moved on.

        Raises:
            PreviewUsed: another confirm consumed this token first, or another operation
                ran on the job after this preview was made.
            ChangedSincePreview: the job's state moved since this confirm read it.
        """
        row = c.execute(
            "SELECT consumed_at, base_seq FROM previews WHERE token_hash = ?", (token_hash,)
        ).fetchone()
        if row is None or row[0] is not None:
            raise PreviewUsed("this preview was used by another confirm; preview again")
        if (Ledger.latest_consumed_seq(c, job_id) or 0) != row[1]:
            raise PreviewUsed(
                "another operation ran on this job after this preview; preview again",
                job=job_id,
            )
        state = c.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if state is None or state[0] != expected_state:
            raise ChangedSincePreview(
                "the job moved on while this confirm was checking it; nothing was written. "
                "Preview again",
                job=job_id,
            )
        seq = Ledger.next_seq(c)
        c.execute(
            "UPDATE previews SET consumed_at = ?, op_seq = ? WHERE token_hash = ?",
            (time.time(), seq, token_hash),
        )
        return seq

    @staticmethod
    def next_seq(c: sqlite3.Connection) -> int:
        Ledger.bump(c, "op_seq", 1)
        row = c.execute("SELECT value FROM meta WHERE key = 'op_seq'").fetchone()
        return int(row[0])


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements (triggers keep their inner semicolons)."""
    statements: list[str] = []
    current: list[str] = []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and sqlite3.complete_statement(text):
            statements.append(text)
            current = []
    if "\n".join(current).strip():
        statements.append("\n".join(current).strip())
    return statements


def _fields_from_json(fields_json: str) -> tuple[str, ...]:
    fields_value = loads_object('{"f":' + fields_json + "}")["f"]
    assert isinstance(fields_value, list)
    return tuple(str(f) for f in fields_value)


# -- a change as a row: its encoding, in one place ----------------------------------------

# Written by a prepare (applied_etag and applied_seq start empty) and read back.
_SELECT_CHANGES = (
    "SELECT idx, resource_id, kind, fingerprint, fields, before_side, after_side, media_type, "
    "prepared_etag, assertion_kind, state, applied_etag, applied_seq "
    "FROM changes WHERE job_id = ? ORDER BY idx"
)
_INSERT_CHANGE = (
    "INSERT INTO changes(job_id, idx, resource_id, kind, fingerprint, fields, before_side, "
    "after_side, media_type, prepared_etag, assertion_kind, state) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _side_text(side: SideValue) -> str | None:
    """A side as stored: NULL where the resource does not exist, else lossless JSON."""
    return None if side is ABSENT else dumps(side)


def _side_value(text: str | None) -> SideValue:
    return ABSENT if text is None else loads_object(text)


def _change_row(ch: Change) -> tuple[Any, ...]:
    """The values of ``_INSERT_CHANGE`` after the job id."""
    return (
        ch.index,
        ch.resource_id,
        ch.kind,
        ch.fingerprint,
        dumps(list(ch.fields)),
        _side_text(ch.before),
        _side_text(ch.after),
        ch.media_type,
        ch.prepared_etag,
        ch.assertion_kind.value if ch.assertion_kind else None,
        ch.state.value,
    )


def _change_from_row(r: sqlite3.Row | tuple[Any, ...]) -> Change:
    """A row of ``_SELECT_CHANGES``."""
    return Change(
        index=r[0],
        resource_id=r[1],
        kind=r[2],
        fingerprint=r[3],
        fields=_fields_from_json(r[4]),
        before=_side_value(r[5]),
        after=_side_value(r[6]),
        media_type=r[7],
        prepared_etag=r[8],
        assertion_kind=AssertionKind(r[9]) if r[9] else None,
        state=ChangeState(r[10]),
        applied_etag=r[11],
        applied_at=r[12],
    )


def _action_from_row(r: sqlite3.Row | tuple[Any, ...]) -> Action:
    return Action(
        id=r[0],
        job_id=r[1],
        change_index=r[2],
        operation=Operation(r[3]),
        status=ActionStatus(r[4]),
        method=r[5],
        url=r[6],
        if_match=r[7],
        response_status=r[8],
        result_etag=r[9],
        address=r[10],
        detail=r[11],
        observation=Observation(r[12]) if r[12] else None,
        started_at=r[13],
        finished_at=r[14],
    )
