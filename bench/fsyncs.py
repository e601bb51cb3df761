"""Figure 4: fsyncs per applied action, counted with ``strace -c``, vs the minimum of 2."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from .common import contract_server, private_dir

SYSCALLS = ("fsync", "fdatasync")


def _count(base: str, work: Path, name: str, jobs: int, mode: str) -> int:
    out = work / f"{name}.strace"
    subprocess.run(
        [
            "strace",
            "-f",
            "-c",
            "-e",
            "trace=" + ",".join(SYSCALLS),
            "-o",
            str(out),
            sys.executable,
            "-m",
            "bench.fsync_worker",
            base,
            str(private_dir(work / name)),
            str(jobs),
            mode,
        ],
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    total = 0
    for line in out.read_text().splitlines():
        parts = line.split()
        # % time, seconds, usecs/call, calls, [errors], syscall
        if len(parts) >= 5 and parts[-1] in SYSCALLS and re.fullmatch(r"\d+", parts[3]):
            total += int(parts[3])
    return total


def run(work: Path, jobs: int = 40) -> dict[str, float] | None:
    if shutil.which("strace") is None:
        return None
    data = work / "contract"
    with contract_server(data) as base:
        setup = _count(base, work, "setup", jobs, "setup")
        full = _count(base, work, "confirm", jobs, "confirm")
    return {
        "jobs": float(jobs),
        "fsyncs_setup": float(setup),
        "fsyncs_with_confirm": float(full),
        "per_action": (full - setup) / jobs,
    }
