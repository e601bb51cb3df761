"""``undogate serve --workers N``: N serve processes on one port, each with its own lease
on the ledger, on each engine (a SQLite file shared on this machine, PostgreSQL)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml

from undogate.contract_server import ContractServer
from undogate.ledger import SQLiteStore, Store
from undogate.ledger.postgres import PostgresStore
from undogate.testing.launcher import Child, popen

from .postgres import PostgresCluster
from .serving import SERVE, SERVED_PATH, Samples, cli, free_port, samples, value, wait_healthy
from .worlds import resource


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
    parent = popen(
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


def test_workers_metrics_sum_every_worker_and_forget_the_dead_ones(
    tmp_path: Path, postgres_cluster: PostgresCluster, server: ContractServer
) -> None:
    """Each worker counts in the directory its supervisor made; a scrape of any one sums
    them all, the counts of a worker that died included, while a dead worker no longer
    counts among the processes."""
    url = postgres_cluster.fresh_database()
    config = tmp_path / "undogate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"ledger": url, "lease_s": 2, "data_dir": str(tmp_path / "data")},
                "resources": [resource(server, "customer", SERVED_PATH)],
                "agents": [{"id": "account-assistant", "tools": ["prepare_changes"]}],
            }
        )
    )
    assert cli("init", "--config", str(config)).returncode == 0
    made = cli("keys", "create-agent", "--agent", "account-assistant", "--config", str(config))
    assert made.returncode == 0, made.stderr
    agent = made.stdout.splitlines()[0]
    port, bind = free_port(), free_port()
    parent = popen(
        [*SERVE, "--config", str(config), "--port", str(port), "--workers", "2",
         "--metrics-bind", f"127.0.0.1:{bind}", "--log-format", "json"],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    metrics = f"http://127.0.0.1:{bind}/metrics"
    try:
        wait_healthy(f"http://127.0.0.1:{port}", parent)
        pids = _worker_pids(parent)
        _scrape_until(metrics, lambda s: value(s, "undogate_processes") == 2)
        statuses = iter(["s1", "s2", "s3", "s4", "s5"])

        def prepare() -> None:  # a connection of its own: either worker may take it
            made = httpx.post(
                f"http://127.0.0.1:{port}/api/v1/jobs",
                content='{"summary": "s", "changes": [{"resource": "customer", '
                f'"set": {{"status": "{next(statuses)}"}}}}]}}',
                headers={"Authorization": f"Bearer {agent}", "Content-Type": "application/json"},
                timeout=30,
            )
            assert made.status_code == 201, made.text

        for _ in range(3):
            prepare()
        # Both workers die, one after the other: all three prepares were counted by
        # processes that are gone, and each is replaced.
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

            def replaced(s: Samples, dead: int = pid) -> bool:
                """Its lease ended, another worker serves in its place."""
                holders = _holders(s)
                return (
                    dead not in holders
                    and len(holders) >= 2
                    and (value(s, "undogate_processes") == 2)
                )

            _scrape_until(metrics, replaced)
        for _ in range(2):
            prepare()
        scraped = _scrape_until(
            metrics, lambda s: value(s, "undogate_prepares_total", outcome="prepared") == 5
        )
        assert value(scraped, "undogate_processes") == 2  # the dead were forgotten
        assert not _holders(scraped) & set(pids)  # their leases expired and were ended
    finally:
        parent.send_signal(signal.SIGTERM)
        stopped = parent.wait(timeout=30)
        if parent.stderr:
            parent.stderr.close()
    assert stopped == 0


def _worker_pids(parent: Child) -> list[int]:
    """From JSON logs: the workers' lines pass as they are, and the supervisor says it
    serves once each worker's line said so."""
    assert parent.stderr is not None
    said = ""
    while "worker processes" not in said:
        line = parent.stderr.readline()
        assert line, "serve --workers said nothing about its workers"
        said = json.loads(line)["message"]  # every line is one JSON object
    return [int(p) for p in re.findall(r"\d+", said.split("pids", 1)[1])]


def _scrape_until(url: str, ready: Callable[[Samples], bool]) -> Samples:
    """Scrape until ``ready`` holds (a bounded poll): workers start and die on their own
    time."""
    deadline = time.monotonic() + 30
    scraped: Samples = {}
    while time.monotonic() < deadline:
        answer = httpx.get(url, timeout=10)
        assert answer.status_code == 200, answer.text
        scraped = samples(answer.text)
        if ready(scraped):
            return scraped
        time.sleep(0.1)  # poll interval of a bounded loop
    raise AssertionError(f"the scrape never became ready: {scraped}")


def _holders(found: Samples) -> set[int]:
    """The pids whose leases the scrape shows ("pid N on host")."""
    return {
        int(dict(labels)["holder"].split()[1])
        for name, labels in found
        if name == "undogate_lease_age_seconds"
    }
