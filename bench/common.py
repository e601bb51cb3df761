"""Shared pieces for the benchmarks: timing statistics, servers, fsync'd commits."""

from __future__ import annotations

import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

# The benchmarks measure the gateway's own costs: an agent's fair share (docs/limits.md)
# must not be what bounds them.
UNTHROTTLED = {
    "max_unresolved_jobs_per_agent": 1_000_000,
    "max_unresolved_jobs_per_owner": 1_000_000,
    "max_prepares_per_minute": 1_000_000,
    "prepare_burst": 1_000_000,
}


@dataclass(frozen=True)
class Stat:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Stat:
        return cls(statistics.median(values), min(values), max(values))

    def fmt(self, unit: str = "ms", scale: float = 1000.0) -> str:
        return (
            f"{self.median * scale:.2f} {unit} "
            f"(min {self.low * scale:.2f}, max {self.high * scale:.2f})"
        )


def paired_ratio(measured: list[float], floor: list[float]) -> Stat:
    """Ratios of samples taken side by side (interleaved): the median and the
    interquartile range (p25, p75) of the per-pair ratios."""
    ratios = sorted(m / f for m, f in zip(measured, floor, strict=True))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return Stat(statistics.median(ratios), q[0], q[2])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def contract_server(data_dir: Path) -> Iterator[str]:
    """``undogate contract-server`` in its own process (no GIL shared with the gateway)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "undogate.cli",
            "contract-server",
            "--data",
            str(data_dir),
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(base + "/records/none", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class DurableCommits:
    """The floor's ledger: fsync'd SQLite commits with the ledger's own settings."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")

    def commit(self, value: str = "x") -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO t(v) VALUES (?)", (value,))
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path
