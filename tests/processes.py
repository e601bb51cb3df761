"""Stopping a server the tests started: SIGTERM, a bounded wait, then SIGKILL."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def stop(proc: subprocess.Popen[Any], grace_s: float = 15.0) -> None:
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
