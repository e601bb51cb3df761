"""Figure 3: job list, job detail, start-up open and recovery with 100,000 jobs vs 1,000.

Jobs are written straight into a ledger (limits raised for the run) through the same
``Transaction.insert_job`` the engine uses, in large transactions to keep set-up short.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from undogate.config import parse_config
from undogate.jobs import Change, ChangeState, Job, JobState
from undogate.jsonvalue import JsonNumber
from undogate.ledger import Ledger, Transaction
from undogate.net import PinnedClient
from undogate.operations.context import Context
from undogate.operations.recovery import recover

from .common import Stat, paired_ratio, private_dir

STATES = [JobState.PREPARED, JobState.APPLIED, JobState.UNDONE, JobState.REJECTED]


def _fill(data_dir: Path, count: int, fingerprint: str) -> list[str]:
    ledger = Ledger.open(private_dir(data_dir))
    ids: list[str] = []
    try:
        batch = 5000
        for start in range(0, count, batch):

            def insert(tx: Transaction, start: int = start) -> None:
                for n in range(start, min(count, start + batch)):
                    job_id = f"job_{n:012d}"
                    ids.append(job_id)
                    state = STATES[n % len(STATES)]
                    change = Change(
                        index=0,
                        resource_id="customer",
                        kind="json_record",
                        fingerprint=fingerprint,
                        fields=("status",),
                        before={"status": "lead"},
                        after={"status": f"s{n}", "n": JsonNumber(str(n))},
                        media_type="application/json",
                        prepared_etag=f'"e{n}"',
                        assertion_kind=None,
                        state=ChangeState.APPLIED
                        if state is JobState.APPLIED
                        else ChangeState.PENDING,
                    )
                    job = Job(
                        id=job_id,
                        owner_id="bench",
                        agent_id=f"agent-{n % 4}",
                        summary=f"bench job {n}",
                        attribution_label=None,
                        idempotency_key=None,
                        state=state,
                        undo_started=False,
                        created_at=1.7e9 + n,
                        updated_at=1.7e9 + n,
                        changes=(change,),
                    )
                    tx.insert_job(job, "digest", 64)
                    tx.count_job(64)

            ledger.write(insert)
    finally:
        ledger.close()
    return ids


def _startup(data_dir: Path, config_data: dict[str, object]) -> tuple[float, float]:
    """(open, recovery): opening checks the whole file on purpose (``quick_check``, the
    ledger's identity); recovery must read only what needs attention."""
    config = parse_config({**config_data, "server": {"data_dir": str(data_dir)}})
    started = time.perf_counter()
    ledger = Ledger.open(data_dir)
    opened = time.perf_counter()
    recover(ledger, config)
    recovered = time.perf_counter()
    ledger.close()
    return opened - started, recovered - opened


def run(work: Path, small: int = 1_000, large: int = 100_000) -> dict[str, Stat]:
    """Both ledgers are measured alternately, so both see the same machine."""
    config_data: dict[str, object] = {
        "limits": {"max_jobs": large * 2},
        "resources": [
            {
                "id": "customer",
                "agent_id": "agent-1",
                "name": "c",
                "kind": "json_record",
                "url": "https://records.example.com/c/1",
                "fields": ["status", "n"],
                "conditional_writes": True,
            }
        ],
        "agents": [{"id": f"agent-{i}", "tools": ["prepare_changes"]} for i in range(4)],
    }
    fingerprint = parse_config(config_data).resources[0].fingerprint
    out: dict[str, Stat] = {}
    dirs: dict[int, Path] = {}
    ids: dict[int, list[str]] = {}
    for count in (small, large):
        dirs[count] = work / f"ledger-{count}"
        started = time.perf_counter()
        ids[count] = _fill(dirs[count], count, fingerprint)
        out[f"fill_{count}"] = Stat.of([time.perf_counter() - started])
    timings: dict[tuple[str, int], list[float]] = {
        (k, n): [] for k in ("list", "detail", "open", "recovery") for n in (small, large)
    }
    for _ in range(7):
        for count in (small, large):
            opened, recovered = _startup(dirs[count], config_data)
            timings[("open", count)].append(opened)
            timings[("recovery", count)].append(recovered)
    gateways = {}
    for count in (small, large):
        config = parse_config({**config_data, "server": {"data_dir": str(dirs[count])}})
        gateways[count] = Context(
            config=config, ledger=Ledger.open(dirs[count]), http=PinnedClient()
        )
    rng = random.Random(7)
    try:
        for _ in range(300):
            for count, gw in gateways.items():
                started = time.perf_counter()
                rows = gw.ledger.list_jobs("bench", "agent-1")
                timings[("list", count)].append(time.perf_counter() - started)
                assert len(rows) == min(100, count // 4)
                job_id = rng.choice(ids[count])
                started = time.perf_counter()
                gw.get_job("bench", job_id)
                timings[("detail", count)].append(time.perf_counter() - started)
    finally:
        for gw in gateways.values():
            gw.http.close()
            gw.ledger.close()
    for key in ("list", "detail", "open", "recovery"):
        out[f"{key}_small"] = Stat.of(timings[(key, small)])
        out[f"{key}_large"] = Stat.of(timings[(key, large)])
        out[f"{key}_ratio"] = paired_ratio(timings[(key, large)], timings[(key, small)])
    return out
