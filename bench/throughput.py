"""Figures 2 and 5: prepare throughput of running ``undogate serve`` processes under 16
concurrent agents, vs raw GETs plus one durable commit each on the same ledger engine;
and the servers' peak RSS.

One or several plain ``serve`` processes share one ledger (SQLite in one data
directory, or one PostgreSQL database), each on its own port, the agents split between
them; the 16 agents belong to one owner or are dealt round to several. A second process
that the ledger refuses raises ``SecondProcessRefused`` with serve's own words: a row to
skip, not a failure.
"""

from __future__ import annotations

import contextlib
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
from undogate.config import parse_config
from undogate.ledger import open_store

from .common import (
    UNTHROTTLED,
    DurableCommits,
    LockWaits,
    PostgresCommits,
    contract_server,
    cpu_seconds,
    free_port,
    machine_busy_seconds,
    private_dir,
)

AGENTS = 16
ALONE = 200  # prepares sent by one agent alone before the concurrent run
SERVE = [sys.executable, "-m", "undogate.cli", "serve"]


class SecondProcessRefused(RuntimeError):
    """A further ``serve`` on the same ledger exited before it was healthy."""


class _Commits(Protocol):
    def commit(self, value: str = "x") -> None: ...

    def close(self) -> None: ...


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _seed(data: Path) -> None:
    data.mkdir(parents=True)
    for i in range(AGENTS):
        (data / f"rec-{i}.json").write_text(f'{{"id": "{i}", "status": "lead", "owner": "o"}}\n')


def _config(work: Path, base: str, ledger: str | None) -> dict[str, object]:
    server: dict[str, str] = {"data_dir": str(private_dir(work / "ledger"))}
    if ledger:
        server["ledger"] = ledger
    return {
        "server": server,
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


def _tokens(config: dict[str, object], owners: int) -> list[str]:
    """A token per agent; agent ``i`` belongs to owner ``i % owners``."""
    ledger = open_store(parse_config(config).server)
    try:
        keyring = Keyring(ledger, known_agents=lambda: {f"agent-{i}" for i in range(AGENTS)})
        made = [keyring.create_operator(label=f"bench-{n}") for n in range(owners)]
        return [
            keyring.create_agent_token(
                owner_id=made[i % owners].credential.id, agent_id=f"agent-{i}", label=f"a{i}"
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


def _serve(config: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``undogate serve`` on a free port; its stderr goes to ``log`` (never a pipe that
    could fill and stall it)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNDOGATE_")}
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [*SERVE, "--config", str(config), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    return proc, f"http://127.0.0.1:{port}"


def _wait_healthy(gateway: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            said = log.read_text(errors="replace").strip().splitlines()
            raise SecondProcessRefused(said[-1] if said else f"exited with {proc.returncode}")
        try:
            if httpx.get(gateway + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("undogate serve did not start")
        time.sleep(0.05)


def _peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))


def run(
    work: Path,
    client: str = "http.client",
    *,
    ledger: str | None = None,
    processes: int = 1,
    owners: int = 1,
    per_agent: int = 40,
    database_cpu: Callable[[], float] | None = None,
) -> dict[str, float]:
    """One run: 16 agents of ``owners`` owners on ``client`` against ``processes`` serve
    processes on one ledger (``ledger``: a PostgreSQL URL; else SQLite), then the floor
    on the same client and the same engine. ``database_cpu`` reads the database
    server's CPU seconds so far.

    Raises:
        SecondProcessRefused: a serve process after the first was refused the ledger.
    """
    connect = CLIENTS[client]
    data = work / "contract"
    _seed(data)
    lock = threading.Lock()
    with contract_server(data) as base:
        # The floor runs before and after the gateway, and the faster counts: another load
        # on the machine can only slow a floor down, and a slowed floor flatters the ratio.
        floor_before: list[float] = []
        floor_first = _floor(connect, base, ledger, work / "floor-before", per_agent, floor_before)
        settings = _config(work, base, ledger)
        config = work / "undogate.yaml"
        config.write_text(yaml.safe_dump(settings))
        tokens = _tokens(settings, owners)
        servers: list[subprocess.Popen[bytes]] = []
        try:
            gateways: list[str] = []
            for n in range(processes):
                log = work / f"serve-{n}.log"
                proc, url = _serve(config, log)
                servers.append(proc)
                gateways.append(url)
                try:
                    _wait_healthy(url, proc, log)
                except SecondProcessRefused:
                    if n == 0:
                        raise RuntimeError(f"undogate serve failed: {log.read_text()}") from None
                    raise
            latencies: list[float] = []
            errors: list[str] = []

            def agent(i: int, count: int, into: list[float]) -> None:
                conn = connect(gateways[i % processes])  # the agents split between them
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

            def gateway_cpu() -> float:
                return sum(cpu_seconds(s.pid) for s in servers)

            # One agent alone first: what a prepare costs the gateway with no contention.
            cpu_before = gateway_cpu()
            agent(0, ALONE, [])
            alone_cpu = gateway_cpu() - cpu_before
            cpu_before = gateway_cpu()
            db_before = database_cpu() if database_cpu else 0.0
            machine_before = machine_busy_seconds()
            with LockWaits(ledger) if ledger else contextlib.nullcontext() as waits:
                measured = _run_threads(
                    [partial(agent, i, per_agent, latencies) for i in range(AGENTS)]
                )
            if errors:
                raise RuntimeError(f"prepare failed: {errors[:3]}")
            server_cpu = gateway_cpu() - cpu_before
            machine_after = machine_busy_seconds()
            db_cpu = (database_cpu() - db_before) if database_cpu else 0.0
            peak_kib = max(_peak_rss_kib(s.pid) for s in servers)
        finally:
            for s in servers:
                s.terminate()
            for s in servers:
                s.wait(timeout=20)
        floor_latencies: list[float] = []
        floor = _floor(connect, base, ledger, work / "floor-after", per_agent, floor_latencies)
        if floor_first < floor:
            floor, floor_latencies = floor_first, floor_before
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
        "database_cpu_ms": db_cpu * 1000 / total,
        "lock_wait_share": waits.share if waits else 0.0,
        # The share of all cores busy (anything on the machine, ours or not).
        "machine_busy": (machine_after[0] - machine_before[0])
        / (machine_after[1] - machine_before[1]),
    }


def _floor(
    connect: Callable[[str], _Connection],
    base: str,
    ledger: str | None,
    work: Path,
    per_agent: int,
    latencies: list[float],
) -> float:
    """The same number of raw GETs from 16 threads, each followed by one durable commit:
    serialised on SQLite (one writer, as the ledger), concurrent on PostgreSQL (one
    connection per thread; the ledger's writes run at once there too)."""
    lock = threading.Lock()
    commit_lock = threading.Lock() if ledger is None else contextlib.nullcontext()
    opened: list[_Commits] = []
    if ledger is None:
        shared = DurableCommits(private_dir(work / "floor") / "floor.sqlite3")
        opened.append(shared)
    else:
        opened.extend(PostgresCommits(ledger) for _ in range(AGENTS))

    def raw(i: int) -> None:
        db = opened[0] if ledger is None else opened[i]
        conn = connect(base)
        try:
            for _ in range(per_agent):
                t = time.perf_counter()
                status, _ = conn.send("GET", f"/records/rec-{i}", None, {})
                if status != 200:
                    raise RuntimeError(f"the floor's GET answered {status}")
                with commit_lock:
                    db.commit()
                elapsed = time.perf_counter() - t
                with lock:
                    latencies.append(elapsed)
        finally:
            conn.close()

    try:
        return _run_threads([partial(raw, i) for i in range(AGENTS)])
    finally:
        for db in opened:
            db.close()
