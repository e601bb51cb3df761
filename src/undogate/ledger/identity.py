"""Which ledger this is, and whether it is whole: checked before undogate trusts it.

The data directory remembers the ledger it holds. ``ledger.id`` (a marker file, 0600,
written durably when the ledger is made) holds a random id that the ledger also keeps
in its ``meta`` table. Before the ledger is opened for writing:

- a marker without its ledger (the file deleted, or emptied to 0 bytes) is
  ``ledger_missing``, and a marker that names another ledger is ``ledger_foreign``:
  making a fresh ledger in their place would drop every receipt without a word;
- the write-ahead log is checked where SQLite would silently drop committed work (a
  WAL shorter than its header, a header that is not valid, fewer replayable frames than
  the wal-index recorded as committed, a WAL missing while the wal-index still names
  committed frames);
- ``PRAGMA quick_check`` runs on a read-only connection, so a refusal leaves the ledger
  and its WAL as they were (the next start refuses again).

A ledger made before markers existed (no marker, but a ledger) adopts one. Starting
afresh is explicit (``--new-ledger``) and sets the old files aside, never deletes them.
"""

from __future__ import annotations

import logging
import os
import secrets
import sqlite3
import struct
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from ..errors import InvalidRequest, LedgerDamaged, LedgerError, LedgerForeign, LedgerMissing

log = logging.getLogger(__name__)

MARKER_NAME = "ledger.id"
META_KEY = "ledger_id"
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26

# The WAL and wal-index layouts: https://sqlite.org/fileformat2.html#walformat
_WAL_HEADER_BYTES = 32
_FRAME_HEADER_BYTES = 24
_WAL_CHECKSUM_ORDER = {0x377F0682: "<", 0x377F0683: ">"}
_WAL_VERSION = 3007000
_WAL_INDEX_HEADER = struct.Struct("=IIIBBHIIIIIIII")  # two identical copies, native order
_WAL_INDEX_BYTES = 2 * _WAL_INDEX_HEADER.size + 4  # ... then nBackfill


@dataclass(frozen=True)
class LedgerIdentity:
    """What opening found: the ledger's id and how it was checked."""

    ledger_id: str
    check_seconds: float
    created: bool = False  # no ledger was there: a new one was made
    adopted: bool = False  # a ledger without a marker (made before markers) got one
    set_aside: Path | None = None  # where --new-ledger put the previous files
    beside_others: bool = False  # other processes had it open: its identity was checked

    def describe(self, db_path: Path) -> str:
        """The one start-up line: which ledger, how it was checked, how long it took."""
        if self.created:
            line = f"ledger {db_path}: new, id {self.ledger_id}"
        elif self.beside_others:
            line = (
                f"ledger {db_path}: id {self.ledger_id}, opened beside the processes serving "
                "it (the first of them checked its WAL and ran quick_check)"
            )
        else:
            line = (
                f"ledger {db_path} checked: id {self.ledger_id}, WAL and quick_check ok "
                f"in {self.check_seconds * 1000:.0f} ms"
            )
        if self.adopted:
            line += " (it had no identity marker; one was written)"
        if self.set_aside is not None:
            line += f"; the previous ledger files are in {self.set_aside}"
        return line


@dataclass(frozen=True)
class FoundLedger:
    """What ``check_before_open`` found, for ``remember`` to finish once migrated."""

    ledger_id: str | None  # None: the ledger has no id yet (new, or made before ids)
    marker_present: bool
    check_seconds: float
    created: bool = False
    set_aside: Path | None = None
    beside_others: bool = False


# -- opening ---------------------------------------------------------------------------


def check_before_open(db_path: Path, *, new_ledger: bool = False) -> FoundLedger:
    """Check the ledger files in ``db_path``'s directory, making a new ledger only where
    there never was one (or, with ``new_ledger``, after setting a lost one aside).

    Raises:
        LedgerMissing: the data dir remembers a ledger that is gone or empty.
        LedgerForeign: the ledger there is not the one the data dir remembers.
        LedgerDamaged: its WAL cannot be replayed whole, or quick_check fails.
        LedgerError: SQLite could not read it for another reason.
        InvalidRequest: ``new_ledger`` on a ledger that is whole.
    """
    if not new_ledger:
        return _inspect(db_path)
    try:
        found = _inspect(db_path)
    except (LedgerMissing, LedgerForeign, LedgerDamaged):
        aside = set_aside(db_path.parent, "before-new-ledger", ledger_files(db_path))
        return replace(_inspect(db_path), set_aside=aside)
    if not found.created:
        raise InvalidRequest(
            f"the ledger {db_path} is whole (id {found.ledger_id}): --new-ledger only replaces "
            "a missing, empty, foreign or damaged ledger; start without it"
        )
    return found


def check_beside_others(db_path: Path) -> FoundLedger:
    """The ledger other live processes have open: its identity only. Its WAL is live
    (they write it), and the first of them checked it whole when it opened it.

    Raises:
        LedgerMissing, LedgerForeign, LedgerDamaged, LedgerError.
    """
    started = time.monotonic()
    ledger_id = check_own_ledger(db_path)
    return FoundLedger(
        ledger_id=ledger_id,
        marker_present=read_marker(db_path.parent) is not None,
        check_seconds=time.monotonic() - started,
        beside_others=True,
    )


def remember(conn: sqlite3.Connection, db_path: Path, found: FoundLedger) -> LedgerIdentity:
    """After the migrations: give the ledger its id if it has none, and write the marker
    (after the id is committed, so a crash in between leaves a ledger to adopt)."""
    ledger_id = found.ledger_id
    if ledger_id is None:
        ledger_id = _new_ledger_id()
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (META_KEY, ledger_id))
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise _translated(exc, db_path) from exc
    if not found.marker_present:
        write_marker(db_path.parent, ledger_id)
    identity = LedgerIdentity(
        ledger_id=ledger_id,
        check_seconds=found.check_seconds,
        created=found.created,
        adopted=not found.created and not found.marker_present,
        set_aside=found.set_aside,
        beside_others=found.beside_others,
    )
    log.info("%s", identity.describe(db_path))
    return identity


def _inspect(db_path: Path) -> FoundLedger:
    data_dir = db_path.parent
    marker = read_marker(data_dir)
    if not db_path.exists():
        if marker is not None or _size(_wal_path(db_path)):
            raise LedgerMissing(
                f"the ledger {db_path} is missing, but {data_dir} held one"
                + (f" (id {marker}, from {data_dir / MARKER_NAME})" if marker else "")
                + ": undogate will not start a new one in its place without being told. "
                + advice(data_dir),
                path=str(db_path),
                reason="deleted",
            )
        _create_empty(db_path)
        return FoundLedger(ledger_id=None, marker_present=False, check_seconds=0.0, created=True)
    if db_path.stat().st_size == 0:
        raise LedgerMissing(
            f"the ledger {db_path} is empty (0 bytes): its history is gone. " + advice(data_dir),
            path=str(db_path),
            reason="empty",
        )
    started = time.monotonic()
    _check_wal(db_path)
    ledger_id = _read_and_quick_check(db_path)
    seconds = time.monotonic() - started
    if marker is not None and marker != ledger_id:
        raise LedgerForeign(
            f"the ledger {db_path} is not the one this data dir holds: it has "
            + (f"id {ledger_id}" if ledger_id else "no id")
            + f", {data_dir / MARKER_NAME} says {marker or '(nothing)'}. If you moved this "
            f"ledger here on purpose, move {MARKER_NAME} away and start again (the ledger is "
            "then adopted). " + advice(data_dir),
            path=str(db_path),
            ledger_id=ledger_id,
            expected=marker,
        )
    return FoundLedger(
        ledger_id=ledger_id, marker_present=marker is not None, check_seconds=seconds
    )


def advice(data_dir: Path) -> str:
    """What an operator can do about a lost ledger, in one sentence."""
    return (
        "Restore the last backup of this ledger: `undogate restore BACKUP --config CONFIG`. "
        "Or start a new, empty ledger: `undogate init --new-ledger --config CONFIG` (or "
        f"`serve --new-ledger`) moves the old files into {data_dir}/before-new-ledger-<time>/ "
        "and deletes nothing. See docs/recovery.md"
    )


def _create_empty(db_path: Path) -> None:
    """A new ledger file, never 0 bytes: switching it to WAL writes its first page. Made
    under a temporary name and renamed, so an empty ledger file is never undogate's own
    (and an empty one found later is a loss, not an unfinished start)."""
    temp = db_path.with_name(f".{db_path.name}.new")
    for leftover in (temp, Path(f"{temp}-wal"), Path(f"{temp}-shm")):
        leftover.unlink(missing_ok=True)  # an unfinished creation: never a ledger
    os.close(os.open(temp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600))
    conn = sqlite3.connect(temp, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()
    _fsync(temp)
    os.replace(temp, db_path)
    _fsync(db_path.parent)


def _read_and_quick_check(db_path: Path) -> str | None:
    """The ledger's id (None if it has none yet), after ``PRAGMA quick_check`` passed, on
    a read-only connection: it never checkpoints, and without a WAL to read it opens the
    file as immutable, so it does not even leave an empty ``-wal`` and ``-shm`` behind.

    Raises:
        LedgerDamaged, LedgerError.
    """
    uri = f"file:{db_path}?mode=ro" + ("" if _size(_wal_path(db_path)) else "&immutable=1")
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)")]
            if problems != ["ok"]:
                raise LedgerDamaged(
                    f"the ledger {db_path} failed its integrity check (quick_check: "
                    f"{'; '.join(problems)}). " + advice(db_path.parent),
                    path=str(db_path),
                    quick_check=problems,
                )
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) == 0:
                return None  # not migrated yet: no meta table, no id
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
            return str(row[0]) if row else None
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise _translated(exc, db_path) from exc


# -- the write-ahead log -----------------------------------------------------------------


@dataclass(frozen=True)
class _WalIndex:
    salts: bytes
    committed_frames: int


def _check_wal(db_path: Path) -> None:
    """Refuse where SQLite would silently replay less than was committed.

    Raises:
        LedgerDamaged: the WAL is shorter than its header, its header is not valid, it
            replays fewer frames than the wal-index recorded, or it is gone while the
            wal-index names committed frames not yet in the database file.
    """
    wal = _wal_path(db_path)
    index = _read_wal_index(Path(f"{db_path}-shm"))
    damaged = f"the write-ahead log {wal} "
    after = ". " + advice(db_path.parent)
    size = _size(wal)
    if not size:
        if index is not None:
            raise LedgerDamaged(
                damaged + f"is {'missing' if size is None else 'empty'}, but the wal-index "
                f"records {index.committed_frames} committed frames not yet in the ledger "
                "file: that work is lost" + after,
                path=str(wal),
            )
        return
    with wal.open("rb") as f:
        header = f.read(_WAL_HEADER_BYTES)
        if len(header) < _WAL_HEADER_BYTES:
            raise LedgerDamaged(
                damaged + f"is {len(header)} bytes, shorter than its header: SQLite would "
                "ignore it and every transaction in it" + after,
                path=str(wal),
            )
        magic, version, page_size = struct.unpack(">III", header[:12])
        order = _WAL_CHECKSUM_ORDER.get(magic)
        if (
            order is None
            or version != _WAL_VERSION
            or page_size < 512
            or page_size > 65536
            or page_size & (page_size - 1)
            or _wal_checksum(order, header[:24], (0, 0)) != struct.unpack(">II", header[24:])
        ):
            raise LedgerDamaged(
                damaged + "has a header that is not valid: SQLite would ignore it and every "
                "transaction in it" + after,
                path=str(wal),
            )
        if index is None or index.salts != header[16:24]:
            return  # no record of what was committed to compare with
        replayable = _replayable_frames(f, order, page_size, header, index.committed_frames)
    if replayable < index.committed_frames:
        raise LedgerDamaged(
            damaged + f"replays {replayable} of the {index.committed_frames} frames the "
            "wal-index recorded as committed: SQLite would silently drop the rest" + after,
            path=str(wal),
            replayable_frames=replayable,
            committed_frames=index.committed_frames,
        )


def _read_wal_index(shm: Path) -> _WalIndex | None:
    """What the wal-index (``-shm``, left by a process that did not stop cleanly) says
    was committed beyond the database file. None when there is no usable record."""
    try:
        with shm.open("rb") as f:
            raw = f.read(_WAL_INDEX_BYTES)
    except FileNotFoundError:
        return None
    size = _WAL_INDEX_HEADER.size
    if len(raw) < _WAL_INDEX_BYTES or raw[:size] != raw[size : 2 * size]:
        return None  # never initialised, or caught mid-update
    fields = _WAL_INDEX_HEADER.unpack(raw[:size])
    version, is_init, committed = fields[0], fields[3], fields[6]
    if version != _WAL_VERSION or not is_init:
        return None
    if _wal_checksum("=", raw[:40], (0, 0)) != (fields[12], fields[13]):
        return None
    (backfilled,) = struct.unpack("=I", raw[2 * size : _WAL_INDEX_BYTES])
    if committed <= backfilled:
        return None  # every committed frame is already in the database file
    return _WalIndex(salts=raw[32:40], committed_frames=committed)


def _replayable_frames(f: BinaryIO, order: str, page_size: int, header: bytes, up_to: int) -> int:
    """How many frames SQLite's recovery would keep (up to its last valid commit frame),
    checking no further than ``up_to``: the same rules as SQLite's ``walIndexRecover``."""
    checksum = struct.unpack(">II", header[24:32])
    salts = header[16:24]
    kept = 0
    for number in range(1, up_to + 1):
        frame = f.read(_FRAME_HEADER_BYTES + page_size)
        if len(frame) < _FRAME_HEADER_BYTES + page_size:
            break
        page, commit = struct.unpack(">II", frame[:8])
        if page == 0 or frame[8:16] != salts:
            break
        checksum = _wal_checksum(order, frame[:8], checksum)
        checksum = _wal_checksum(order, frame[_FRAME_HEADER_BYTES:], checksum)
        if checksum != struct.unpack(">II", frame[16:24]):
            break
        if commit:
            kept = number
    return kept


def _wal_checksum(order: str, data: bytes, start: tuple[int, int]) -> tuple[int, int]:
    s0, s1 = start
    for x0, x1 in struct.iter_unpack(order + "II", data):
        s0 = (s0 + x0 + s1) & 0xFFFFFFFF
        s1 = (s1 + x1 + s0) & 0xFFFFFFFF
    return s0, s1


# -- the marker, backups and restores ------------------------------------------------------


def read_marker(data_dir: Path) -> str | None:
    """The id the data dir remembers (None: no marker).

    Raises:
        LedgerError: the marker exists but cannot be read.
    """
    marker = data_dir / MARKER_NAME
    try:
        return marker.read_text(encoding="ascii", errors="replace").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LedgerError(f"cannot read {marker}: {exc.strerror}", path=str(marker)) from exc


def write_marker(data_dir: Path, ledger_id: str) -> None:
    """Durably: a temporary file, fsynced, renamed over the marker, the dir fsynced."""
    temp = data_dir / f".{MARKER_NAME}.tmp"
    temp.unlink(missing_ok=True)
    fd = os.open(temp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    try:
        os.write(fd, f"{ledger_id}\n".encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, data_dir / MARKER_NAME)
    _fsync(data_dir)


def read_ledger_id(db_path: Path) -> str | None:
    """The id kept in a ledger (or a backup) file; None when it has none.

    Raises:
        LedgerDamaged, LedgerError: SQLite cannot read it.
    """
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise _translated(exc, db_path) from exc
    return str(row[0]) if row else None


def give_ledger_id(db_path: Path) -> str:
    """The id of a closed ledger file (a copy being restored), given one if it has none
    (a backup from before ids)."""
    ledger_id = read_ledger_id(db_path)
    if ledger_id is not None:
        return ledger_id
    ledger_id = _new_ledger_id()
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (META_KEY, ledger_id))
    finally:
        conn.close()
    return ledger_id


def check_own_ledger(db_path: Path) -> str | None:
    """For a backup: the ledger is there, not empty, and the one the data dir remembers.
    Returns its id. No WAL or quick_check here: a server may be writing it.

    Raises:
        LedgerMissing, LedgerForeign, LedgerDamaged, LedgerError.
    """
    data_dir = db_path.parent
    marker = read_marker(data_dir)
    if not db_path.exists() or db_path.stat().st_size == 0:
        raise LedgerMissing(
            f"no ledger at {db_path}"
            + (f", though {data_dir} held one (id {marker})" if marker else "")
            + (". " + advice(data_dir) if marker else ""),
            path=str(db_path),
        )
    ledger_id = read_ledger_id(db_path)
    if marker is not None and marker != ledger_id:
        raise LedgerForeign(
            f"the ledger {db_path} is not the one this data dir holds "
            f"(it has id {ledger_id}, {data_dir / MARKER_NAME} says {marker})",
            path=str(db_path),
        )
    return ledger_id


def set_aside(data_dir: Path, prefix: str, files: tuple[Path, ...]) -> Path | None:
    """Move ``files`` (those that exist) into a new ``data_dir/<prefix>-<time>/``, never
    over an earlier one; returns it, or None when there was nothing to move."""
    present = [f for f in files if f.exists()]
    if not present:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = data_dir / f"{prefix}-{stamp}"
    attempt = 1
    while True:
        try:
            aside.mkdir(mode=0o700)
            break
        except FileExistsError:
            attempt += 1
            aside = data_dir / f"{prefix}-{stamp}-{attempt}"
    for current in present:
        os.replace(current, aside / current.name)
    _fsync(aside)
    _fsync(data_dir)
    return aside


# -- damage found after the start ----------------------------------------------------------


def damage_error(exc: sqlite3.Error) -> LedgerDamaged | None:
    """For the ledger's doors (``read``, ``write``): damage SQLite meets at any time, as
    ``ledger_error`` with what to do; None when ``exc`` is not damage (a full disk, ...)."""
    if not _is_damage(exc):
        return None
    return LedgerDamaged(
        f"the ledger is damaged (SQLite: {exc}). Stop undogate, keep the damaged files, and "
        "restore the last backup (`undogate restore BACKUP`, docs/recovery.md)",
        sqlite=getattr(exc, "sqlite_errorname", None),
    )


def _is_damage(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


def _translated(exc: sqlite3.DatabaseError, db_path: Path) -> LedgerError:
    if _is_damage(exc):
        return LedgerDamaged(
            f"the ledger {db_path} is damaged (SQLite: {exc}). " + advice(db_path.parent),
            path=str(db_path),
            sqlite=exc.sqlite_errorname,
        )
    return LedgerError(
        f"SQLite cannot read the ledger {db_path}: {exc}",
        path=str(db_path),
        sqlite=getattr(exc, "sqlite_errorname", None),
    )


# -- small helpers ---------------------------------------------------------------------------


def _new_ledger_id() -> str:
    return "ldg_" + secrets.token_hex(16)


def ledger_files(db_path: Path) -> tuple[Path, ...]:
    """Every file of one ledger in its data dir (not the ownership lock)."""
    return (
        db_path,
        _wal_path(db_path),
        Path(f"{db_path}-shm"),
        db_path.parent / MARKER_NAME,
    )


def _wal_path(db_path: Path) -> Path:
    return Path(f"{db_path}-wal")


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
