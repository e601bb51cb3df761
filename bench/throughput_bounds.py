"""What bounds each throughput figure, said from the run's own numbers (bench/run.py
writes it under the table)."""

from __future__ import annotations

import os
import statistics

#: A finding of an earlier round, fixed in ``cli/serve.py``: kept so the results say what
#: the figures before it measured.
NAGLE = (
    "**Found and fixed in an earlier round: every response of `undogate serve` waited about 40 "
    "ms.** `serve` bound its listening socket itself (`cli/serve.py`, `listen`) as "
    "`socket(family, SOCK_STREAM)`, with protocol 0; asyncio sets `TCP_NODELAY` only on "
    "connections whose socket says `IPPROTO_TCP`, so every reply waited for Nagle's "
    "algorithm and the client's delayed ACK: one agent alone saw 44 ms per prepare (and "
    "per `GET /healthz`) where the prepare itself took 2.5 ms. After the fix (the socket "
    "made with `IPPROTO_TCP`), one agent alone sees 1.7 ms per prepare on SQLite and "
    "3.2 ms on PostgreSQL (p50 of 100 prepares in sequence, this machine)."
)

#: What the last round found and cut (measured on this shared machine: interleaved runs,
#: CPU time where other work ran; each commit's message has the figures).
THIS_ROUND = (
    "**This round.** Gateway CPU per prepare, one agent alone on SQLite, measured on "
    "this machine for both commits (serve's CPU over 300 prepares, 3 runs of each, "
    "interleaved): 1.50 ms at 68ae260 (the bench of 2026-12-02), 1.85 ms at d2fa28f. The "
    "difference, sampled with py-spy on the thread holding the interpreter's lock "
    "(1,500 prepares each): authentication 3% -> 11% of the samples (a key is no longer "
    "remembered by a process: every request reads its credential, checks its seal "
    "against the chain and takes a thread hop of its own for that, so that a key revoked "
    "through any process is refused by all), the metrics (prometheus_client counters "
    "and histograms, about 4%), and a second thread hop's anyio bookkeeping per request "
    "(about 3%); the prepare itself costs what it did. Those are guarantees or features, "
    "not waste: what remains to cut is the authentication's own thread hop (running it in "
    "the prepare's hop would save about 60 µs of CPU), which is the API's and not done "
    "here. "
    "SQLite, 2 processes: a write waited for SQLite's write lock in its busy handler, "
    "which sleeps 1, 2, 5 ... 100 ms between tries: a waiter overslept the other's "
    "commit and could lose every try, up to 730 ms (p99 of prepares 260-760 ms). Writers "
    "now queue for `ledger.write.lock` in the kernel (flock, taken before BEGIN IMMEDIATE "
    "and given back after the commit, bounded by the busy wait): the longest wait 10-18 "
    "ms, prepare p99 80-105 ms, 325/329 -> 374/393 prepares/s. "
    "PostgreSQL: what each prepare waited on, sampled from pg_stat_activity and "
    "pg_locks with 16 agents: of one owner, its quota lock 72%; of four owners, their "
    "four locks 47% and the counter rows 27% (a row lock every prepare of every owner "
    "took after its owner's count, held across two more round trips to the commit). "
    "Every write already holds the hash chain's lock from reading the chain's head to "
    "its commit; a prepare now counts its quotas and updates the counters there, in the "
    "round trip that reads the head, and takes no other lock for them: the chain's lock "
    "is then the one queue, 74% of the sessions' time with one owner and 76% with four "
    "(the prepares a second moved within this saturated machine's noise: 169/231 -> "
    "139/242 for one owner in two interleaved pairs). The quotas and limits stay exact "
    "(the race tests of two gateways: agent quota, owner quota, max_jobs, four owners "
    "against max_jobs)."
)

#: The PostgreSQL confirm (section 1): where its write transactions' time went, what was
#: cut, and what bounds it now.
CONFIRM_PG = (
    "**PostgreSQL confirm, this round.** The round before took 16 of its 35 ledger "
    "transactions away (reads of the endpoint check's stale statuses and of whether an "
    "undo is offered, now read only for the answers and kinds that need them): 19 "
    "transactions, psycopg's waits 295 -> 215 per confirm. Where the rest went "
    "(durable cluster, interleaved, medians): a floor commit is 0.35-0.45 ms (three round "
    "trips and the WAL's fsync, about 0.3 ms of it), and the store's own machinery "
    "around a one-row write adds 0.03 ms; a round trip on loopback is 0.02 ms. The "
    "ledger's part of a confirm was about 18 ms against the floor's 6: 3 reads (2.8 ms) "
    "and 16 writes (an intent, 4 statements, 0.63 ms; an outcome, 6, 0.9 ms; the first "
    "intent 2.2 ms and the last outcome 1.9 ms). The server's statement log puts 11.6 ms "
    "of it in PostgreSQL (the commits' fsync 4.5, planning the statements at bind 2.5, "
    "parsing 0.9, executing 3.7: the event insert, with its five indexes and two "
    "triggers, the dearest at 0.05-0.08 ms) and the rest in the gateway (psycopg in "
    "pipeline mode, about 0.025 ms of CPU per statement and 0.08 ms per transaction). "
    "An event cost its write 0.25 ms over a plain row: the chain's lock 0.03, the head "
    "read in a round trip of its own and the link hashed in Python 0.06, the triggers "
    "0.035, the extra indexes 0.03. Cut: each event's insert reads the head itself and "
    "PostgreSQL hashes the link (sha256 over chain.link_around's bytes, byte for byte "
    "what row_hash computes; tests hold both engines to the encoding), so the lock, the "
    "inserts and the commit leave together (a write of one event 0.59 -> 0.53 ms); the "
    "whole-preview overlap check reads every target in one statement instead of one "
    "statement and round trip each (8); whether the agent is stopped rides in the read "
    "of the preview. Per confirm 108 -> 92 statements, 19 -> 18 transactions, psycopg's "
    "waits 215 -> 186; confirm / floor 1.31 -> 1.26, 1.37 -> 1.32 and 1.36 -> 1.30 in three sets "
    "of 12, 10 and 8 interleaved runs of 15 trials (each run's own cluster, at "
    "real-time priority, because busy loops that something else left running held this "
    "machine's cores meanwhile; the floor 26-28 ms in the first two sets, 36-38 in the "
    "third): the same cut each time, and 1.3 inside one run's spread (1.18-1.38). Kept: intent "
    "before and outcome after, each its own durable commit, `synchronous_commit` on, no "
    "statement retried. Tried "
    "and not kept: preparing every statement at its first use (psycopg waits for the "
    "fifth): the bench's median trial already runs prepared statements, no difference. "
    "What bounds it now: per write, its statements' planning and execution on the "
    "server and psycopg's CPU per statement (an intent checks the job, its resource's "
    "holders and inserts the action; an outcome settles the action, stamps the change, "
    "takes the chain's lock and inserts the event, and waits once for its own "
    "still-in-flight answer before the commit); each is needed for a guarantee, and "
    "the two round trips per write are the fewest a write that checks before it "
    "commits can pay."
)

#: What bounds each engine now, beyond the table's own figures.
BOUNDS_NOW = (
    "What bounds each now. SQLite, one process: the gateway's CPU (one interpreter), "
    "about 1.9 ms per prepare alone and more under 16 agents; the rate per core above is "
    "what carries over. SQLite, two processes: CPU of this 2-core machine, shared by the "
    "16 agents, the contract server and both gateways; the write lock is handed from "
    "process to process in the kernel and no longer starves one. PostgreSQL, one owner "
    "or several: the hash chain's lock, "
    "which every write holds from its chained inserts to its commit (one chain per "
    "ledger, docs/proof.md), the quotas' counts and the counters' update included: two "
    "round trips and an fsync per prepare, ledger-wide, whatever the owners; no design "
    "that keeps one chain with each event's link written in the transaction that "
    "records it moves that, short of taking the fsync out of the lock (group commit on "
    "the server side: the commit's fsync is most of it). A second process adds the "
    "gateway CPU the chain's lock does not bound."
)

#: Where a prepare's CPU goes (py-spy, measured once and dated: it is not re-sampled by
#: every run, since py-spy is no dependency of the project).
PREPARE_PROFILE = (
    "**Where a prepare's CPU goes** (2026-12-03, main at fcf5faa; py-spy sampling the "
    "thread that held the interpreter's lock, 200 a second for 8 s, `undogate serve` on "
    "SQLite, one process, under the 16 agents: 2.9 ms of CPU per prepare, 1.9 alone). By "
    "the module of the innermost frame: undogate's own code 22% (spread thin: the "
    "lossless JSON encoder 2.5%, the routes 2.2%, the prepare 2.1%, digests 0.9%, no "
    "frame over 2.5%), handing work to and from the worker threads 21% (anyio's "
    "to_thread, `threading.Condition.notify` alone 9.7%: 16 busy threads trading one "
    "interpreter lock), the remote read 17% (httpcore and h11), asyncio's loop 12%, the "
    "ledger 10% (sqlite3 calls, the chain's hash, the write turn), the metrics 10% "
    "(prometheus_client's locks), the agent-facing HTTP 5.5% (uvicorn on httptools, "
    "Starlette), JSON 2%. No part is the bottleneck a design could remove: with the "
    "ledger and the metrics free, a prepare would still cost about 2.3 ms of CPU under "
    "16 agents, and what is left is one HTTP request served and one made, in Python, "
    "on a thread of a pool."
)

#: What was done to cut CPU per prepare, and what was tried and not kept (with what it
#: measured, on the machine of its day); kept here so the results say it next to the
#: figures.
HISTORY = (
    "Earlier rounds cut, on PostgreSQL (interleaved runs on this shared machine; 16 agents of "
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
    "one owner make hardly more; several owners' agents would run side by side. Left "
    "then: the counter rows (every prepare waited for its owner's lock first, so they held "
    "up no one who was not waiting already; with many owners they did, and this round "
    "moved them under the chain's lock). "
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


def _configuration(name: str, done: list[dict[str, float]]) -> str:
    """What one configuration cost per prepare, and the rate a core of its own would make."""
    gateway = _median(done, "server_cpu_ms")
    database = _median(done, "database_cpu_ms")
    said = (
        f"- {name}: {gateway:.2f} ms of gateway CPU per prepare "
        f"({_median(done, 'server_cpu_alone_ms'):.2f} ms for one agent alone), the gateway "
        f"{_median(done, 'server_busy') * 100:.0f}% of a core busy"
    )
    if database:
        said += (
            f"; PostgreSQL {database:.2f} ms of its own CPU per prepare, its sessions "
            f"waiting for a lock {_median(done, 'lock_wait_share') * 100:.0f}% of their "
            "busy time"
        )
    return said + (
        f". Per core of gateway{' and database' if database else ''} CPU: about "
        f"{1000 / (gateway + database):.0f} prepares a second."
    )


def _owners(runs: dict[str, list[dict[str, float]]]) -> list[str]:
    """Four owners against one, wherever both ran: what one owner's quota lock costs."""
    lines = []
    for name, done in runs.items():
        four = runs.get(f"{name}, 4 owners") or []
        if name.endswith("owners") or not done or not four:
            continue
        lines.append(
            f"- {name}: 16 agents of one owner {_median(done, 'throughput'):.0f} prepares/s, "
            f"of four owners {_median(four, 'throughput'):.0f}/s."
        )
    return lines


def _half_floor(runs: dict[str, list[dict[str, float]]]) -> list[str]:
    """What the target (half the floor) would take in the best configuration: the
    gateway CPU alone, in cores, at the CPU per prepare this run measured."""
    done = {name: r for name, r in runs.items() if r}
    if not done:
        return []
    best = max(done, key=lambda name: _median(done[name], "ratio"))
    wanted = 0.5 * _median(done[best], "floor_throughput")
    cores = wanted * _median(done[best], "server_cpu_ms") / 1000
    return [
        f"Half the floor in the best configuration ({best}) is {wanted:.0f} prepares a "
        f"second; at its {_median(done[best], 'server_cpu_ms'):.2f} ms of gateway CPU per "
        f"prepare that is {cores:.1f} cores of gateway CPU alone, on a machine of "
        f"{os.cpu_count()} cores that also runs the 16 agents and the contract server. The "
        "target is out of this machine's reach by arithmetic; a gateway with cores to spare "
        "makes the per-core rate above on each.",
        "",
    ]


def throughput_bounds(
    runs: dict[str, list[dict[str, float]]], skipped: dict[str, str]
) -> list[str]:
    """What each configuration that ran cost, why, and what was done and tried."""
    every = [r for done in runs.values() for r in done]
    lines = [
        "Bounded by: CPU, on 2 cores shared by everything in the run (the 16 agents, the "
        "gateway processes, the contract server, PostgreSQL) and by whatever else ran on "
        "the machine: during the concurrent runs all its cores were "
        f"{_median(every, 'machine_busy') * 100:.0f}% busy (median; "
        f"{min(r['machine_busy'] for r in every) * 100:.0f}–"
        f"{max(r['machine_busy'] for r in every) * 100:.0f}%). So a second gateway "
        "process here takes its core from the agents, the contract server and the "
        "database rather than from an idle one; the figure that carries over to a machine "
        "with cores to spare is the rate per core of gateway CPU below, not the table's "
        "prepares a second.",
        "",
        *(_configuration(name, done) for name, done in runs.items() if done),
        *(f"- {name}: not measured: {why}" for name, why in skipped.items()),
        "",
        "A process is one interpreter: its threads share one lock, so one `serve` makes at "
        "most a core's worth of prepares however many agents wait, and under 16 agents "
        "each prepare also costs more CPU than alone (threads handing that lock around). "
        "A second process is a second interpreter; on SQLite the processes take turns to "
        "write (one writer at a time across processes, queued in the kernel, each commit "
        "fsync'd), on "
        "PostgreSQL they write at once, up to the hash chain's lock that each holds from "
        "its chained inserts to its commit. Quotas are per owner and exact across "
        "processes: a prepare counts its owner's jobs at its commit, under the chain's "
        "lock on PostgreSQL (SQLite's write lock on SQLite), so one owner's agents and "
        "several owners' wait in the same one queue:",
        *_owners(runs),
        "",
        BOUNDS_NOW,
        "",
        *_half_floor(runs),
        PREPARE_PROFILE,
        "",
        THIS_ROUND,
        "",
        CONFIRM_PG,
        "",
        NAGLE,
        "",
        HISTORY,
    ]
    return lines
