"""Processes killed (SIGKILL) while they share a SQLite ledger with a serving gateway,
attacked where it hurts: holding the turn to write (``ledger.write.lock`` and SQLite's
write lock, a transaction begun and not committed), and at random moments of a stream
of commits. The gateway beside them must go on writing at once (no lock left behind),
nothing of the killed transaction may appear, nothing a killed process had committed
may be lost, the hash chain must still verify, and the killed process's lease is ended
by the live one once it expired."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from undogate.contract_server import ContractServer
from undogate.ledger import LOCK_NAME, Store
from undogate.ledger.sqlite_files import filesystem_type, is_network_filesystem

from .fixtures.fleet import CUSTOMER, LEASE_S, Fleet
from .serving import cli, serving
from .test_fail_closed import fill
from .test_multiprocess import (
    CSRF,
    _call,
    _confirm,
    _field,
    _prepare,
    _preview,
    _wait_for,
    _write_through,
)
from .worlds import MASTER_KEY

# A process that takes its turn to write, appends an event, and stops there (killed).
_HOLDS_THE_TURN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from undogate.ledger import Ledger
    ledger = Ledger.open(Path(sys.argv[1]), lease_s=2.0)
    print(ledger.read(lambda tx: tx.own_lease), flush=True)
    def hold(tx):
        tx.add_event(job_id=None, actor="killed-holder", access_path="t", operation="x")
        print("holding", flush=True)
        time.sleep(60)
    ledger.write(hold)
    """
)
# A process that commits one event after another, saying each once its commit returned.
_COMMITS = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from undogate.ledger import Ledger
    ledger = Ledger.open(Path(sys.argv[1]), lease_s=2.0)
    print("open", flush=True)
    n = 0
    while True:
        n += 1
        ledger.write(lambda tx: tx.add_event(
            job_id=None, actor="killed-writer", access_path="t", operation="x",
            detail={"n": str(n), "run": sys.argv[2]},
        ))
        print(n, flush=True)
    """
)

sqlite_only = pytest.mark.parametrize("fleet", ["sqlite"], indirect=True)


def _start(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # a few lines at most: why it stopped, if it did
        text=True,
    )


def _said(proc: subprocess.Popen[str]) -> str:
    """Its next line; or, when it exited instead, why (what it wrote on stderr)."""
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line and proc.wait(timeout=10) is not None and proc.stderr is not None:
        return f"exited {proc.returncode}: {proc.stderr.read()}"
    return line


def _kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL, then its pipes closed (whatever is left in them is not read)."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _events_by(store: Store, actor: str) -> list[str]:
    rows = store.read(
        lambda tx: tx.connection.execute(  # type: ignore[attr-defined]
            "SELECT detail FROM events WHERE actor = ?", (actor,)
        ).fetchall()
    )
    return [str(row[0]) for row in rows]


def _lease_ended(store: Store, lease_id: str) -> bool:
    row = store.read(
        lambda tx: tx.connection.execute(  # type: ignore[attr-defined]
            "SELECT ended_at FROM leases WHERE id = ?", (lease_id,)
        ).fetchone()
    )
    return row is not None and row[0] is not None


def _verified(fleet: Fleet) -> None:
    """The whole hash chain and the file's integrity, by the operator's own command."""
    checked = cli("ledger", "verify", "--config", str(fleet.config), env=fleet.env)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@sqlite_only
def test_a_process_killed_holding_the_turn_to_write_leaves_no_lock_and_nothing_of_its_write(
    fleet: Fleet, fleet_ledger: Store
) -> None:
    with serving(fleet.config, fleet.env) as (url, _):
        holder = _start(_HOLDS_THE_TURN, str(fleet.data_dir))
        try:
            lease_id = _said(holder)
            assert _said(holder) == "holding"
            # A whole job through the gateway: it queues behind the held turn.
            finished: list[float] = []

            def write_through() -> None:
                _write_through(url, fleet, "prospect")
                finished.append(1)

            through = threading.Thread(target=write_through)
            through.start()
            through.join(1.5)
            assert finished == [], "the gateway wrote while another process held the turn"
            killed_at = time.monotonic()
        finally:
            _kill(holder)
        through.join(10)
        # It went on as soon as the kernel released the dead process's locks, well within
        # the busy wait (5 s) it would otherwise have been refused after.
        assert finished == [1]
        assert time.monotonic() - killed_at < 4.0
        assert _events_by(fleet_ledger, "killed-holder") == []  # rolled back with the process
        _write_through(url, fleet, "customer")  # and it goes on writing
        # Once its lease expired, the live gateway ends it.
        _wait_for(lambda: _lease_ended(fleet_ledger, lease_id), timeout=20)
    _verified(fleet)


@sqlite_only
def test_writers_killed_at_random_moments_lose_no_commit_they_were_told_of(
    fleet: Fleet, fleet_ledger: Store
) -> None:
    """Twelve times: a process commits events as fast as it can beside the gateway and
    is killed at a random moment, mid-commit as likely as not. Every commit it was told
    had returned is in the ledger; the gateway writes between the kills."""
    told: dict[str, int] = {}
    chance = random.Random(28)
    with serving(fleet.config, fleet.env) as (url, _):
        for run in range(12):
            writer = _start(_COMMITS, str(fleet.data_dir), str(run))
            assert _said(writer) == "open"
            lines: list[str] = []
            reading = threading.Thread(target=_read_lines, args=(writer, lines))
            reading.start()
            time.sleep(chance.uniform(0.05, 0.6))  # a random moment of its stream of commits
            writer.send_signal(signal.SIGKILL)
            reading.join(10)  # what it said before it died, to the end of its pipe
            _kill(writer)
            told[str(run)] = int(lines[-1]) if lines else 0
            if run % 4 == 3:
                _write_through(url, fleet, ("prospect", "customer")[run % 8 // 4])
    committed: dict[str, set[int]] = {}
    for detail in _events_by(fleet_ledger, "killed-writer"):
        found = _number_and_run(detail)
        committed.setdefault(found[1], set()).add(found[0])
    assert sum(told.values()) > 0, told  # the writers did commit before their kills
    for writer_run, last in told.items():
        # each of 1..last is in; at most one more (committed, killed before it said so)
        have = committed.get(writer_run, set())
        assert set(range(1, last + 1)) <= have, (writer_run, last, sorted(have)[-3:])
        assert have <= set(range(1, last + 2)), (writer_run, last, sorted(have)[-3:])
    _verified(fleet)


def _read_lines(proc: subprocess.Popen[str], lines: list[str]) -> None:
    assert proc.stdout is not None
    lines.extend(line.strip() for line in proc.stdout if line.strip())


def _number_and_run(detail: str) -> tuple[int, str]:
    value = json.loads(detail)
    return int(value["n"]), str(value["run"])


@pytest.fixture
def small_data_dir(tmp_path: Path) -> Iterator[Path]:
    """The fleet's data dir (``tmp_path / "data"``) on a tmpfs of its own, 8 MiB."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    disk = tmp_path / "data"
    disk.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(disk)], check=True
    )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _jobs(store: Store) -> int:
    return int(
        store.read(
            lambda tx: tx.connection.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]  # type: ignore[attr-defined]
        )
    )


def _prepare_answer(url: str, fleet: Fleet, status: str) -> tuple[int, str]:
    body: dict[str, object] = {"summary": status, "changes": [
        {"resource": "supplier", "set": {"status": status}}
    ]}  # fmt: skip
    answer = _call(url, fleet.agent, "/api/v1/jobs", body)
    code = "" if answer.status_code == 201 else str(answer.json()["error"]["code"])
    return answer.status_code, code


@sqlite_only
def test_a_disk_that_fills_under_two_processes_records_nothing_half_and_harms_neither(
    small_data_dir: Path, fleet: Fleet, fleet_ledger: Store
) -> None:
    assert fleet.data_dir == small_data_dir
    with (
        serving(fleet.config, fleet.env) as (a, proc_a),
        serving(fleet.config, fleet.env) as (
            b,
            proc_b,
        ),
    ):
        jobs_before = _jobs(fleet_ledger)
        filler = fill(small_data_dir)
        answers = [_prepare_answer((a, b)[n % 2], fleet, f"full-{n}") for n in range(40)]
        made = sum(1 for status, _ in answers if status == 201)
        refused = [(status, code) for status, code in answers if status != 201]
        # A full disk is refused with the ledger's error, clearly, never a bare 500.
        assert refused, "the full disk refused nothing"
        assert set(refused) == {(503, "ledger_error")}, refused
        # Nothing half-recorded: exactly the prepares that were answered 201 are jobs.
        assert _jobs(fleet_ledger) == jobs_before + made
        assert proc_a.poll() is None and proc_b.poll() is None
        filler.unlink()
        # Both go on, each writing a whole job, once the disk has room.
        _write_through(a, fleet, "prospect")
        _write_through(b, fleet, "customer")
    _verified(fleet)


@pytest.fixture
def mount_point(tmp_path: Path) -> Iterator[Path]:
    """A real tmpfs mounted where an operator might mount a share: a folder whose name
    has a space (``/proc/mounts`` spells it ``\\040``)."""
    if os.geteuid() != 0:
        pytest.skip("mounting needs root (CI runs as root)")
    point = tmp_path / "team share"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)], check=True)
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_the_filesystem_of_a_mount_point_with_a_space_in_its_name_is_told(
    mount_point: Path,
) -> None:
    mounts = Path("/proc/mounts").read_text()
    assert filesystem_type(mount_point / "data", mounts) == "tmpfs"


@pytest.mark.parametrize(
    "fs",
    ["fuse.glusterfs", "fuse.ceph-fuse", "fuse.rclone", "fuse.s3fs", "fuse.gcsfuse", "lustre",
     "gpfs", "beegfs"],
)  # fmt: skip
def test_the_network_filesystems_fuse_clients_mount_are_refused(fs: str) -> None:
    assert is_network_filesystem(fs)


@sqlite_only
def test_a_process_started_after_the_lock_file_was_deleted_never_settles_a_live_write(
    fleet: Fleet, server: ContractServer, fleet_ledger: Store
) -> None:
    with serving(fleet.config, fleet.env) as (a, _):
        job_id = _prepare(a, fleet, "customer", "customer")
        token = _preview(a, fleet, job_id)
        gate = server.hold_next_write(CUSTOMER)
        outcome: list[int] = []
        confirming = threading.Thread(
            target=lambda: outcome.append(_confirm(a, fleet, job_id, token).status_code)
        )
        confirming.start()
        try:
            assert gate.arrived.wait(30), "the write never reached the endpoint"
            (fleet.data_dir / LOCK_NAME).unlink()  # a clean-up that took it for a stale lock
            with serving(fleet.config, fleet.env):  # healthy: its recovery has run
                in_flight = fleet_ledger.read(lambda tx: tx.in_flight_actions())
                assert [action.job_id for action in in_flight] == [job_id]
        finally:
            gate.release()
            confirming.join(30)
        assert outcome == [200]


@sqlite_only
def test_restore_is_refused_beside_a_serving_process_after_the_lock_file_was_deleted(
    fleet: Fleet, tmp_path: Path
) -> None:
    backup = tmp_path / "backup.sqlite3"
    with serving(fleet.config, fleet.env) as (url, _):
        made = cli("backup", str(backup), "--config", str(fleet.config), env=fleet.env)
        assert made.returncode == 0, made.stderr
        (fleet.data_dir / LOCK_NAME).unlink()  # a clean-up that took it for a stale lock
        restored = cli("restore", str(backup), "--config", str(fleet.config), env=fleet.env)
        assert restored.returncode != 0
        assert "ledger_in_use" in restored.stderr, restored.stderr
        _write_through(url, fleet, "prospect")  # the served ledger is still the one in use
    assert not list(fleet.data_dir.glob("before-restore-*"))  # nothing was moved aside


def _signed_in(url: str, key: str) -> dict[str, str]:
    """A reviewer's session cookies, signed in through the process at ``url``."""
    with httpx.Client(base_url=url, timeout=30, follow_redirects=True) as browser:
        form = browser.get("/signin")
        signed = browser.post("/signin", data={"key": key, "csrf": _field(CSRF, form.text)})
        assert signed.url.path == "/inbox", signed.text[:500]
        return dict(browser.cookies)


def _page(url: str, cookies: dict[str, str]) -> httpx.Response:
    with httpx.Client(base_url=url, cookies=cookies, timeout=30) as browser:
        return browser.get("/agents")


def _refused(page: httpx.Response) -> bool:
    return page.status_code == 303 and page.headers["location"].startswith("/signin")


@sqlite_only
def test_a_session_ended_or_whose_key_was_revoked_through_one_process_is_refused_by_another(
    fleet: Fleet,
) -> None:
    with serving(fleet.config, fleet.env) as (a, _), serving(fleet.config, fleet.env) as (b, _):
        made = _call(a, MASTER_KEY, "/api/v1/admin/keys", {"kind": "operator", "label": "kim"})
        assert made.status_code == 201, made.text
        key, credential = made.json()["key"], made.json()["credential"]["id"]

        # Signed out through A: B refuses the cookie on its next page.
        cookies = _signed_in(a, key)
        assert _page(b, cookies).status_code == 200  # B knew the session
        with httpx.Client(base_url=a, cookies=cookies, timeout=30) as on_a:
            csrf = _field(CSRF, on_a.get("/agents").text)
            assert on_a.post("/signout", data={"csrf": csrf}).status_code == 303
        assert _refused(_page(b, cookies))
        assert _refused(_page(a, cookies))

        # The key revoked through A while signed in: both refuse the session at once.
        cookies = _signed_in(b, key)
        assert _page(a, cookies).status_code == 200 and _page(b, cookies).status_code == 200
        revoked = _call(a, MASTER_KEY, f"/api/v1/admin/keys/{credential}/revoke", {})
        assert revoked.status_code == 200, revoked.text
        assert _refused(_page(b, cookies))
        assert _refused(_page(a, cookies))


@sqlite_only
def test_backups_taken_while_three_processes_write_each_verify_and_restore_waits_for_them(
    fleet: Fleet, tmp_path: Path
) -> None:
    """Two processes commit as fast as they can and a gateway applies jobs beside them,
    while ``undogate backup`` runs three times: each backup is one whole ledger whose hash
    chain verifies; ``restore`` is refused while any of them has the ledger open."""
    with serving(fleet.config, fleet.env) as (url, _):
        writers = [_start(_COMMITS, str(fleet.data_dir), f"w{n}") for n in range(2)]
        try:
            assert [_said(w) for w in writers] == ["open", "open"]
            for n in range(3):
                backup = tmp_path / f"backup-{n}.sqlite3"
                made = cli("backup", str(backup), "--config", str(fleet.config), env=fleet.env)
                assert made.returncode == 0, made.stderr
                checked = cli("ledger", "verify", str(backup), env=fleet.env)
                assert checked.returncode == 0, checked.stdout + checked.stderr
                _write_through(url, fleet, ("prospect", "customer")[n % 2])
            restored = cli(
                "restore", str(tmp_path / "backup-0.sqlite3"), "--config", str(fleet.config),
                env=fleet.env,
            )  # fmt: skip
            assert restored.returncode != 0
            assert "ledger_in_use" in restored.stderr, restored.stderr
            assert all(w.poll() is None for w in writers)  # they wrote throughout
        finally:
            for writer in writers:
                _kill(writer)
    assert not list(fleet.data_dir.glob("before-restore-*"))  # nothing was moved aside
    _verified(fleet)


@sqlite_only
def test_a_process_with_a_shorter_lease_never_settles_a_longer_leased_process_write(
    fleet: Fleet, server: ContractServer, fleet_ledger: Store, tmp_path: Path
) -> None:
    """Two configs on one data dir: A leases for 30 s (renewing every 10 s), B, started
    beside it, for 2 s (sweeping every 0.7 s). Each lease carries its own expiry, so B's
    sweeps never judge A by B's lease while A holds a write in flight."""
    patient = tmp_path / "patient.yaml"
    config = yaml.safe_load(fleet.config.read_text())
    config["server"]["lease_s"] = 30
    patient.write_text(yaml.safe_dump(config))
    with serving(patient, fleet.env) as (a, _):
        job_id = _prepare(a, fleet, "customer", "customer")
        token = _preview(a, fleet, job_id)
        gate = server.hold_next_write(CUSTOMER)
        outcome: list[int] = []
        confirming = threading.Thread(
            target=lambda: outcome.append(_confirm(a, fleet, job_id, token).status_code)
        )
        confirming.start()
        try:
            assert gate.arrived.wait(30), "the write never reached the endpoint"
            with serving(fleet.config, fleet.env):
                (action,) = fleet_ledger.read(lambda tx: tx.in_flight_actions())
                since = time.time()
                # Three of B's leases long: many sweeps, each of which would have ended
                # A's lease had it been judged by B's 2 s since A's last renewal.
                _wait_for(lambda: time.time() > since + 3 * LEASE_S)
                assert fleet_ledger.read(lambda tx: tx.in_flight_actions()) == [action]
        finally:
            gate.release()
            confirming.join(30)
        assert outcome == [200]
