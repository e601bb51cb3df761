"""What bounds each throughput figure, said from the run's own numbers (bench/run.py
writes it under the table)."""

from __future__ import annotations

import statistics

#: A finding of this round, fixed in ``cli/serve.py``: kept so the results say what the
#: earlier figures measured.
NAGLE = (
    "**Found and fixed this round: every response of `undogate serve` waited about 40 "
    "ms.** `serve` bound its listening socket itself (`cli/serve.py`, `listen`) as "
    "`socket(family, SOCK_STREAM)`, with protocol 0; asyncio sets `TCP_NODELAY` only on "
    "connections whose socket says `IPPROTO_TCP`, so every reply waited for Nagle's "
    "algorithm and the client's delayed ACK: one agent alone saw 44 ms per prepare (and "
    "per `GET /healthz`) where the prepare itself took 2.5 ms. After the fix (the socket "
    "made with `IPPROTO_TCP`), one agent alone sees 1.7 ms per prepare on SQLite and "
    "3.2 ms on PostgreSQL (p50 of 100 prepares in sequence, this machine)."
)

#: What was done to cut CPU per prepare, and what was tried and not kept (with what it
#: measured); kept here so the results say it next to the figures.
HISTORY = (
    "Cut on PostgreSQL this round (interleaved runs on this shared machine; 16 agents of "
    "one owner, one process unless said): a prepare writes its job's rows first and "
    "takes the owner's quota lock and the ledger-wide counter rows last, 206–249 → "
    "295–323 prepares/s; the statements of a transaction are pipelined (a round trip "
    "per answer read, not per statement), the sessions' time waiting for a lock 96% → "
    "75%; the lock, both quota counts and the counter update go out in one round trip, "
    "so the owner's lock is held for two round trips (that one and the commit) instead "
    "of four: 315–360/s, ratio 0.10–0.13 (0.07–0.10 at the start), lock waits 57% (97% "
    "at the start); two processes 238–243 → 352–358/s, 0.08–0.09 → 0.14–0.15. The quotas "
    "stay exact across processes (a test races two gateways on one database). For the "
    "confirm: no liveness round trip before each pooled transaction (a connection found "
    "dead at its BEGIN is replaced there, before anything of the transaction was sent; "
    "nothing later is retried), the BEGIN rides with the first statement, the job-row "
    "check locks in one statement, one statement for the overlap reads, counters return "
    "their new value, one read for a preview and its attempt count, stored field lists "
    "parsed once: per bench trial 473 → 367 round trips, per 8-change confirm 143 → 111 "
    "statements; confirm / floor 1.34–1.39× → 1.32× (medians of two sets of six runs of "
    "15 trials, interleaved trial by trial; 49–54 → 47–49 ms), short of 1.3×: the "
    "ledger's part of a confirm is mostly its 16 durable write transactions, about 1.1 ms "
    "each against the floor's 0.5 ms one-row commit (the server's work on the rows, "
    "indexes and append-only triggers), not the round trips. What bounds PostgreSQL "
    "now: one owner's prepares still run one at a time (its lock is held through the "
    "commit's fsync, and in a process of 16 busy threads each round trip also waits "
    "for the interpreter "
    "lock): one agent alone prepares in 3.2 ms (about 310 a second), and 16 agents of "
    "one owner make hardly more; several owners' agents would run side by side. Not tried: "
    "counters without a hot row (delta rows summed, or counted from an index): here every "
    "prepare already waits for its owner's lock, taken just before the counter rows, so "
    "they hold up no one who was not waiting already; with many owners they would. "
    "Earlier, on both engines (py-spy, sampling the thread that held the interpreter "
    "lock): the quota and ledger-limit pre-checks share one read (CPU per prepare under "
    "16 agents 1.74 → 1.47 ms on SQLite, 2.42 → 2.33 ms on PostgreSQL); a resource's "
    "fingerprint and a peer's address are computed once, not on every prepare (1.70 → "
    "1.63 ms on SQLite); the contract server listens with a backlog of 128 instead of 5 "
    "(16 clients connecting at once lost a second to a dropped SYN, and the floor swung "
    "between 500 and 2,000 ops/s with it); keys verified once skip the ledger and a "
    "thread hop; remote requests go straight to httpcore; a record's canonical size is "
    "computed only when its body is over the limit. What the profile shows on SQLite: the "
    "remote read (httpcore and h11, about half of the interpreter's time) and the "
    "agent-facing request. Tried and not kept: group commit (no gain while the process is "
    "CPU-bound), uvloop, a smaller worker pool (about +15%, but one slow remote would "
    "stall every agent)."
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
        "Bounded by: CPU, on 2 cores shared by everything in the run (the agents, the "
        "gateway, the contract server, PostgreSQL) and by whatever else ran on the "
        "machine: during the "
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
