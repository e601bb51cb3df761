"""Several processes on one SQLite ledger (docs/scaling.md), as real processes: they open
it side by side, each with its lease; what needs it alone (a restore, ``--new-ledger``,
a copy) and an undogate from before leases are refused while others have it; processes
starting at once make and migrate one ledger; a write waits for another process's write
lock at most the busy wait, then is refused with nothing recorded; writers of several
processes queue for their turn in the kernel (``ledger.write.lock``); a network filesystem
is told apart from a local disk."""

from __future__ import annotations

import fcntl
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from undogate.errors import LedgerBusy, LedgerInUse
from undogate.ledger import DB_NAME, LOCK_NAME, Ledger, Transaction
from undogate.ledger.sqlite import BUSY_S
from undogate.ledger.sqlite_files import (
    NEXT_WRITER_LOCK_NAME,
    WRITE_LOCK_NAME,
    filesystem_type,
    is_network_filesystem,
)

_SERVE_LIKE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from undogate.ledger import Ledger
    ledger = Ledger.open(Path(sys.argv[1]))
    print(ledger.read(lambda tx: tx.own_lease), flush=True)
    time.sleep(60)
    """
)
_WITHOUT_LEASES = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what one owner per ledger took
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\\n".encode(), 0)
    print("owned", flush=True)
    time.sleep(60)
    """
)
_WRITE_LOCK = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("COMMIT")
    print("released", flush=True)
    time.sleep(60)
    """
)

_WRITE_TURN = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process's turn to write
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
    released = time.monotonic()
    fcntl.flock(fd, fcntl.LOCK_UN)
    print(f"released {released}", flush=True)
    time.sleep(60)
    """
)


def _start(script: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    if proc.stdout is not None:
        proc.stdout.close()


def test_processes_share_the_ledger_and_what_needs_it_alone_waits_for_the_last(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    other, other_lease = _start(_SERVE_LIKE, str(data))
    try:
        assert other_lease.startswith("lse_")
        ledger = Ledger.open(data)
        try:
            assert "opened beside the processes serving it" in ledger.describe()
            mine = ledger.read(lambda tx: tx.own_lease)
            assert mine is not None and mine != other_lease
            assert ledger.read(lambda tx: tx.open_leases()) == {mine, other_lease}
            with pytest.raises(LedgerInUse) as refused:
                Ledger.open(data, alone=True)
            assert refused.value.code == "ledger_in_use"
            assert "stop every one of them first" in refused.value.message
        finally:
            ledger.close()
        with pytest.raises(LedgerInUse):  # the other one still has it
            Ledger.open(data, alone=True)
    finally:
        _kill(other)
    alone = Ledger.open(data, alone=True)  # the kernel released its hold with it
    try:
        # Alone on the ledger, a process knows every lease holder is gone (each holds the
        # lock while it lives): the killed one's lease ends now, not when it runs out.
        assert alone.read(lambda tx: tx.open_leases()) == {alone.lease.id}  # type: ignore[union-attr]
    finally:
        alone.close()


def test_an_undogate_without_leases_owning_the_ledger_refuses_a_new_process(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    Ledger.open(data).close()
    old, said = _start(_WITHOUT_LEASES, str(data / LOCK_NAME))
    try:
        assert said == "owned"
        with pytest.raises(LedgerInUse) as refused:
            Ledger.open(data)
        assert "an undogate that does not share its ledger" in refused.value.message
        assert str(old.pid) in refused.value.message
    finally:
        _kill(old)
    Ledger.open(data).close()


_OPEN_AT_ONCE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from undogate.ledger import Ledger
    while time.time() < float(sys.argv[2]):
        time.sleep(0.001)
    ledger = Ledger.open(Path(sys.argv[1]))
    print(ledger.identity.ledger_id, ledger.identity.created, flush=True)
    ledger.close()
    """
)


def test_processes_starting_at_once_on_an_empty_data_dir_make_one_ledger(tmp_path: Path) -> None:
    data = tmp_path / "data"
    at = str(time.time() + 1.5)  # every interpreter is up by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN_AT_ONCE, str(data), at],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    said = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in said]
    opened = [out.split() for out, _ in said]
    assert len({ledger_id for ledger_id, _ in opened}) == 1
    assert sorted(created for _, created in opened) == ["False", "False", "False", "True"]


def _event_count(tx: object) -> int:
    return int(tx.connection.execute("SELECT COUNT(*) FROM events").fetchone()[0])  # type: ignore[attr-defined]


def _one_event(tx: Transaction) -> None:
    tx.add_event(job_id=None, actor="a", access_path="t", operation="x")


def _refused_busy(ledger: Ledger) -> float:
    """One write refused ``ledger_busy``, saying nothing was recorded; how long it waited."""
    started = time.monotonic()
    with pytest.raises(LedgerBusy) as refused:
        ledger.write(_one_event)
    assert refused.value.code == "ledger_busy"
    assert "Nothing of this step was recorded; try again" in refused.value.message
    return time.monotonic() - started


def test_a_write_waits_for_another_process_at_most_the_busy_wait_then_nothing_is_recorded(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    ledger = Ledger.open(data, busy_s=0.5)
    try:
        before = ledger.read(_event_count)
        holder, said = _start(_WRITE_LOCK, str(data / DB_NAME), "2")
        try:
            assert said == "locked"
            waited = _refused_busy(ledger)
            assert 0.5 <= waited < 1.9  # the bounded wait, not the other write's 2 s
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "released"
        finally:
            _kill(holder)
        assert ledger.read(_event_count) == before  # nothing of the refused write
        ledger.write(_one_event)
        assert ledger.read(_event_count) == before + 1  # the lock free, the same write lands
    finally:
        ledger.close()


def test_a_write_waits_for_another_process_s_turn_and_starts_once_it_is_given_back(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    ledger = Ledger.open(data)
    try:
        holder, said = _start(_WRITE_TURN, str(data / WRITE_LOCK_NAME), "0.4")
        try:
            assert said == "holding"
            started: list[float] = []

            def write(tx: Transaction) -> None:
                started.append(time.monotonic())
                _one_event(tx)

            ledger.write(write)
            assert holder.stdout is not None
            released = float(holder.stdout.readline().split()[1])
            # Its transaction began only after the other process gave its turn back.
            assert started[0] >= released
        finally:
            _kill(holder)
    finally:
        ledger.close()


def test_a_write_refused_for_another_process_s_turn_records_nothing_and_the_turn_comes_back(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    ledger = Ledger.open(data, busy_s=0.5)
    try:
        before = ledger.read(_event_count)
        holder, said = _start(_WRITE_TURN, str(data / WRITE_LOCK_NAME), "1.5")
        try:
            assert said == "holding"
            waited = _refused_busy(ledger)
            assert 0.5 <= waited < 1.4  # the bounded wait, not the other's 1.5 s
            assert ledger.read(_event_count) == before
            assert holder.stdout is not None
            assert holder.stdout.readline().startswith("released")
        finally:
            _kill(holder)
        # The wait the refused write left behind got the turn once it was free, and gave
        # it back, since nobody in this process wanted it any more: another process can
        # take it.
        assert _turn_free_within(data / WRITE_LOCK_NAME, 5.0)
        for _ in range(2):  # and this process's next writes take their turns again
            ledger.write(_one_event)
        assert ledger.read(_event_count) == before + 2
    finally:
        ledger.close()


_GIVE_BACK_AND_TAKE_AGAIN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from undogate.ledger.sqlite_files import WriteTurn
    turn = WriteTurn(Path(sys.argv[1]))
    turn.take(5.0)
    print("holding", flush=True)
    sys.stdin.readline()  # until the test has another writer in line
    turn.give_back()
    turn.take(5.0)  # at once, as a busy process's next write does
    print(f"again {time.monotonic()}", flush=True)
    time.sleep(60)
    """
)


def test_a_writer_in_line_is_never_overtaken_by_one_that_gave_its_turn_back(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    ledger = Ledger.open(data)
    holder = subprocess.Popen(
        [sys.executable, "-c", _GIVE_BACK_AND_TAKE_AGAIN, str(data)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdin is not None and holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        started: list[float] = []

        def write(tx: Transaction) -> None:
            started.append(time.monotonic())
            _one_event(tx)

        writing = threading.Thread(target=ledger.write, args=(write,))
        writing.start()
        assert _held_within(data / NEXT_WRITER_LOCK_NAME, 10.0)  # this one is in line
        holder.stdin.write("go\n")
        holder.stdin.flush()
        writing.join(timeout=10)
        again = float(holder.stdout.readline().split()[1])
        # The kernel woke this process's waiter when the turn was given back, but the
        # holder asked again at once: it had to get in line behind the waiter.
        assert started and started[0] < again
    finally:
        _kill(holder)
        if holder.stdin is not None:
            holder.stdin.close()
        ledger.close()


def _held_within(path: Path, wait_s: float) -> bool:
    """Whether some descriptor holds the lock at ``path`` within ``wait_s``."""
    fd = os.open(path, os.O_RDWR)
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fd, fcntl.LOCK_UN)
            time.sleep(0.01)  # poll interval of a bounded wait
        return False
    finally:
        os.close(fd)


def _turn_free_within(path: Path, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        taken = subprocess.run(
            [sys.executable, "-c", _TRY_TURN, str(path)], capture_output=True, text=True
        )
        if taken.stdout.strip() == "taken":
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


_TRY_TURN = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("taken")
    except BlockingIOError:
        print("held")
    """
)


MOUNTS = """\
/dev/sda1 / ext4 rw,relatime 0 0
tmpfs /tmp tmpfs rw,nosuid,nodev 0 0
server:/export /srv/shared nfs4 rw,relatime,vers=4.2 0 0
//nas/ledgers /mnt/nas cifs rw,relatime 0 0
server:/team /mnt/team\\040share nfs4 rw,relatime 0 0
kim@host:/ /home/kim/remote fuse.sshfs rw,nosuid,nodev 0 0
s3: /mnt/cloud fuse.rclone rw,nosuid,nodev 0 0
fuse-overlayfs /var/lib/containers fuse.fuse-overlayfs rw,nodev 0 0
/dev/sdb1 /media/usb fuseblk rw,nosuid,nodev 0 0
"""


@pytest.mark.parametrize(
    ("path", "fs", "network"),
    [
        ("/srv/shared/undogate", "nfs4", True),
        ("/srv/shared", "nfs4", True),
        ("/mnt/nas/data", "cifs", True),
        ("/srv/sharedness/data", "ext4", False),  # a longer name is not under the mount
        ("/tmp/undogate", "tmpfs", False),
        ("/var/lib/undogate", "ext4", False),
        ("/mnt/team share/undogate", "nfs4", True),  # /proc/mounts spells the space \040
        ("/mnt/team", "ext4", False),
        ("/home/kim/remote/data", "fuse.sshfs", True),
        ("/mnt/cloud/data", "fuse.rclone", True),  # a FUSE client not known to be local
        ("/var/lib/containers/storage", "fuse.fuse-overlayfs", False),
        ("/media/usb/data", "fuseblk", False),  # ntfs-3g on a disk of this machine
    ],
)
def test_a_network_filesystem_is_told_from_a_local_one_by_its_mount(
    path: str, fs: str, network: bool
) -> None:
    found = filesystem_type(Path(path), MOUNTS)
    assert found == fs
    assert is_network_filesystem(found) is network


_WRITE_BACK_TO_BACK = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from undogate.ledger import Ledger
    ledger = Ledger.open(Path(sys.argv[1]))
    actor = sys.argv[2]

    def write(tx):
        tx.end_expired_leases()  # as recovery does: a lapsed lease is ended, its work settled
        time.sleep(0.05)  # a write that keeps the lock a while (its fsyncs, a large step)
        tx.add_event(job_id=None, actor=actor, access_path="t", operation="x")

    print("writing", flush=True)
    while True:
        ledger.write(write)
    """
)
_LEASE_ONLY = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from undogate.ledger import Ledger
    ledger = Ledger.open(Path(sys.argv[1]), lease_s=float(sys.argv[2]))
    print(ledger.read(lambda tx: tx.own_lease), flush=True)
    time.sleep(120)
    """
)
#: The lease under test: short, so its renewals (every lease_s / 3) come often and a
#: lapse shows within seconds.
_SHORT_LEASE_S = 1.5
_WRITERS = ("writer-1", "writer-2")


def _lease_row(tx: object, lease_id: str) -> tuple[float, float, float | None, str | None]:
    """started_at, renewed_at, ended_at, ended_reason of one lease."""
    return tx.connection.execute(  # type: ignore[attr-defined,no-any-return]
        "SELECT started_at, renewed_at, ended_at, ended_reason FROM leases WHERE id = ?",
        (lease_id,),
    ).fetchone()


def _writers_events(tx: object) -> tuple[int, ...]:
    """How many events each back-to-back writer has written so far."""
    return tuple(
        int(
            tx.connection.execute(  # type: ignore[attr-defined]
                "SELECT COUNT(*) FROM events WHERE actor = ?", (actor,)
            ).fetchone()[0]
        )
        for actor in _WRITERS
    )


def test_a_lease_renews_in_its_turn_while_other_processes_write_back_to_back(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    leased, lease_id = _start(_LEASE_ONLY, str(data), str(_SHORT_LEASE_S))
    writers: list[subprocess.Popen[str]] = []
    watcher = Ledger.open(data, lease_s=None)  # reads only: it takes no part
    try:
        assert lease_id.startswith("lse_")
        for actor in _WRITERS:
            proc, said = _start(_WRITE_BACK_TO_BACK, str(data), actor)
            writers.append(proc)
            assert said == "writing"
        written_before = watcher.read(_writers_events)
        _, loaded_from, ended_at, reason = watcher.read(lambda tx: _lease_row(tx, lease_id))
        renewed_at = loaded_from
        # Watch until the lease has been renewed through three of its lifetimes under the
        # writers' load, or it lapsed and a writer ended it; the deadline only bounds a
        # lease that neither renews nor is ended.
        deadline = time.monotonic() + 60
        while (
            ended_at is None
            and renewed_at - loaded_from < 3 * _SHORT_LEASE_S
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)  # poll interval of a bounded watch
            _, renewed_at, ended_at, reason = watcher.read(lambda tx: _lease_row(tx, lease_id))
        written_after = watcher.read(_writers_events)
    finally:
        for proc in writers:
            _kill(proc)
        _kill(leased)
        watcher.close()
    assert (ended_at, reason) == (None, None), "the live process's lease lapsed and was ended"
    assert renewed_at - loaded_from >= 3 * _SHORT_LEASE_S
    # Both writers kept writing the whole time: the lease renewed under their load.
    assert all(
        after > before + 10 for before, after in zip(written_before, written_after, strict=True)
    )


def test_a_lease_is_taken_in_its_turn_while_other_processes_write_back_to_back(
    tmp_path: Path,
) -> None:
    """Opening with a lease writes the lease's row: it queues for the turn with the
    writers, so it is had within one of their writes, never lost to their sleeps."""
    data = tmp_path / "data"
    Ledger.open(data, lease_s=None).close()
    writers: list[subprocess.Popen[str]] = []
    waits: list[float] = []
    try:
        for actor in _WRITERS:
            proc, said = _start(_WRITE_BACK_TO_BACK, str(data), actor)
            writers.append(proc)
            assert said == "writing"
        for _ in range(8):
            started = time.monotonic()
            ledger = Ledger.open(data, lease_s=_SHORT_LEASE_S)
            waits.append(time.monotonic() - started)
            try:
                assert ledger.lease is not None
                row = ledger.read(partial(_lease_row, lease_id=ledger.lease.id))
                started_at, _, ended_at, _ = row
                assert started_at > 0 and ended_at is None
            finally:
                ledger.close()
    finally:
        for proc in writers:
            _kill(proc)
    assert max(waits) < BUSY_S, waits  # never near the busy wait it would be refused at


def test_a_lease_that_cannot_be_taken_refuses_the_open_as_ledger_busy(tmp_path: Path) -> None:
    """SQLite's write lock held by something that takes no turn (a tool, an older
    undogate) past the busy wait: the open is refused with the ledger's own error, and
    keeps nothing of itself."""
    data = tmp_path / "data"
    beside = Ledger.open(data, lease_s=None)  # so the newcomer joins, as beside a server
    tool = sqlite3.connect(data / DB_NAME, isolation_level=None)
    try:
        tool.execute("BEGIN IMMEDIATE")
        with pytest.raises(LedgerBusy) as refused:
            Ledger.open(data, lease_s=_SHORT_LEASE_S, busy_s=0.3)
        assert refused.value.code == "ledger_busy"
        tool.execute("ROLLBACK")
        assert beside.read(lambda tx: tx.connection.execute(  # type: ignore[attr-defined]
            "SELECT COUNT(*) FROM leases"
        ).fetchone()[0]) == 0  # fmt: skip
    finally:
        tool.close()
        beside.close()
    Ledger.open(data, alone=True).close()  # the refused open holds nothing
