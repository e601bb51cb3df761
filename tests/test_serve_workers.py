"""``undogate serve --workers N``: N serve processes on one port, each with its own lease
on the ledger, on each engine (a SQLite file shared on this machine, PostgreSQL)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from undogate.ledger import SQLiteStore, Store
from undogate.ledger.postgres import PostgresStore

from .postgres import PostgresCluster
from .serving import SERVE, cli, free_port, wait_healthy


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_workers_share_one_port_each_with_a_lease_and_a_dead_one_is_replaced(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    url = None
    if engine == "postgres":
        cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
        url = cluster.fresh_database()
    data_dir = tmp_path / "data"
    config = tmp_path / "undogate.yaml"
    on_postgres = f"  ledger: {url}\n" if url else ""
    config.write_text(f"server:\n{on_postgres}  lease_s: 2\n  data_dir: {data_dir}\n")
    assert cli("init", "--config", str(config)).returncode == 0
    port = free_port()
    parent = subprocess.Popen(
        [*SERVE, "--config", str(config), "--port", str(port), "--workers", "2"],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The test's own view: no lease, so it takes part in nothing.
    ledger: Store = (
        PostgresStore.open(url, lease_s=None) if url else SQLiteStore.open(data_dir, lease_s=None)
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", parent)
        assert parent.stderr is not None
        line, before = "", []
        while "worker processes" not in line:
            line = parent.stderr.readline()
            assert line, "serve --workers said nothing about its workers"
            before.append(line)
        pids = [int(p) for p in re.findall(r"\d+", line.split("pids", 1)[1])]
        assert len(pids) == 2 and parent.pid not in pids
        # Each worker's lines are labelled, and "serving" is said once both are.
        for n, pid in enumerate(pids, start=1):
            said = [b for b in before if b.startswith(f"worker {n} (pid {pid}): ")]
            assert any("undogate serving http://" in b for b in said), before
        _wait_for_leases(ledger, 2)
        for _ in range(10):  # every request answered, whichever worker takes it
            assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200

        # A worker dies: the supervisor starts another, with a lease of its own.
        leases_before = ledger.read(lambda tx: tx.open_leases())
        os.kill(pids[0], signal.SIGKILL)
        _wait_for_leases(ledger, 2, besides=leases_before)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        parent.send_signal(signal.SIGTERM)
        stopped = parent.wait(timeout=30)
        if parent.stderr:
            parent.stderr.close()
    assert stopped == 0
    # Stopped cleanly: the live workers ended their leases (the killed one's expires).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(ledger.read(lambda tx: tx.open_leases())) > 1:
        time.sleep(0.1)  # poll interval of a bounded loop
    assert len(ledger.read(lambda tx: tx.open_leases())) <= 1
    ledger.close()


def _wait_for_leases(ledger: Store, count: int, besides: frozenset[str] = frozenset()) -> None:
    """Until ``count`` open leases exist, at least one of them not in ``besides``."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        leases = ledger.read(lambda tx: tx.open_leases())
        if len(leases - besides) >= (1 if besides else count):
            return
        time.sleep(0.1)  # poll interval of a bounded loop
    raise AssertionError(f"never {count} open leases")


def test_a_worker_that_cannot_start_stops_them_all_with_its_error(tmp_path: Path) -> None:
    config = tmp_path / "undogate.yaml"
    unreachable = "postgresql://nobody@127.0.0.1:1/none"
    config.write_text(f"server:\n  ledger: {unreachable}\n  data_dir: {tmp_path / 'data'}\n")
    port = free_port()
    refused = cli("serve", "--config", str(config), "--workers", "2", "--port", str(port))
    assert refused.returncode == 2, refused.stderr
    assert "error [ledger_error]: the ledger could not open" in refused.stderr
    assert "failed at start (exit 2); stopping" in refused.stderr
    with socket.socket() as probe:  # the port is free again
        probe.bind(("127.0.0.1", port))
