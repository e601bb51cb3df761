"""What bounds each throughput figure, said from the run's own numbers (bench/run.py
writes it under the table)."""

from __future__ import annotations

import statistics

#: What was done to cut CPU per prepare, and what was tried and not kept (with what it
#: measured); kept here so the results say it next to the figures.
#: Found this round and not fixed on this branch (``cli/serve.py`` belonged to another
#: change): measured with a patched serve, outside ``make bench``. Re-run ``make bench``
#: once the fix lands, and drop this paragraph.
NAGLE = (
    "**Found: every response of `undogate serve` waits about 40 ms.** `serve` binds its "
    "listening socket itself (`cli/serve.py`, `listen`) as `socket(family, "
    "SOCK_STREAM)`, with protocol 0; asyncio sets `TCP_NODELAY` only on connections "
    "whose socket says `IPPROTO_TCP`, so every reply waits for Nagle's algorithm and the "
    "client's delayed ACK: one agent alone sees 44 ms per prepare (and per `GET "
    "/healthz`) where the prepare itself takes 2.5 ms. With that socket made with "
    "`IPPROTO_TCP` (the same run's method, 3 runs, this machine): SQLite 615 prepares/s, "
    "0.26× its floor, p50 / p99 24.5 / 75.2 ms, the gateway at 104% of a core, so CPU "
    "bound; PostgreSQL 306 prepares/s, 0.09×, with 97% of the sessions' busy time "
    "waiting for the owner's quota lock. The figures above are `serve` as it is."
)

HISTORY = (
    "Cut by profiling (py-spy, sampling the thread that held the interpreter lock, under "
    "this load): the quota and ledger-limit pre-checks share one read (CPU per prepare "
    "under 16 agents 1.74 → 1.47 ms on SQLite, 2.42 → 2.33 ms on PostgreSQL, medians of "
    "interleaved runs); a resource's fingerprint and a peer's address are computed once, "
    "not on every prepare (1.70 → 1.63 ms on SQLite). The contract server listens with a "
    "backlog of 128 instead of 5: 16 clients connecting at once lost a second to a "
    "dropped SYN, and the floor swung between 500 and 2,000 ops/s with it. What the "
    "profile shows beyond that: on SQLite the remote read (httpcore and h11, about half "
    "of the interpreter's time) and the agent-facing request; on PostgreSQL psycopg's "
    "per-statement work, a liveness round trip before every pooled transaction, and the "
    "owner's quota lock and the ledger-wide counter rows held to each commit (the lock "
    "waits above). Earlier: keys verified once skip the ledger and a thread hop; remote "
    "requests go straight to httpcore; a record's canonical size is computed only when "
    "its body is over the limit. Tried and not kept: group commit (no gain while the "
    "process is CPU-bound), uvloop, a smaller worker pool (about +15%, but one slow "
    "remote would stall every agent)."
)


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def throughput_bounds(
    runs: dict[str, list[dict[str, float]]], skipped: dict[str, str]
) -> list[str]:
    """One paragraph per configuration that ran, then what was done and tried."""
    every = [r for done in runs.values() for r in done]
    lines = [
        NAGLE,
        "",
        "Bounded by: the 40 ms above, first (the gateway idles between replies); then CPU, "
        "on 2 cores shared by everything in the run (the agents, the gateway, the contract "
        "server, PostgreSQL) and by whatever else ran on the machine: during the "
        "concurrent runs all its cores were "
        f"{_median(every, 'machine_busy') * 100:.0f}% busy (median; "
        f"{min(r['machine_busy'] for r in every) * 100:.0f}–"
        f"{max(r['machine_busy'] for r in every) * 100:.0f}%).",
        "",
    ]
    sqlite = runs.get("SQLite, 1 process") or []
    if sqlite:
        lines.append(
            f"- SQLite, 1 process: `undogate serve` is one Python process; it kept "
            f"{_median(sqlite, 'server_busy') * 100:.0f}% of a core busy at "
            f"{_median(sqlite, 'server_cpu_ms'):.2f} ms of CPU per prepare "
            f"({_median(sqlite, 'server_cpu_alone_ms'):.2f} ms for one agent alone): the "
            "agent's request in and the reply out (uvicorn, Starlette), the remote read "
            "(httpcore and h11, pure Python), the lossless parse and plan, and one fsync'd "
            "commit of four rows. "
            + (
                "The difference under 16 agents is threads contending for one interpreter lock. "
                if _median(sqlite, "server_cpu_ms") > _median(sqlite, "server_cpu_alone_ms")
                else ""
            )
            + "Reaching 0.5× would need a prepare under about "
            f"{2000 / _median(sqlite, 'floor_throughput'):.2f} ms of gateway CPU (a whole core "
            "making half the floor's rate), and a core of its own."
        )
    single = runs.get("PostgreSQL, 1 process") or []
    if single:
        lines.append(
            f"- PostgreSQL, 1 process: {_median(single, 'server_cpu_ms'):.2f} ms of gateway "
            f"CPU per prepare ({_median(single, 'server_cpu_alone_ms'):.2f} alone), "
            f"{_median(single, 'server_busy') * 100:.0f}% of a core, plus "
            f"{_median(single, 'database_cpu_ms'):.2f} ms of PostgreSQL's own CPU per "
            "prepare on the same cores. Each answer the ledger waits for is a round trip "
            "through psycopg (send, wait, parse the reply) where SQLite is a library call; "
            "so one process does less per core than on SQLite, while its floor commits "
            "concurrently. The 16 agents share one owner, and a prepare holds that owner's "
            "quota lock from its count to its commit (fsync included; the job's rows are "
            "written before it): "
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
