"""The store contract, jobs: recorded and loaded as they were, listed, found by
idempotency key, moved between states, and counted for the quotas.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from undogate.jobs import ABSENT, UNRESOLVED_STATES, ChangeState, JobState
from undogate.ledger import Admission, EarlierJob, LedgerUsage, Reader, Store, Transaction

from .conftest import AGENT, OWNER, change, insert, job


def test_a_job_comes_back_as_it_was_recorded(store: Store) -> None:
    original = job("job_1", change(0), change(1, "ticket", (), after=ABSENT), key="k1")
    insert(store, original, payload=123)
    loaded = store.load_job("job_1")
    assert loaded == original
    assert store.read(lambda tx: tx.load_job("job_1", with_actions=False)) == original
    assert store.counter("job_count") == 1
    assert store.read(lambda tx: tx.usage()).jobs == 1
    assert store.read(lambda tx: tx.usage()).payload_bytes == 123


def test_counting_a_job_returns_the_counters_as_they_now_stand(store: Store) -> None:
    insert(store, job("job_1"), payload=100)

    def second(tx: Transaction) -> LedgerUsage:
        tx.insert_job(job("job_2"), "digest", 25)
        return tx.count_job(25)

    assert store.write(second) == LedgerUsage(jobs=2, payload_bytes=125)
    assert store.read(lambda tx: tx.usage()) == LedgerUsage(jobs=2, payload_bytes=125)


def test_the_counters_count_past_two_to_the_31(store: Store) -> None:
    """Payload bytes pass 2^31 at 2 GiB; the operation sequence and the job count may
    too, on a ledger that lives long enough. 64 bits on both engines."""
    big = 3 * 2**30

    def count(tx: Transaction, job_id: str) -> LedgerUsage:
        tx.insert_job(job(job_id), "digest", big)
        return tx.count_job(big)

    assert store.write(lambda tx: count(tx, "job_1")) == LedgerUsage(1, big)
    assert store.write(lambda tx: count(tx, "job_2")) == LedgerUsage(2, 2 * big)

    def admit(tx: Transaction) -> LedgerUsage:
        tx.insert_job(job("job_3"), "digest", big)
        return tx.admit_job(OWNER, AGENT, big, stop_at=(10, 10)).usage

    assert store.write(admit) == LedgerUsage(3, 3 * big)
    assert store.read(lambda tx: tx.usage()) == LedgerUsage(3, 3 * big)
    assert 3 * big > 2**33


def test_jobs_are_listed_newest_first_per_owner_and_agent(store: Store) -> None:
    insert(store, job("job_1"), job("job_2", change(0), change(1, "ticket")))
    insert(store, job("job_3", agent="agent-b"), job("job_4", owner="op_other"))
    listed = store.list_jobs(OWNER, AGENT)
    assert [(j[0], j[1], j[2], j[4]) for j in listed] == [
        ("job_2", "prepared", "summary of job_2", 2),
        ("job_1", "prepared", "summary of job_1", 1),
    ]
    assert [j[0] for j in store.read(lambda tx: tx.list_jobs(OWNER, AGENT, 1))] == ["job_2"]


def test_an_idempotency_key_finds_its_newest_job(store: Store) -> None:
    insert(store, job("job_1", key="k1"), job("job_2", key="k2"))
    found = store.read(lambda tx: tx.find_idempotent(OWNER, AGENT, "k1"))
    assert isinstance(found, EarlierJob)
    assert (found.id, found.request_digest) == ("job_1", "digest-job_1")
    assert found.created_at == pytest.approx(time.time(), abs=60)
    assert store.read(lambda tx: tx.find_idempotent(OWNER, "agent-b", "k1")) is None
    assert store.read(lambda tx: tx.find_idempotent(OWNER, AGENT, "k3")) is None


def test_job_and_change_states_move_and_keep_what_is_not_given(store: Store) -> None:
    insert(store, job("job_1"))

    def move(tx: Transaction) -> None:
        tx.set_job_state("job_1", JobState.UNDOING, undo_started=True)
        assert [tx.next_seq() for _ in range(6)] == [1, 2, 3, 4, 5, 6]
        # Applied now: stamped with the next operation sequence number, in SQL.
        tx.set_change_state("job_1", 0, ChangeState.APPLIED, applied_etag='"v2"', stamp_seq=True)

    store.write(move)
    store.write(lambda tx: tx.set_job_state("job_1", JobState.APPLIED))
    store.write(lambda tx: tx.set_change_state("job_1", 0, ChangeState.UNCERTAIN))
    loaded = store.load_job("job_1")
    assert loaded is not None
    assert (loaded.state, loaded.undo_started) == (JobState.APPLIED, True)
    (moved,) = loaded.changes
    assert (moved.state, moved.applied_etag, moved.applied_at) == (
        ChangeState.UNCERTAIN,
        '"v2"',
        7,
    )
    assert loaded.updated_at >= loaded.created_at
    store.write(
        lambda tx: tx.set_job_state("job_1", JobState.INVALIDATED, invalidated_reason="moved")
    )
    invalidated = store.load_job("job_1")
    assert invalidated is not None and invalidated.invalidated_reason == "moved"


def test_confirm_attempts_are_counted(store: Store) -> None:
    insert(store, job("job_1"))
    assert store.read(lambda tx: tx.confirm_attempts("job_1")) == 0
    store.write(lambda tx: tx.count_confirm_attempt("job_1"))
    store.write(lambda tx: tx.count_confirm_attempt("job_1"))
    assert store.read(lambda tx: tx.confirm_attempts("job_1")) == 2


def test_quotas_count_unresolved_jobs_no_further_than_asked(store: Store) -> None:
    states = list(JobState)
    jobs = [job(f"job_{n}", state=s) for n, s in enumerate(states)]
    insert(store, *jobs, job("job_b", agent="agent-b"), job("job_x", owner="op_other"))
    unresolved = len(UNRESOLVED_STATES)

    def counts(tx: Reader) -> tuple[int, int, int, int]:
        return (
            tx.count_unresolved(OWNER, AGENT, stop_at=100),
            tx.count_unresolved(OWNER, None, stop_at=100),
            tx.count_unresolved(OWNER, AGENT, stop_at=2),
            tx.count_unfinished(OWNER),
        )

    finished = {JobState.UNDONE, JobState.REJECTED, JobState.INVALIDATED}
    assert store.read(counts) == (
        unresolved,
        unresolved + 1,
        2,
        len(states) - len(finished) + 1,  # applied is resolved, but not finished
    )


def test_admitting_a_job_counts_it_with_its_agents_and_owners_unresolved_jobs(
    store: Store,
) -> None:
    insert(store, job("job_1"), job("job_b", agent="agent-b"), job("job_x", owner="op_other"))
    insert(store, job("job_done", state=JobState.UNDONE), payload=5)

    def admit(job_id: str, stop_at: tuple[int, int]) -> Callable[[Transaction], Admission]:
        def write(tx: Transaction) -> Admission:
            tx.insert_job(job(job_id), "digest", 25)
            return tx.admit_job(OWNER, AGENT, 25, stop_at=stop_at)

        return write

    assert store.write(admit("job_2", (100, 100))) == Admission(
        agent_unresolved=2, owner_unresolved=3, usage=LedgerUsage(jobs=5, payload_bytes=60)
    )
    capped = store.write(admit("job_3", (2, 3)))  # counted no further than asked
    assert (capped.agent_unresolved, capped.owner_unresolved) == (2, 3)
    assert store.read(lambda tx: tx.usage()) == LedgerUsage(jobs=6, payload_bytes=85)


def test_a_change_learns_its_target_once_and_keeps_it(store: Store) -> None:
    store.write(lambda tx: tx.insert_job(job("job_t", change(0, after=ABSENT)), "d", 10))
    loaded = store.load_job("job_t")
    assert loaded is not None and loaded.changes[0].target is None
    store.write(lambda tx: tx.set_change_state("job_t", 0, ChangeState.APPLIED, target="rec-1"))
    store.write(lambda tx: tx.set_change_state("job_t", 0, ChangeState.UNDONE))
    loaded = store.load_job("job_t")
    assert loaded is not None and loaded.changes[0].target == "rec-1"
    held = store.read(lambda tx: tx.open_changes(["customer"], "job_other"))
    assert held == []  # undone holds nothing
    store.write(lambda tx: tx.set_change_state("job_t", 0, ChangeState.APPLIED))
    (held_change,) = store.read(lambda tx: tx.open_changes(["customer"], "job_other"))
    assert held_change.target == "rec-1"
