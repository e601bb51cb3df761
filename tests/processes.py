"""Servers the tests start as processes: started detached from the test's terminal, waited
for with a bounded poll, stopped as an operator would (SIGTERM, a bounded wait, SIGKILL)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

from undogate.testing.launcher import Child, popen


def start(command: list[str], cwd: Path, log: Path, env: Mapping[str, str] | None = None) -> Child:
    """Start ``command`` in ``cwd`` with no stdin, its output in ``log``, in its own session
    (so a terminal's signals reach the test runner only); undogate's own commands are
    forked by the launcher (``undogate.testing.launcher``)."""
    with log.open("wb") as out:
        return popen(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )


def wait_http(
    url: str,
    proc: Child,
    log: Path,
    timeout_s: float,
    ready: Callable[[httpx.Response], bool] = lambda response: response.status_code < 500,
) -> None:
    """Poll ``url`` until ``ready`` holds for its answer.

    Raises:
        RuntimeError: the process exited first, or nothing ready answered within
            ``timeout_s`` (the server's log is included).
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited before it answered:\n{log.read_text()}")
        with contextlib.suppress(httpx.TransportError):
            if ready(httpx.get(url, trust_env=False, timeout=1.0)):
                return
        time.sleep(0.05)  # poll interval of a bounded loop, not a fixed wait
    raise RuntimeError(f"{url}: no answer within {timeout_s}s:\n{log.read_text()}")


def stop(proc: Child, grace_s: float = 15.0) -> None:
    """Ask ``proc`` to stop as an operator would (SIGTERM); kill it if it has not
    within ``grace_s``. A process that already ended is left as it is."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
