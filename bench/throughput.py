"""Figures 2 and 5: prepare throughput of a running ``undogate serve`` under 16
concurrent agents, vs raw GETs plus one fsync'd commit each; and the server's peak RSS.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Protocol

import httpx
import yaml

from undogate.auth import Keyring
from undogate.ledger import Ledger

from .common import UNTHROTTLED, DurableCommits, contract_server, free_port, private_dir

AGENTS = 16
ALONE = 200  # prepares sent by one agent alone before the concurrent run


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _seed(data: Path) -> None:
    data.mkdir(parents=True)
    for i in range(AGENTS):
        (data / f"rec-{i}.json").write_text(f'{{"id": "{i}", "status": "lead", "owner": "o"}}\n')


def _config(work: Path, base: str) -> Path:
    path = work / "undogate.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": str(private_dir(work / "ledger"))},
                "limits": {"max_jobs": 1_000_000, **UNTHROTTLED},
                "resources": [
                    {
                        "id": f"rec-{i}",
                        "agent_id": f"agent-{i}",
                        "name": f"record {i}",
                        "kind": "json_record",
                        "url": f"{base}/records/rec-{i}",
                        "fields": ["status"],
                        "conditional_writes": True,
                        "allow_loopback_http": True,
                    }
                    for i in range(AGENTS)
                ],
                "agents": [
                    {"id": f"agent-{i}", "tools": ["list_resources", "prepare_changes"]}
                    for i in range(AGENTS)
                ],
            }
        )
    )
    return path


def _tokens(work: Path) -> list[str]:
    ledger = Ledger.open(work / "ledger")
    try:
        keyring = Keyring(ledger, known_agents=lambda: {f"agent-{i}" for i in range(AGENTS)})
        owner = keyring.create_operator(label="bench")
        return [
            keyring.create_agent_token(
                owner_id=owner.credential.id, agent_id=f"agent-{i}", label=f"a{i}"
            ).key
            for i in range(AGENTS)
        ]
    finally:
        ledger.close()


class _Connection(Protocol):
    def send(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]: ...

    def close(self) -> None: ...


class _RawConnection:
    """The lightest HTTP/1.1 keep-alive client there is in Python: ``http.client``."""

    def __init__(self, base: str) -> None:
        url = httpx.URL(base)
        self._conn = http.client.HTTPConnection(url.host, url.port, timeout=30)

    def send(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        self._conn.request(method, path, body=body, headers=headers)
        response = self._conn.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self._conn.close()


class _HttpxConnection:
    """What most Python agents use (the MCP SDK's client is httpx)."""

    def __init__(self, base: str) -> None:
        self._client = httpx.Client(base_url=base, timeout=30, trust_env=False)

    def send(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        response = self._client.request(method, path, content=body, headers=headers)
        return response.status_code, response.content

    def close(self) -> None:
        self._client.close()


CLIENTS: dict[str, Callable[[str], _Connection]] = {
    "http.client": _RawConnection,
    "httpx": _HttpxConnection,
}


def _run_threads(work_fn: list[Callable[[], None]]) -> float:
    threads = [threading.Thread(target=fn) for fn in work_fn]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_healthy(gateway: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(gateway + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("undogate serve did not start")
        time.sleep(0.05)


def run(work: Path, client: str = "http.client", per_agent: int = 40) -> dict[str, float]:
    """One run: 16 agents on ``client`` against ``serve``, then the floor on the same client."""
    connect = CLIENTS[client]
    data = work / "contract"
    _seed(data)
    lock = threading.Lock()
    with contract_server(data) as base:
        config = _config(work, base)
        tokens = _tokens(work)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("UNDOGATE_")}
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "undogate.cli",
                "serve",
                "--config",
                str(config),
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        gateway = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(gateway)
            latencies: list[float] = []
            errors: list[str] = []

            def agent(i: int, count: int, into: list[float]) -> None:
                conn = connect(gateway)
                headers = {
                    "Authorization": f"Bearer {tokens[i]}",
                    "Content-Type": "application/json",
                }
                try:
                    for n in range(count):
                        change = {"resource": f"rec-{i}", "set": {"status": f"v{n}"}}
                        body = json.dumps({"summary": f"bench {n}", "changes": [change]})
                        t = time.perf_counter()
                        status, text = conn.send("POST", "/api/v1/jobs", body.encode(), headers)
                        elapsed = time.perf_counter() - t
                        with lock:
                            into.append(elapsed)
                            if status != 201:
                                errors.append(f"{status} {text[:200]!r}")
                finally:
                    conn.close()

            # One agent alone first: what a prepare costs the gateway with no contention.
            cpu_before = _cpu_seconds(server.pid)
            agent(0, ALONE, [])
            alone_cpu = _cpu_seconds(server.pid) - cpu_before
            cpu_before = _cpu_seconds(server.pid)
            measured = _run_threads(
                [partial(agent, i, per_agent, latencies) for i in range(AGENTS)]
            )
            if errors:
                raise RuntimeError(f"prepare failed: {errors[:3]}")
            server_cpu = _cpu_seconds(server.pid) - cpu_before
            status = Path(f"/proc/{server.pid}/status").read_text()
            peak_kib = next(
                int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")
            )
        finally:
            server.terminate()
            server.wait(timeout=20)
        floor_db = DurableCommits(private_dir(work / "floor") / "floor.sqlite3")
        commit_lock = threading.Lock()
        floor_latencies: list[float] = []

        def raw(i: int) -> None:
            conn = connect(base)
            try:
                for _ in range(per_agent):
                    t = time.perf_counter()
                    status, _ = conn.send("GET", f"/records/rec-{i}", None, {})
                    if status != 200:
                        raise RuntimeError(f"the floor's GET answered {status}")
                    with commit_lock:
                        floor_db.commit()
                    elapsed = time.perf_counter() - t
                    with lock:
                        floor_latencies.append(elapsed)
            finally:
                conn.close()

        try:
            floor = _run_threads([partial(raw, i) for i in range(AGENTS)])
        finally:
            floor_db.close()
    total = AGENTS * per_agent
    return {
        "jobs": float(total),
        "throughput": total / measured,
        "floor_throughput": total / floor,
        "ratio": (total / measured) / (total / floor),
        "p50_ms": _percentile(latencies, 0.5) * 1000,
        "p99_ms": _percentile(latencies, 0.99) * 1000,
        "floor_p50_ms": _percentile(floor_latencies, 0.5) * 1000,
        "floor_p99_ms": _percentile(floor_latencies, 0.99) * 1000,
        "peak_rss_mib": peak_kib / 1024,
        "server_cpu_ms": server_cpu * 1000 / total,
        "server_busy": server_cpu / measured,
        "server_cpu_alone_ms": alone_cpu * 1000 / ALONE,
    }
