"""The store contract, the review inbox and the audit export: one owner's jobs across
agents filtered and paged by keyset, counted per state; events and jobs read since a time.
"""

from __future__ import annotations

import time

from undogate.jobs import ChangeState, JobState
from undogate.ledger import InboxQuery, Store, Transaction

from .conftest import OWNER, change, event, insert, job


def test_the_inbox_filters_across_agents_and_pages_by_keyset(store: Store) -> None:
    jobs = [
        job(f"job_{i:03d}", change(0, "customer" if i % 2 else "notes"), agent=f"agent-{i % 3}")
        for i in range(250)
    ]
    insert(store, *jobs, job("job_other_owner", owner="op_other"))

    def moved(tx: Transaction) -> None:
        tx.set_job_state("job_007", JobState.REJECTED)
        tx.set_job_state("job_009", JobState.NEEDS_REVIEW)
        tx.set_change_state("job_009", 0, ChangeState.UNCERTAIN)

    store.write(moved)
    everyone = ("agent-0", "agent-1", "agent-2")

    def page(**wanted: object) -> list[str]:
        query = InboxQuery(**{"owner_id": OWNER, "agents": everyone, **wanted})  # type: ignore[arg-type]
        return [r.id for r in store.read(lambda tx: tx.inbox(query))]

    first = page(limit=100)
    assert first == [f"job_{i:03d}" for i in range(249, 149, -1)]  # newest first
    second = page(limit=100, after=first[-1])
    third = page(limit=100, after=second[-1])
    assert second[0] == "job_149" and third[-1] == "job_000" and len(third) == 50
    assert len(set(first + second + third)) == 250  # every job once, none from op_other
    assert page(after="job_other_owner") == []  # another owner's id starts nothing
    assert page(agents=("agent-1",), limit=3) == ["job_247", "job_244", "job_241"]
    assert page(states=(JobState.REJECTED,)) == ["job_007"]
    assert page(quarantined=True) == ["job_009"]
    assert page(resource_id="notes", limit=2) == ["job_248", "job_246"]
    assert page(id_prefix="job_00") == [f"job_00{i}" for i in range(9, -1, -1)]
    assert page(id_prefix="job%") == [] and page(id_prefix="jo__") == []  # no wildcards
    now = time.time()
    assert page(since=now + 60) == [] and len(page(until=now + 60, limit=200)) == 200
    row = store.read(lambda tx: tx.inbox(InboxQuery(OWNER, everyone, id_prefix="job_009")))[0]
    assert row.quarantined and row.resources == ("customer",) and row.change_count == 1
    assert row.state is JobState.NEEDS_REVIEW and row.agent_id == "agent-0"
    counts = store.read(lambda tx: tx.inbox_counts(OWNER, everyone))
    assert counts == {"prepared": 248, "needs_review": 1, "quarantined": 1}
    assert store.read(lambda tx: tx.inbox_counts(OWNER, ("agent-0",)))["prepared"] == 83
    assert store.read(lambda tx: tx.inbox_counts(OWNER, ())) == {}


def test_the_audit_export_reads_events_and_jobs_since_a_time_by_keyset(store: Store) -> None:
    insert(store, job("job_a"), job("job_b", owner="op_other"), job("job_c"))

    def history(tx: Transaction) -> None:
        for n in range(5):
            event(tx, "job_a", f"step_{n}")
        event(tx, None, "credential_create_operator", target="op_x")

    store.write(history)
    page = store.read(lambda tx: tx.events_since(0.0, 0, 4))
    assert [e.operation for e in page] == ["step_0", "step_1", "step_2", "step_3"]
    rest = store.read(lambda tx: tx.events_since(0.0, page[-1].id, 4))
    assert [e.operation for e in rest] == ["step_4", "credential_create_operator"]
    assert store.read(lambda tx: tx.events_since(time.time() + 60, 0, 10)) == []
    jobs = store.read(lambda tx: tx.jobs_since(0.0, None, 2))
    assert [j.id for j in jobs] == ["job_a", "job_b"]  # every owner's, in order prepared
    assert [j.id for j in store.read(lambda tx: tx.jobs_since(0.0, "job_b", 2))] == ["job_c"]
    assert jobs[0].change_count == 1 and jobs[1].owner_id == "op_other"
    assert store.read(lambda tx: tx.jobs_since(time.time() + 60, None, 10)) == []
