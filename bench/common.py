"""Shared pieces for the benchmarks: timing statistics, servers, the floors' durable
commits (SQLite and PostgreSQL), a durable PostgreSQL cluster, CPU time of processes."""

from __future__ import annotations

import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
from tests.postgres import PostgresCluster, start_cluster

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


class PostgresCommits:
    """The floor's ledger on PostgreSQL: one committed one-row INSERT per call, on a
    connection of its own (``synchronous_commit`` on, the default, as on the ledger's).
    Its table is in a schema of its own: the ledger's database may hold nothing else."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute("CREATE SCHEMA IF NOT EXISTS bench_floor")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_floor.t (id BIGSERIAL PRIMARY KEY, v TEXT)"
        )

    def commit(self, value: str = "x") -> None:
        with self.conn.transaction():
            self.conn.execute("INSERT INTO bench_floor.t(v) VALUES (%s)", (value,))

    def close(self) -> None:
        self.conn.close()


@contextmanager
def durable_postgres() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL cluster with fsync on (tests/postgres.py; the tests' own
    runs without fsync), stopped after."""
    cluster = start_cluster(durable=True)
    try:
        yield cluster
    finally:
        cluster.stop()


class LockWaits:
    """What the ledger's PostgreSQL sessions wait on, sampled every few milliseconds
    from a connection of its own while the ``with`` block runs: ``share`` is the part of
    the busy sessions' samples spent waiting for a lock (advisory or row), the rest is
    work, I/O (the WAL's fsync) or waiting for the client."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.busy = 0
        self.waiting = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> LockWaits:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    @property
    def share(self) -> float:
        return self.waiting / self.busy if self.busy else 0.0

    def _sample(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.is_set():
                for (wait,) in conn.execute(
                    "SELECT wait_event_type FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND backend_type = 'client backend' AND state = 'active'"
                ).fetchall():
                    self.busy += 1
                    self.waiting += wait == "Lock"
                self._stop.wait(0.005)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, over every core."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields) - idle) / tick, sum(fields) / tick


def cluster_cpu_seconds(cluster: PostgresCluster) -> float:
    """CPU time of a PostgreSQL cluster so far: the postmaster, its live children, and
    the children it has reaped."""
    postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        pid = int(stat.parent.name)
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15]) / tick  # its own and reaped children's
        elif int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path
