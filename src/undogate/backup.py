"""A consistent online backup of the ledger, and its restore.

The backup reads the live SQLite file through its own read-only connection: it needs
no ownership lock, so it runs while ``undogate serve`` owns the ledger and keeps
writing. SQLite's backup API copies every page in one step inside one read
transaction, which is a consistent snapshot of the last commit. The copy goes to a
temporary name next to the target, must pass ``PRAGMA integrity_check``, is fsynced,
renamed into place, and the directory is fsynced, so a crash never leaves a
half-written file under the final name.

Restore (``restore_ledger``) needs the ledger not to be owned (stop the server): it
checks the backup, carries the revocations of the ledger it replaces over to the copy,
points the data dir's identity marker at the restored ledger, moves the current files
aside (never deletes them) and copies the backup in. Everything committed after the
backup was taken is not in it: restoring loses that history, including the receipts of
writes that really happened.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .errors import InvalidRequest, LedgerError
from .ledger import DB_NAME, LOCK_NAME, Ledger
from .ledger.identity import (
    MARKER_NAME,
    check_own_ledger,
    give_ledger_id,
    ledger_files,
    read_marker,
    set_aside,
    write_marker,
)


@dataclass(frozen=True)
class BackupResult:
    path: Path
    bytes: int
    jobs: int
    events: int
    integrity: str
    ledger_id: str | None  # None: a ledger from before ids (it gets one at its next start)


@dataclass(frozen=True)
class RestoreResult:
    ledger_id: str
    set_aside: Path | None  # where the replaced ledger's files went (None: there were none)
    revocations_kept: int
    # Why revocations could not be carried over (the replaced ledger was lost or
    # unreadable), or None when they were.
    revocations_unread: str | None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check(path: Path) -> tuple[str, int, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        integrity = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        jobs = int(conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
        events = int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"{path} is not a readable ledger: {exc}", path=str(path)) from None
    finally:
        conn.close()
    return integrity, jobs, events


def backup_ledger(data_dir: Path, target: Path, *, overwrite: bool = False) -> BackupResult:
    """Copy the ledger in ``data_dir`` to ``target`` (a single self-contained file).

    Raises:
        InvalidRequest: the target exists (without ``overwrite``) or is the ledger itself.
        LedgerMissing, LedgerForeign: no ledger there, or not the one the data dir holds.
        LedgerError: the copy failed its integrity check.
    """
    source = Path(data_dir) / DB_NAME
    target = Path(target).absolute()
    ledger_id = check_own_ledger(source)
    if target.exists() and not overwrite:
        raise InvalidRequest(f"{target} exists; choose a new name", path=str(target))
    if target.resolve() == source.resolve() or target.parent.resolve() == source.parent.resolve():
        raise InvalidRequest("put backups outside the ledger directory", path=str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    temp.unlink(missing_ok=True)
    os.close(os.open(temp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600))
    try:
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=10.0)
        try:
            dst = sqlite3.connect(temp)
            try:
                src.backup(dst)  # pages=-1: every page in one step, one read snapshot
                dst.execute("PRAGMA journal_mode=DELETE")
            finally:
                dst.close()
        finally:
            src.close()
        integrity, jobs, events = _check(temp)
        if integrity != "ok":
            raise LedgerError(f"the backup failed its integrity check: {integrity}")
        fd = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
        _fsync_dir(target.parent)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return BackupResult(target, target.stat().st_size, jobs, events, integrity, ledger_id)


def restore_ledger(backup: Path, data_dir: Path) -> RestoreResult:
    """Put ``backup`` in place as the ledger of ``data_dir``, with the revocations of the
    ledger it replaces, and the data dir's identity marker naming it.

    Raises:
        LedgerInUse: a server owns the ledger (stop it first).
        LedgerError: the backup is unreadable or fails its integrity check.
    """
    backup = Path(backup)
    integrity, _, _ = _check(backup)
    if integrity != "ok":
        raise LedgerError(f"{backup} failed its integrity check: {integrity}")
    data_dir = Path(data_dir)
    if not data_dir.exists():
        data_dir.mkdir(mode=0o700, parents=True)
    # The ownership lock alone (no SQLite connection): refuses while a server owns it.
    lock_fd = Ledger._take_lock(data_dir / LOCK_NAME)
    try:
        current = data_dir / DB_NAME
        revoked, unread = _revocations(current)
        temp = data_dir / f".{DB_NAME}.restore"
        shutil.copyfile(backup, temp)
        os.chmod(temp, 0o600)
        kept = _keep_revoked(temp, revoked)
        ledger_id = give_ledger_id(temp)
        fd = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        # The marker first: a crash from here on leaves a data dir that refuses to start
        # (the old ledger is foreign, or missing) rather than one that starts afresh.
        write_marker(data_dir, ledger_id)
        replaced = tuple(f for f in ledger_files(current) if f.name != MARKER_NAME)
        aside = set_aside(data_dir, "before-restore", replaced)
        os.replace(temp, current)
        _fsync_dir(data_dir)
    finally:
        os.close(lock_fd)
    return RestoreResult(ledger_id, aside, kept, unread)


def _revocations(db: Path) -> tuple[list[tuple[str, float, str | None]], str | None]:
    """The revoked credentials of the ledger about to be replaced, and why they could
    not be read when they could not (the ledger was lost or is damaged)."""
    if not db.exists() or db.stat().st_size == 0:
        if read_marker(db.parent) is None:
            return [], None  # there never was a ledger here
        return [], f"the ledger being replaced ({db}) is missing or empty"
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            has_table = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'credentials'"
            ).fetchone()
            if not has_table:
                return [], None
            return [
                (row[0], row[1], row[2])
                for row in conn.execute(
                    "SELECT id, revoked_at, revoked_reason FROM credentials "
                    "WHERE revoked_at IS NOT NULL"
                )
            ], None
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return [], f"the ledger being replaced ({db}) cannot be read (SQLite: {exc})"


def _keep_revoked(db: Path, revoked: list[tuple[str, float, str | None]]) -> int:
    """A restore brings back history, never a revoked key: revocations made since the
    backup are applied to the restored copy, each with its event. Returns how many."""
    if not revoked:
        return 0
    kept = 0
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for cred_id, revoked_at, reason in revoked:
            cur = conn.execute(
                "UPDATE credentials SET revoked_at = ?, revoked_reason = ? "
                "WHERE id = ? AND revoked_at IS NULL",
                (revoked_at, reason or "revoked before the restore", cred_id),
            )
            if cur.rowcount:
                kept += 1
                Ledger.add_event(
                    conn,
                    job_id=None,
                    actor="system:undogate",
                    access_path="cli",
                    operation="revocation_kept_on_restore",
                    target=cred_id,
                )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return kept
