"""Who may open a SQLite ledger's files, and where they may live.

Several processes on one machine share a SQLite ledger (docs/scaling.md). Four ``flock``
locks in its data dir say who is there and whose turn it is to write:

- ``ledger.lock``: every process serving the ledger holds it **shared** for as long as
  it has the ledger open. An undogate from before leases held it exclusively (one owner
  per ledger), so neither starts beside the other; what must have the ledger to itself
  (``restore``, ``--new-ledger``, ``ledger copy``) takes it exclusively, and is refused
  while any process serves it.
- ``ledger.opening.lock``: held exclusively while a process opens the ledger (checks it,
  creates or migrates it), so two processes starting at once never both create or
  migrate it, and a process that finds itself alone can check the files whole before
  anyone else writes.
- ``ledger.write.lock``: held exclusively by a writer from before its ``BEGIN
  IMMEDIATE`` (or its one-statement write) to its ``COMMIT`` (``WriteTurn``), so writers
  of several processes, and a process's own writers (its store, its lease), wait for
  each other in the kernel and wake when the lock is free. SQLite's own wait for its
  write lock sleeps in growing steps (up to 100 ms) between tries: a waiter oversleeps
  the other's commit, and may lose every try to a process that writes again at once.
- ``ledger.write.next.lock``: held exclusively by the writer next in line, from before
  it waits for ``ledger.write.lock`` until it has it. ``flock`` hands a released lock to
  nobody: a writer that gave its turn back and wants the next one at once would take it
  again before the waiter the kernel woke has run (on a busy machine, every time). It
  must first be next in line, behind the one that is, so a waiter is never overtaken.

Who has the ledger open is told by ``ledger.lock`` and by the data dir itself, each
held the same way (``hold_ledger``): a clean-up may delete ``ledger.lock`` taking it for
a stale lock, and the next process would make a new one, find itself alone, end every
live process's lease and settle their writes in flight as uncertain. The directory
cannot be deleted while it holds the ledger, so a process is alone only when both are
free. (A ``flock`` on the database file would do as well, but ``restore`` replaces that
file, and a descriptor of it that this process closes drops SQLite's own POSIX locks on
it.) ``ledger.lock`` stays for the undogates from before, which hold only it.

The kernel releases them all when a process dies, however it dies.

The files must be on a local disk: SQLite's locks and ``fsync`` are not trustworthy on
a network filesystem, and processes on two machines would each believe they hold the
write lock. A ledger there is refused (``ledger_network_filesystem``), and so is one on
a FUSE filesystem other than those known to keep their files on this machine's disk: a
FUSE type names its client program (``fuse.sshfs``, ``fuse.rclone``), which may reach
anywhere, and its locks are only this machine's. A local FUSE filesystem refused by
mistake costs a clear error at start; a network one accepted by mistake costs the
ledger.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import LedgerBusy, LedgerError, LedgerInUse, LedgerOnNetworkFilesystem

LOCK_NAME = "ledger.lock"
OPENING_LOCK_NAME = "ledger.opening.lock"
WRITE_LOCK_NAME = "ledger.write.lock"
NEXT_WRITER_LOCK_NAME = "ledger.write.next.lock"
#: How long a process waits for another one to finish opening the ledger (a check of a
#: large ledger reads every page once).
OPENING_WAIT_S = 120.0
_NETWORK_FS = {
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "9p",
    "afs",
    "ceph",
    "glusterfs",
    "lustre",
    "gpfs",
    "beegfs",
}
#: FUSE filesystems whose files are on this machine's own disks: fuse-overlayfs is the
#: storage of rootless containers.
_LOCAL_FUSE = {"fuse.fuse-overlayfs"}
#: How /proc/mounts spells a space, tab, newline or backslash in a mount point.
_MOUNT_ESCAPE = re.compile(r"\\([0-7]{3})")


class Hold:
    """This process's hold on a ledger's files (``ledger.lock`` and the data dir);
    ``release`` ends it."""

    def __init__(self, fd: int, dir_fd: int, data_dir: Path, alone: bool) -> None:
        self.fd = fd
        self.dir_fd = dir_fd
        self.data_dir = data_dir
        #: no other process had the ledger open when this one took its hold
        self.alone = alone

    def share(self) -> None:
        """From alone to shared: other processes may open the ledger beside this one.

        Raises:
            LedgerInUse: an undogate that does not share its ledger took it in between.
        """
        if not _locked(self.fd, fcntl.LOCK_SH) or not _locked(self.dir_fd, fcntl.LOCK_SH):
            fd, self.fd = self.fd, -1
            os.close(self.dir_fd)
            raise _in_use(fd, self.data_dir, "an undogate that does not share its ledger")
        self.alone = False

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            os.close(self.dir_fd)
            self.fd = -1


def hold_ledger(data_dir: Path, *, alone: bool) -> Hold:
    """Take a hold on the ledger in ``data_dir``: exclusively when no other process has
    it open (``Hold.alone``), else shared (``alone``: only exclusively).

    Raises:
        LedgerInUse: ``alone`` and other processes serve it, or an undogate that does
            not share its ledger owns it (its pid is named).
    """
    fd = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    dir_fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
    # Both free: nobody has it open. Only ledger.lock free: it was deleted and made anew
    # while other processes hold the directory.
    if _locked(fd, fcntl.LOCK_EX) and _locked(dir_fd, fcntl.LOCK_EX):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return Hold(fd, dir_fd, data_dir, alone=True)
    if alone:
        os.close(dir_fd)
        raise _in_use(fd, data_dir, "other undogate processes; stop every one of them first")
    if not _locked(fd, fcntl.LOCK_SH) or not _locked(dir_fd, fcntl.LOCK_SH):
        os.close(dir_fd)
        raise _in_use(fd, data_dir, "an undogate that does not share its ledger")
    return Hold(fd, dir_fd, data_dir, alone=False)


def _locked(fd: int, how: int) -> bool:
    """``flock`` ``fd`` ``how`` at once; False if another holder keeps it from us."""
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _in_use(fd: int, data_dir: Path, by: str) -> LedgerInUse:
    """The refusal, naming the last process that had the ledger to itself; closes ``fd``."""
    try:
        pid = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
    finally:
        os.close(fd)
    return LedgerInUse(
        f"the ledger in {data_dir} is in use by {by} (pid {pid} had it to itself last)",
        pid=pid,
    )


@contextmanager
def opening(data_dir: Path, wait_s: float = OPENING_WAIT_S) -> Iterator[None]:
    """Hold ``ledger.opening.lock`` while the ledger is opened: one process at a time.

    Raises:
        LedgerInUse: another process has been opening it for ``wait_s``.
    """
    fd = os.open(data_dir / OPENING_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LedgerInUse(
                        f"another process has been opening the ledger in {data_dir} for "
                        f"{wait_s:.0f} s; try again once it has started"
                    ) from None
                time.sleep(0.02)  # poll interval of a bounded wait
        yield
    finally:
        os.close(fd)


class WriteTurn:
    """This process's turn to write: ``ledger.write.lock`` held exclusively, taken before
    ``BEGIN IMMEDIATE`` and given back after the commit (``give_back``), by the writer
    next in line (``ledger.write.next.lock``).

    A turn free at once, with nobody in line for it, is taken in the calling thread.
    Otherwise a thread of its own gets in line, then waits for the turn in ``flock``
    (the kernel wakes it when the lock is released), and leaves the line once it has
    the turn, while the
    caller waits at most ``wait_s`` for that thread: a caller that gave up leaves it
    waiting, and the next ``take`` waits on the same thread, or it gives the turn back
    as soon as it gets it. One ``take`` at a time: its owner's lock sees to that (the
    store's writer mutex, the lease's own). Each writer of a process has its own
    ``WriteTurn`` (the store's writes, the lease's renewals): two descriptors exclude each
    other as two processes do, so they queue in the kernel alike.
    """

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / WRITE_LOCK_NAME
        self._next_path = data_dir / NEXT_WRITER_LOCK_NAME
        self._fd = _open_lock(self._path)
        self._next_fd = _open_lock(self._next_path)
        self._held = -1  # the descriptor that holds the turn, while it is held
        self._waiter: _TurnWaiter | None = None
        self._guard = threading.Lock()

    def take(self, wait_s: float) -> None:
        """Raises: LedgerBusy: another process kept the turn for ``wait_s``; LedgerError:
        the ledger was closed."""
        if self._fd < 0:  # never flock a closed number: the process may have reused it
            raise LedgerError(
                "the ledger could not start a write: it was closed. Nothing of this step "
                "was recorded"
            )
        with self._guard:  # a waiter left behind may be giving the turn back just now
            waiter = self._waiter
            if waiter is not None:
                waiter.wanted = True
        if waiter is None:
            if self._take_at_once():
                self._held = self._fd
                return
            waiter = self._waiter = _TurnWaiter(self._path, self._next_path, self)
            waiter.start()
        waiter.got.wait(wait_s)
        with self._guard:
            if not waiter.got.is_set():
                waiter.wanted = False  # it gives the turn back once it gets it
                raise LedgerBusy(
                    "the ledger could not start a write: other processes sharing it "
                    f"kept their turn to write for more than {wait_s:g} s. Nothing of this "
                    "step was recorded; try again",
                    busy_s=wait_s,
                )
            self._waiter = None
        self._held = waiter.fd

    def _take_at_once(self) -> bool:
        """The turn, if it is free and no writer is in line for it."""
        try:
            fcntl.flock(self._next_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            fcntl.flock(self._next_fd, fcntl.LOCK_UN)
        return True

    @contextmanager
    def held(self, wait_s: float) -> Iterator[None]:
        """The turn, for the ``with`` block (``take``, then ``give_back``).

        Raises: as ``take``."""
        self.take(wait_s)
        try:
            yield
        finally:
            self.give_back()

    def give_back(self) -> None:
        fd, self._held = self._held, -1
        if fd == self._fd:
            fcntl.flock(fd, fcntl.LOCK_UN)
        elif fd >= 0:
            os.close(fd)  # a waiter's own descriptor: closing it releases the lock

    def close(self) -> None:
        self.give_back()
        with self._guard:
            waiter, self._waiter = self._waiter, None
            if waiter is not None:
                waiter.wanted = False  # it gives the turn back once it gets it
                if waiter.got.is_set():
                    # It got the turn for a ``take`` that never came back for it (a
                    # SIGTERM's SystemExit landed in the wait): its descriptor holds the
                    # turn until it is closed.
                    os.close(waiter.fd)
        for fd in (self._fd, self._next_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._next_fd = -1

    def _given_up(self, waiter: _TurnWaiter) -> None:
        """A waiter got the turn nobody wants any longer: it is given back at once."""
        if self._waiter is waiter:
            self._waiter = None
        os.close(waiter.fd)


class _TurnWaiter(threading.Thread):
    """Gets in line, then waits in ``flock`` for the turn, on descriptors of its own
    (two descriptors of one process exclude each other as two processes do)."""

    def __init__(self, path: Path, next_path: Path, turn: WriteTurn) -> None:
        super().__init__(name="undogate-ledger-write-turn", daemon=True)
        self.fd = _open_lock(path)
        self._next_fd = _open_lock(next_path)
        self.got = threading.Event()
        self.wanted = True
        self._turn = turn

    def run(self) -> None:
        try:
            fcntl.flock(self._next_fd, fcntl.LOCK_EX)  # in line: behind the one who was
            fcntl.flock(self.fd, fcntl.LOCK_EX)  # wakes when the holder releases it
        finally:
            os.close(self._next_fd)  # out of line: the next one may wait for the turn
        with self._turn._guard:
            self.got.set()
            if not self.wanted:
                self._turn._given_up(self)


def _open_lock(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def refuse_network_filesystem(data_dir: Path) -> None:
    """Raises: LedgerOnNetworkFilesystem: ``data_dir`` is on a network filesystem."""
    try:
        mounts = Path("/proc/mounts").read_text(errors="surrogateescape")
    except OSError:
        return  # not Linux: nothing to tell it by
    fs = filesystem_type(data_dir, mounts)
    if fs is not None and is_network_filesystem(fs):
        raise LedgerOnNetworkFilesystem(
            f"the ledger directory {data_dir} is on a network filesystem ({fs}): SQLite's "
            "locks and fsync are not trustworthy there, and processes sharing the ledger "
            "could each believe they hold its write lock. Put server.data_dir on a local "
            "disk, or use a PostgreSQL ledger to share one across machines (docs/scaling.md)",
            path=str(data_dir),
            filesystem=fs,
        )


def is_network_filesystem(fs: str) -> bool:
    """A network filesystem, or a FUSE one not known to be local (this module's doc)."""
    if fs == "fuse" or fs.startswith("fuse."):
        return fs not in _LOCAL_FUSE
    return fs in _NETWORK_FS


def filesystem_type(path: Path, mounts: str) -> str | None:
    """The type of the filesystem ``path`` is on, by the longest mount point in
    ``mounts`` (``/proc/mounts``'s text) that holds it.

    By the path, not by the device number ``stat`` gives: on btrfs a subvolume's device
    number is not the one its mount is listed with."""
    best: tuple[str, str | None] = ("", None)
    target = str(path.resolve())
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = _MOUNT_ESCAPE.sub(lambda code: chr(int(code[1], 8)), parts[1])
        holds = target == point or target.startswith(point.rstrip("/") + "/")
        if holds and len(point) >= len(best[0]):
            best = (point, parts[2])
    return best[1]
