"""Running ``undogate`` as a real process: the CLI, ``serve`` on a free port until it
is healthy, and what it wrote on stderr. Each is forked by the kit's launcher
(``undogate.testing.launcher``), which has imported undogate once, or started as a plain
subprocess where it cannot be."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx
from prometheus_client.parser import text_string_to_metric_families

from undogate.testing.launcher import Child, popen, run

from .processes import stop

SERVED_PATH = "/records/customer-123"
SERVED_COPY_PATH = "/records/customer-copy"  # a test copy of it, for the endpoint check
SERVE = (sys.executable, "-m", "undogate.cli", "serve")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "undogate.cli", *args], env=env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: Child, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited early: {proc.stderr.read() if proc.stderr else ''}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # poll interval of a bounded loop, not a fixed wait
    raise AssertionError("serve did not become healthy in time")


@contextmanager
def serving(config: Path, env: dict[str, str], *extra: str) -> Iterator[tuple[str, Child]]:
    """``undogate serve`` (with ``extra`` options) as a process on a free port, healthy
    before it is yielded;
    stopped with SIGTERM (then SIGKILL) after. Once healthy its stderr is drained by a
    thread (serve logs every refusal: a full pipe must never stall it); read what it
    said with ``serve_log(proc)``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = popen(
        [*SERVE, "--config", str(config), "--port", str(port), *extra],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(url, proc)
        assert proc.stderr is not None
        _SERVE_LOGS[proc.pid] = _Drained(proc.stderr)
        yield url, proc
    finally:
        stop(proc)
        drained = _SERVE_LOGS.pop(proc.pid, None)
        if drained:
            drained.thread.join(timeout=5)
        if proc.stderr:
            proc.stderr.close()


class _Drained:
    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self.thread.start()

    def _drain(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self.lines.append(line)
        except ValueError:  # closed under us at teardown
            pass


_SERVE_LOGS: dict[int, _Drained] = {}


def serve_log(proc: Child) -> str:
    """What a ``serving`` server wrote on stderr since it was healthy; after it has
    exited, everything it wrote."""
    drained = _SERVE_LOGS[proc.pid]
    if proc.poll() is not None:
        drained.thread.join(timeout=5)
    return "".join(drained.lines)


@contextmanager
def served_gateway(config: Path, env: dict[str, str]) -> Iterator[str]:
    """``undogate serve`` as a subprocess (needs ``/mcp`` mounted by ``serve``)."""
    with serving(config, env) as (url, _):
        yield url


#: A scrape of ``GET /metrics``: each sample's value by its name and labels.
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of a scrape, parsed by prometheus_client's own parser."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when the scrape has none: a counter not moved yet)."""
    return found.get((name, frozenset(labels.items())), 0.0)


def base_env() -> dict[str, str]:
    """This process's environment without undogate's own variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith("UNDOGATE_")}
