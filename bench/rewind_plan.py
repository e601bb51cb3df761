"""A rewind plan over 500 jobs on 50 records (docs/rewind.md): how long its preview
takes, and how many reads it sends (one per resource, not one per job).

``python bench/rewind_plan.py`` prints the figure. The jobs are applied through the
operations (prepare, preview, confirm) against ``undogate contract-server`` in its own
process, on a fsync'd SQLite ledger; the preview is timed alone, over five runs.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import contract_server, private_dir
from undogate.adapters import Snapshot
from undogate.config import parse_config
from undogate.jobs import Actor, Change, ChangeRequest, Operation, PrepareRequest
from undogate.ledger import open_store
from undogate.net import PinnedClient
from undogate.operations.confirm import confirm_preview
from undogate.operations.context import Context
from undogate.operations.prepare import prepare_job
from undogate.operations.preview import preview_job
from undogate.operations.recovery import recover
from undogate.operations.rewind import create_plan, load_plan, preview_plan
from undogate.operations.rewind_plan import Selection

OWNER = Actor(id="bench", owner_id="bench", kind="operator", access_path="bench")
AGENT = Actor(id="bench-agent", owner_id="bench", kind="agent", access_path="bench")
RECORDS = 50
JOBS = 500


class CountingContext(Context):
    """The operations' context, counting the resource reads a plan sends."""

    reads = 0

    def read_change(self, change: Change, deadline: float | None) -> Snapshot:
        self.reads += 1
        return super().read_change(change, deadline)


def run(work: Path, trials: int = 5) -> dict[str, float]:
    data = work / "records"
    data.mkdir(parents=True)
    for i in range(RECORDS):
        (data / f"rec-{i}.json").write_text(f'{{"id": "{i}", "status": "s", "n": {i}}}\n')
    with contract_server(data) as base:
        config = parse_config(
            {
                "server": {"data_dir": str(private_dir(work / "ledger"))},
                "resources": [
                    {
                        "id": f"rec-{i}",
                        "agent_id": AGENT.id,
                        "name": f"record {i}",
                        "kind": "json_record",
                        "url": f"{base}/records/rec-{i}",
                        "fields": ["status"],
                        "conditional_writes": True,
                        "allow_loopback_http": True,
                    }
                    for i in range(RECORDS)
                ],
                "agents": [{"id": AGENT.id, "tools": ["prepare_changes"]}],
                "limits": {"max_prepares_per_minute": 100000, "prepare_burst": 100000},
            }
        )
        ledger = open_store(config.server)
        http = PinnedClient(request_timeout_s=config.server.request_timeout_s)
        gw = CountingContext(config=config, ledger=ledger, http=http)
        recover(ledger, config)
        since = time.time()
        for n in range(JOBS):
            change = ChangeRequest(f"rec-{n % RECORDS}", set={"status": f"v{n}"})
            job = prepare_job(gw, AGENT, AGENT.id, PrepareRequest(f"job {n}", (change,))).job
            token = preview_job(gw, OWNER, job, Operation.APPLY).token
            assert token is not None
            confirm_preview(gw, OWNER, gw.get_job(OWNER.owner_id, job.id), token)
        plan = create_plan(gw, OWNER, Selection(AGENT.id, since))
        assert len(plan.steps) == JOBS
        timings: list[float] = []
        reads: list[int] = []
        for _ in range(trials):
            loaded = load_plan(gw, OWNER.owner_id, plan.id)
            gw.reads = 0
            started = time.perf_counter()
            preview = preview_plan(gw, OWNER, loaded)
            timings.append(time.perf_counter() - started)
            reads.append(gw.reads)
        assert all(s.verdict.value == "undo" for s in preview.plan.steps)
        http.close()
        ledger.close()
    return {
        "jobs": JOBS,
        "resources": RECORDS,
        "reads": statistics.median(reads),
        "median_s": statistics.median(timings),
        "low_s": min(timings),
        "high_s": max(timings),
    }


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        figure = run(Path(tmp))
    print(
        f"rewind plan preview, {figure['jobs']:.0f} jobs on {figure['resources']:.0f} records: "
        f"{figure['reads']:.0f} reads, {figure['median_s'] * 1000:.0f} ms median "
        f"({figure['low_s'] * 1000:.0f}–{figure['high_s'] * 1000:.0f} ms over 5 runs)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
