"""Figures 2 and 5: prepare throughput of a running ``undogate serve`` under 16
concurrent agents, vs raw GETs plus one fsync'd commit each; and the server's peak RSS.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import yaml

from undogate.auth import Keyring
from undogate.ledger import Ledger

from .common import DurableCommits, contract_server, free_port, private_dir

AGENTS = 16


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
                "limits": {"max_jobs": 1_000_000},
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


def _run_threads(work_fn: list[object]) -> float:
    threads = [threading.Thread(target=fn) for fn in work_fn]  # type: ignore[arg-type]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def run(work: Path, per_agent: int = 40) -> dict[str, float]:
    data = work / "contract"
    _seed(data)
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
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(gateway + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("undogate serve did not start")
                time.sleep(0.05)
            latencies: list[float] = []
            lock = threading.Lock()
            errors: list[str] = []

            def agent(i: int) -> None:
                with httpx.Client(
                    base_url=gateway, headers={"Authorization": f"Bearer {tokens[i]}"}, timeout=30
                ) as client:
                    for n in range(per_agent):
                        body = {
                            "summary": f"bench {n}",
                            "changes": [{"resource": f"rec-{i}", "set": {"status": f"v{n}"}}],
                        }
                        t = time.perf_counter()
                        r = client.post("/api/v1/jobs", json=body)
                        elapsed = time.perf_counter() - t
                        with lock:
                            latencies.append(elapsed)
                            if r.status_code != 201:
                                errors.append(f"{r.status_code} {r.text[:200]}")

            measured = _run_threads([lambda i=i: agent(i) for i in range(AGENTS)])
            if errors:
                raise RuntimeError(f"prepare failed: {errors[:3]}")
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
            with httpx.Client(base_url=base, timeout=30, trust_env=False) as client:
                for _ in range(per_agent):
                    t = time.perf_counter()
                    client.get(f"/records/rec-{i}").raise_for_status()
                    with commit_lock:
                        floor_db.commit()
                    elapsed = time.perf_counter() - t
                    with lock:
                        floor_latencies.append(elapsed)

        try:
            floor = _run_threads([lambda i=i: raw(i) for i in range(AGENTS)])
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
    }
