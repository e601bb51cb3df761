"""What bounds each throughput figure, said from the run's own numbers (bench/run.py
writes it under the table)."""

from __future__ import annotations

import statistics

#: What was done to cut CPU per prepare, and what was tried and not kept (with what it
#: measured); kept here so the results say it next to the figures.
HISTORY = (
    "Already done: keys verified once skip the ledger and a thread hop; remote requests "
    "go straight to httpcore; a record's canonical size is computed only when its body "
    "is over the limit. Tried and not kept: group commit (no gain while the process is "
    "CPU-bound), uvloop, a smaller worker pool (about +15%, but one slow remote would "
    "stall every agent)."
)


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def throughput_bounds(
    runs: dict[str, list[dict[str, float]]], skipped: dict[str, str]
) -> list[str]:
    """One paragraph per configuration that ran, then what was done and tried."""
    lines = ["Bounded by: CPU, on 2 cores shared by everything in the run.", ""]
    sqlite = runs.get("SQLite, 1 process") or []
    if sqlite:
        lines.append(
            f"- SQLite, 1 process: `undogate serve` is one Python process; it kept "
            f"{_median(sqlite, 'server_busy') * 100:.0f}% of a core busy at "
            f"{_median(sqlite, 'server_cpu_ms'):.2f} ms of CPU per prepare "
            f"({_median(sqlite, 'server_cpu_alone_ms'):.2f} ms for one agent alone): the "
            "agent's request in and the reply out (uvicorn, Starlette), the remote read "
            "(httpcore and h11, pure Python), the lossless parse and plan, and one fsync'd "
            "commit of four rows. The difference under 16 agents is threads contending for "
            "one interpreter lock. Reaching 0.5× would need a prepare under about "
            f"{2000 / _median(sqlite, 'floor_throughput'):.2f} ms of gateway CPU."
        )
    single = runs.get("PostgreSQL, 1 process") or []
    if single:
        lines.append(
            f"- PostgreSQL, 1 process: {_median(single, 'server_cpu_ms'):.2f} ms of gateway "
            f"CPU per prepare ({_median(single, 'server_cpu_alone_ms'):.2f} alone), "
            f"{_median(single, 'server_busy') * 100:.0f}% of a core, plus "
            f"{_median(single, 'database_cpu_ms'):.2f} ms of PostgreSQL's own CPU per "
            "prepare on the same cores. Each statement is a round trip through psycopg "
            "(send, wait, parse the reply) where SQLite is a library call, and each "
            "transaction first checks its pooled connection with one more; so one process "
            "does less per core than on SQLite, while its floor commits concurrently. The "
            "16 agents share one owner, and a prepare holds that owner's quota lock from "
            "its count to its commit (fsync included): "
            f"{_median(single, 'lock_wait_share') * 100:.0f}% of the database sessions' "
            "busy time was spent waiting for it. Prepares of one owner run one at a time."
        )
    double = runs.get("PostgreSQL, 2 processes") or []
    if double:
        total = _median(double, "server_cpu_ms") + _median(double, "database_cpu_ms")
        lines.append(
            f"- PostgreSQL, 2 processes: two interpreters, so no one lock caps the gateway "
            f"at one core: together {_median(double, 'server_busy') * 100:.0f}% of a core "
            f"at {_median(double, 'server_cpu_ms'):.2f} ms per prepare, and PostgreSQL "
            f"{_median(double, 'database_cpu_ms'):.2f} ms; sessions waited for a lock "
            f"{_median(double, 'lock_wait_share') * 100:.0f}% of their busy time (the one "
            f"owner's quota lock serialises them across processes too). At {total:.2f} ms "
            "of gateway "
            f"and database CPU per prepare, 2 cores allow at most {2000 / total:.0f} "
            "prepares a second before the contract server and the 16 agents take their "
            "share; more cores (or machines) is what the second process is for."
        )
    elif "PostgreSQL, 2 processes" in skipped:
        lines.append(
            "- PostgreSQL, 2 processes: not measured: the second `serve` was refused the "
            "ledger (it has one owner until processes hold leases); the benchmark runs it "
            "as soon as two plain `serve` processes may share one database."
        )
    return [*lines, "", HISTORY]
