"""A process sharing a SQLite ledger that stops ends its lease: also when the SIGTERM cuts
short a write waiting for its turn; and when it cannot (the ledger kept busy past the busy
wait), its log says so and the lease is left to expire."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from undogate.ledger import Ledger
from undogate.ledger.sqlite_files import NEXT_WRITER_LOCK_NAME, WRITE_LOCK_NAME

from .test_ledger_sharing import _held_within, _kill, _lease_row, _turn_free_within

_STOPPED_WHILE_WAITING = textwrap.dedent(
    """
    import signal, sys
    from pathlib import Path
    from undogate.ledger import Ledger

    def stop(signum, frame):
        raise SystemExit(0)  # what `undogate serve` does on SIGTERM

    ledger = Ledger.open(Path(sys.argv[1]), busy_s=5.0)
    print(ledger.read(lambda tx: tx.own_lease), flush=True)
    def one_event(tx):
        tx.add_event(job_id=None, actor="t", access_path="t", operation="x")

    signal.signal(signal.SIGTERM, stop)
    try:
        sys.stdin.readline()  # until the test holds the turn to write
        ledger.write(one_event)
    finally:
        print("stopping", flush=True)
        sys.stdin.readline()  # until the test has given its turn to this process's waiter
        ledger.close()
    """
)


def test_a_process_stopped_while_waiting_for_its_turn_still_ends_its_lease(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    stopped = subprocess.Popen(
        [sys.executable, "-c", _STOPPED_WHILE_WAITING, str(data)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert stopped.stdin is not None and stopped.stdout is not None
    lease_id = stopped.stdout.readline().strip()
    watcher = Ledger.open(data, lease_s=None)  # reads only: it takes no part
    turn = os.open(data / WRITE_LOCK_NAME, os.O_RDWR)
    try:
        assert lease_id.startswith("lse_")
        fcntl.flock(turn, fcntl.LOCK_EX)  # the test is the other process whose turn it is
        stopped.stdin.write("write\n")
        stopped.stdin.flush()
        assert _held_within(data / NEXT_WRITER_LOCK_NAME, 10.0)  # its write is in line
        # The SIGTERM's SystemExit lands in the wait, and the turn it was waiting for comes
        # to its waiter while the process unwinds, before the ledger is closed.
        stopped.send_signal(signal.SIGTERM)
        assert stopped.stdout.readline().strip() == "stopping"
        fcntl.flock(turn, fcntl.LOCK_UN)
        assert _turn_free_within(data / NEXT_WRITER_LOCK_NAME, 10.0)  # out of line: it has it
        stopped.stdin.write("close\n")
        stopped.stdin.flush()
        assert stopped.wait(timeout=30) == 0
        # It ended its lease: its last write was not kept waiting for the turn its own
        # cut-short write had been given.
        assert watcher.read(lambda tx: _lease_row(tx, lease_id))[3] == "closed"
        assert _turn_free_within(data / WRITE_LOCK_NAME, 5.0)
    finally:
        os.close(turn)
        _kill(stopped)
        if stopped.stdin is not None:
            stopped.stdin.close()
        watcher.close()


_CLOSED_ON_DEMAND = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from undogate.ledger import Ledger
    ledger = Ledger.open(Path(sys.argv[1]), busy_s=0.5)
    print(ledger.read(lambda tx: tx.own_lease), flush=True)
    sys.stdin.readline()
    ledger.close()
    """
)


def test_a_lease_that_cannot_be_ended_at_close_is_left_to_expire_and_the_log_says_so(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    closing = subprocess.Popen(
        [sys.executable, "-c", _CLOSED_ON_DEMAND, str(data)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert closing.stdin is not None and closing.stdout is not None
    lease_id = closing.stdout.readline().strip()
    watcher = Ledger.open(data, lease_s=None)  # reads only: it takes no part
    turn = os.open(data / WRITE_LOCK_NAME, os.O_RDWR)
    try:
        assert lease_id.startswith("lse_")
        fcntl.flock(turn, fcntl.LOCK_EX)  # another process keeps the turn past its busy wait
        _, said = closing.communicate("close\n", timeout=30)
        assert closing.returncode == 0
        assert watcher.read(lambda tx: _lease_row(tx, lease_id))[3] is None
        assert f"could not end its lease {lease_id} on the ledger as it stopped" in said
        assert "it expires within 30 s" in said
    finally:
        os.close(turn)
        _kill(closing)
        watcher.close()
