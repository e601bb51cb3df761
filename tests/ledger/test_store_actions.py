"""The store contract, actions: recorded before and after a write, and what another
job has in flight or holds on a resource (the overlap checks).
"""

from __future__ import annotations

from undogate.jobs import ActionStatus, ChangeState, Observation, Operation
from undogate.ledger import OpenChange, Store, Transaction

from .conftest import begin, change, insert, job


def test_an_action_is_recorded_before_and_after(store: Store) -> None:
    insert(store, job("job_1"))
    action_id = store.write(begin)
    (in_flight,) = store.read(lambda tx: tx.in_flight_actions())
    assert (in_flight.id, in_flight.job_id, in_flight.change_index) == (action_id, "job_1", 0)
    assert in_flight.operation is Operation.APPLY
    loaded = store.load_job("job_1")
    assert loaded is not None
    (action,) = loaded.actions
    assert (action.status, action.method, action.if_match) == (
        ActionStatus.DISPATCHING,
        "PATCH",
        '"v1"',
    )
    assert action.finished_at is None

    store.write(
        lambda tx: tx.finish_action(
            action_id,
            ActionStatus.UNCERTAIN,
            response_status=500,
            address="127.0.0.1",
            detail="HTTP 500",
        )
    )
    store.write(
        lambda tx: tx.finish_action(
            action_id, ActionStatus.ACCEPTED, observation=Observation.LOOKS_APPLIED
        )
    )
    assert store.read(lambda tx: tx.in_flight_actions()) == []
    finished = store.load_job("job_1")
    assert finished is not None
    (done,) = finished.actions
    assert (done.status, done.response_status, done.address, done.detail) == (
        ActionStatus.ACCEPTED,
        500,
        "127.0.0.1",
        "HTTP 500",
    )
    assert done.observation is Observation.LOOKS_APPLIED and done.finished_at is not None
    bare = store.read(lambda tx: tx.load_job("job_1", with_actions=False))
    assert bare is not None and bare.actions == ()


def test_open_changes_are_other_jobs_writes_in_flight_then_held_changes(store: Store) -> None:
    insert(
        store,
        job("job_mine"),
        job("job_applied"),
        job("job_uncertain", change(0, fields=("owner",))),
        job("job_pending"),
        job("job_flying"),
        job("job_elsewhere", change(0, "ticket")),
    )

    def hold(tx: Transaction) -> None:
        tx.set_change_state("job_mine", 0, ChangeState.APPLIED, stamp_seq=True)
        tx.set_change_state("job_applied", 0, ChangeState.APPLIED, stamp_seq=True)
        tx.set_change_state("job_uncertain", 0, ChangeState.UNCERTAIN)
        tx.set_change_state("job_elsewhere", 0, ChangeState.APPLIED, stamp_seq=True)
        begin(tx, "job_flying")
        begin(tx, "job_mine")

    store.write(hold)
    found = store.read(lambda tx: tx.open_changes(["customer"], "job_mine"))
    assert found[0] == OpenChange(
        job_id="job_flying",
        resource_id="customer",
        kind="some_kind",
        fields=("status",),
        state=ChangeState.PENDING,
        applied_seq=None,
        fingerprint="fp-1",
        in_flight=True,
    )
    held = {(o.job_id, o.state, o.applied_seq, o.fields, o.in_flight) for o in found[1:]}
    assert held == {
        ("job_applied", ChangeState.APPLIED, 2, ("status",), False),
        ("job_uncertain", ChangeState.UNCERTAIN, None, ("owner",), False),
    }
    # Several resources in one read: still the writes in flight first, each holder named
    # with its resource.
    both = store.read(lambda tx: tx.open_changes(["customer", "ticket"], "job_mine"))
    assert (both[0].job_id, both[0].resource_id, both[0].in_flight) == (
        "job_flying",
        "customer",
        True,
    )
    assert {(o.job_id, o.resource_id, o.in_flight) for o in both[1:]} == {
        ("job_applied", "customer", False),
        ("job_uncertain", "customer", False),
        ("job_elsewhere", "ticket", False),
    }
    assert store.read(lambda tx: tx.open_changes([], "job_mine")) == []


def test_a_write_that_locks_its_resources_sees_every_earlier_intent(store: Store) -> None:
    insert(store, job("job_1"), job("job_2"))

    def intent(tx: Transaction) -> None:
        tx.lock_resources(["customer"])
        begin(tx, "job_1")

    store.write(intent)

    def check(tx: Transaction) -> list[str]:
        tx.lock_resources(["ticket", "customer", "customer"])  # any order, repeats allowed
        return [o.job_id for o in tx.open_changes(["customer"], "job_2")]

    assert store.write(check) == ["job_1"]
