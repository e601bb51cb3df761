"""The store contract for leases, on every engine: what an action and a running job say
about the process running them, and how a write learns it lost them. A store holds a
lease on either engine (docs/scaling.md)."""

from __future__ import annotations

import time

import pytest

from undogate.errors import LedgerError
from undogate.jobs import ActionStatus, Change, Job, JobState, Operation
from undogate.ledger import Answer, Store, Transaction


def _running_job(store: Store, job_id: str = "job_1") -> int:
    """A job applying its one change, its write in flight; returns the action's id."""
    now = time.time()
    change = Change(
        index=0,
        resource_id="customer",
        kind="some_kind",
        fingerprint="fp-1",
        fields=("status",),
        before={"status": "lead"},
        after={"status": "customer"},
        media_type="application/json",
        prepared_etag='"v1"',
        assertion_kind=None,
    )
    job = Job(
        id=job_id,
        owner_id="op_owner",
        agent_id="agent-a",
        summary="s",
        attribution_label=None,
        idempotency_key=None,
        state=JobState.PREPARED,
        undo_started=False,
        created_at=now,
        updated_at=now,
        changes=(change,),
    )

    def write(tx: Transaction) -> int:
        tx.insert_job(job, "digest", 10)
        tx.set_job_state(job_id, JobState.APPLYING)
        return tx.begin_action(
            job_id=job_id,
            change_idx=0,
            operation=Operation.APPLY,
            method="PATCH",
            url="https://example.test/records/customer",
            if_match='"v1"',
        ).value()

    return store.write(write)


def test_work_in_flight_names_the_lease_of_its_process(store: Store) -> None:
    action_id = _running_job(store)
    mine = store.read(lambda tx: tx.own_lease)
    assert mine is not None  # every engine's store holds one
    assert store.read(lambda tx: tx.job_runners()) == {"job_1": mine}
    (in_flight,) = store.read(lambda tx: tx.in_flight_actions())
    assert (in_flight.id, in_flight.lease_id) == (action_id, mine)
    assert store.write(lambda tx: tx.holds_job("job_1").value())
    if mine is None:  # SQLite: one owner, no leases at all
        assert store.read(lambda tx: tx.open_leases()) == frozenset()
    else:
        assert mine in store.read(lambda tx: tx.open_leases())
    assert store.write(lambda tx: tx.end_expired_leases()) == []  # its own is live


def test_an_outcome_lands_once_and_only_a_reconciliation_moves_a_settled_write(
    store: Store,
) -> None:
    action_id = _running_job(store)
    # Recovery settled it (its process's lease expired) ...
    assert store.write(lambda tx: tx.finish_action(action_id, ActionStatus.UNCERTAIN).value())
    # ... so the late outcome of its own process is refused, changing nothing ...
    assert not store.write(lambda tx: tx.finish_action(action_id, ActionStatus.DONE).value())
    job = store.load_job("job_1")
    assert job is not None and job.actions[0].status is ActionStatus.UNCERTAIN
    # ... and a reviewer's reconciliation still moves it.
    assert store.write(lambda tx: tx.finish_action(action_id, ActionStatus.ACCEPTED).value())


def test_a_job_settled_elsewhere_is_no_longer_held(store: Store) -> None:
    _running_job(store)
    store.write(lambda tx: tx.set_job_state("job_1", JobState.NEEDS_REVIEW))
    assert not store.write(lambda tx: tx.holds_job("job_1").value())
    assert store.read(lambda tx: tx.job_runners()) == {}


def test_a_running_job_names_when_its_process_s_lease_expires_until_it_is_settled(
    store: Store,
) -> None:
    _running_job(store)
    mine = store.read(lambda tx: tx.own_lease)
    assert mine is not None
    expires_at = store.read(
        lambda tx: tx.connection.execute(  # type: ignore[attr-defined]
            "SELECT expires_at FROM leases WHERE id = ?", (mine,)
        ).fetchone()[0]
    )
    assert store.read(lambda tx: tx.runner_lease_expiry("job_1")) == float(expires_at)
    assert store.read(lambda tx: tx.runner_lease_expiry("job_unknown")) is None
    store.write(lambda tx: tx.set_job_state("job_1", JobState.NEEDS_REVIEW))
    assert store.read(lambda tx: tx.runner_lease_expiry("job_1")) is None  # not running


def test_a_running_job_whose_lease_ended_names_no_expiry(store: Store) -> None:
    _running_job(store)
    mine = store.read(lambda tx: tx.own_lease)
    store.write(
        lambda tx: tx.connection.execute(  # type: ignore[attr-defined]
            "UPDATE leases SET ended_at = expires_at WHERE id = ?", (mine,)
        )
    )
    assert store.read(lambda tx: tx.runner_lease_expiry("job_1")) is None


def test_a_process_never_ends_its_own_lease(store: Store) -> None:
    """Even expired (a long stall, the database out of reach): it is alive, since it
    asks; its heartbeat renews it, and its writes in flight stay its own."""
    mine = store.read(lambda tx: tx.own_lease)
    if mine is not None:
        store.write(
            lambda tx: tx.connection.execute(  # type: ignore[attr-defined]
                "UPDATE leases SET expires_at = 0 WHERE id = ?", (mine,)
            )
        )
    assert store.write(lambda tx: tx.end_expired_leases()) == []
    assert store.read(lambda tx: tx.open_leases()) == (frozenset({mine}) if mine else frozenset())


def test_a_check_left_for_the_commit_still_rolls_the_whole_write_back(store: Store) -> None:
    """``check_before_commit``: how an outcome learns its job was settled elsewhere
    without a round trip of its own; whatever the write did before is not kept."""
    _running_job(store)
    store.write(lambda tx: tx.set_job_state("job_1", JobState.NEEDS_REVIEW))  # settled
    asked: list[Answer[bool]] = []

    def late(tx: Transaction) -> None:
        held = tx.holds_job("job_1")
        asked.append(held)
        tx.set_job_state("job_1", JobState.APPLIED)
        tx.add_event(job_id="job_1", actor="test", access_path="test", operation="late")

        def still_held() -> None:
            if not held.value():
                raise LedgerError("this process no longer runs the job", lease="expired")

        tx.check_before_commit(still_held)

    with pytest.raises(LedgerError, match="no longer runs the job"):
        store.write(late)
    settled = store.load_job("job_1")
    assert settled is not None and settled.state is JobState.NEEDS_REVIEW
    assert [e.operation for e in store.events("job_1")] == []
    with pytest.raises(TypeError, match="not a truth value"):
        bool(asked[0])  # ``if answer`` would always pass: refused
