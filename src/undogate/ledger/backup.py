"""A consistent online backup of the ledger, and its restore.

The backup reads the live SQLite file through its own read-only connection: it needs
no lock, so it runs while ``undogate serve`` processes share the ledger and keeps
writing. SQLite's backup API copies every page in one step inside one read
transaction, which is a consistent snapshot of the last commit. The copy goes to a
temporary name next to the target, must pass ``PRAGMA integrity_check``, is fsynced,
renamed into place, and the directory is fsynced, so a crash never leaves a
half-written file under the final name.

Restore (``restore_ledger``) needs the ledger to itself (stop every server): it
checks the backup, carries the revocations of the ledger it replaces over to the copy,
points the data dir's identity marker at the restored ledger, moves the current files
aside (never deletes them) and copies the backup in. Everything committed after the
backup was taken is not in it: restoring loses that history, including the receipts of
writes that really happened.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidRequest, LedgerError
from . import DB_NAME
from .identity import (
    MARKER_NAME,
    check_own_ledger,
    give_ledger_id,
    ledger_files,
    set_aside,
    write_marker,
)
from .sqlite_copy import check_file, copy_snapshot, keep_revoked, read_revocations
from .sqlite_files import hold_ledger, opening


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
        copy_snapshot(source, temp)
        check = check_file(temp)
        if check.integrity != "ok":
            raise LedgerError(f"the backup failed its integrity check: {check.integrity}")
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
    return BackupResult(
        target, target.stat().st_size, check.jobs, check.events, check.integrity, ledger_id
    )


def restore_ledger(backup: Path, data_dir: Path) -> RestoreResult:
    """Put ``backup`` in place as the ledger of ``data_dir``, with the revocations of the
    ledger it replaces, and the data dir's identity marker naming it.

    Raises:
        LedgerInUse: a process serves the ledger (stop every one first).
        LedgerError: the backup is unreadable or fails its integrity check.
    """
    backup = Path(backup)
    integrity = check_file(backup).integrity
    if integrity != "ok":
        raise LedgerError(f"{backup} failed its integrity check: {integrity}")
    data_dir = Path(data_dir)
    if not data_dir.exists():
        data_dir.mkdir(mode=0o700, parents=True)
    # The ledger to itself (no SQLite connection): refused while any process serves it.
    with opening(data_dir):
        hold = hold_ledger(data_dir, alone=True)
        try:
            current = data_dir / DB_NAME
            revoked, unread = read_revocations(current)
            temp = data_dir / f".{DB_NAME}.restore"
            shutil.copyfile(backup, temp)
            os.chmod(temp, 0o600)
            kept = keep_revoked(temp, revoked)
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
            hold.release()
    return RestoreResult(ledger_id, aside, kept, unread)
