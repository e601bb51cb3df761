"""Copies of a SQLite ledger file, for ``undogate backup`` and ``restore`` (``backup``):
a consistent snapshot of a live ledger, the check a copy must pass, and the
revocations a restore carries over from the ledger it replaces."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..errors import LedgerError
from .identity import read_marker
from .migrations import migrate
from .sqlite import SQLiteTransaction

# (credential or passkey id, revoked at, reason)
Revoked = tuple[str, float, str | None]


@dataclass(frozen=True)
class FileCheck:
    integrity: str  # "ok", or what PRAGMA integrity_check found
    jobs: int
    events: int


def copy_snapshot(source: Path, target: Path) -> None:
    """Copy the ledger ``source`` into the existing file ``target`` through a read-only
    connection of its own (no ownership lock: a server may keep writing). SQLite's
    backup API copies every page in one step inside one read transaction: a consistent
    snapshot of the last commit. The copy is one self-contained file (no WAL)."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=10.0)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)  # pages=-1: every page in one step, one read snapshot
            dst.execute("PRAGMA journal_mode=DELETE")
        finally:
            dst.close()
    finally:
        src.close()


def check_file(path: Path) -> FileCheck:
    """``PRAGMA integrity_check`` and the counts of jobs and events of a ledger file.

    Raises:
        LedgerError: it is not a readable ledger.
    """
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        integrity = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        jobs = int(conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
        events = int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"{path} is not a readable ledger: {exc}", path=str(path)) from None
    finally:
        conn.close()
    return FileCheck(integrity, jobs, events)


def read_revocations(db: Path) -> tuple[list[Revoked], str | None]:
    """The revoked credentials and passkeys of the ledger about to be replaced, and why they could
    not be read when they could not (the ledger was lost or is damaged)."""
    if not db.exists() or db.stat().st_size == 0:
        if read_marker(db.parent) is None:
            return [], None  # there never was a ledger here
        return [], f"the ledger being replaced ({db}) is missing or empty"
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tables = {
                str(r[0])
                for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if "credentials" not in tables:
                return [], None
            found: list[Revoked] = [
                (row[0], row[1], row[2])
                for row in conn.execute(
                    "SELECT id, revoked_at, revoked_reason FROM credentials "
                    "WHERE revoked_at IS NOT NULL"
                )
            ]
            if "passkeys" in tables:  # a revoked passkey approves nothing again either
                found += [
                    (row[0], row[1], None)
                    for row in conn.execute(
                        "SELECT id, revoked_at FROM passkeys WHERE revoked_at IS NOT NULL"
                    )
                ]
            return found, None
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return [], f"the ledger being replaced ({db}) cannot be read (SQLite: {exc})"


def keep_revoked(db: Path, revoked: list[Revoked]) -> int:
    """A restore brings back history, never a revoked key or passkey: revocations made
    since the backup are applied to the restored copy ``db`` (not yet in place, so nobody else
    has it open), each with its event. Returns how many."""
    if not revoked:
        return 0
    kept = 0
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        migrate(conn)  # the copy may predate the chain or the passkeys: bring it up first
        conn.execute("BEGIN IMMEDIATE")
        for cred_id, revoked_at, reason in revoked:
            cur = conn.execute(
                "UPDATE credentials SET revoked_at = ?, revoked_reason = ? "
                "WHERE id = ? AND revoked_at IS NULL",
                (revoked_at, reason or "revoked before the restore", cred_id),
            )
            if not cur.rowcount:
                cur = conn.execute(
                    "UPDATE passkeys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                    (revoked_at, cred_id),
                )
            if cur.rowcount:
                kept += 1
                SQLiteTransaction(conn, None).add_event(
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
