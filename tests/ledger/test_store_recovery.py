"""The store contract, start-up: what recovery reads (running jobs, jobs under another
identity), resource identities, and the endpoint checks made under them.
"""

from __future__ import annotations

from undogate.jobs import JobState
from undogate.ledger import Store, Transaction

from .conftest import change, insert, job

# -- start-up recovery -------------------------------------------------------------------------


def test_recovery_finds_running_jobs_and_jobs_under_another_identity(store: Store) -> None:
    insert(
        store,
        job("job_applying", state=JobState.APPLYING),
        job("job_undoing", state=JobState.UNDOING),
        job("job_review", state=JobState.NEEDS_REVIEW),
        job("job_undone", state=JobState.UNDONE),
        job("job_ticket", change(0, "ticket")),
    )
    assert sorted(store.read(lambda tx: tx.running_jobs())) == ["job_applying", "job_undoing"]
    unfinished = store.read(lambda tx: tx.unfinished_jobs_on("customer", "fp-2"))
    assert sorted(unfinished) == [
        ("job_applying", JobState.APPLYING),
        ("job_review", JobState.NEEDS_REVIEW),
        ("job_undoing", JobState.UNDOING),
    ]
    assert store.read(lambda tx: tx.unfinished_jobs_on("customer", "fp-1")) == []


def test_resource_identities_are_replaced_whole(store: Store) -> None:
    assert store.read(lambda tx: tx.resource_identities()) == {}
    store.write(lambda tx: tx.replace_resource_identities({"customer": "fp-1", "ticket": "t"}))
    store.write(lambda tx: tx.replace_resource_identities({"customer": "fp-2"}))
    assert store.read(lambda tx: tx.resource_identities()) == {"customer": "fp-2"}


# -- endpoint checks ---------------------------------------------------------------------------


def test_the_latest_endpoint_check_under_the_current_identity_counts(store: Store) -> None:
    def check(passed: bool, fingerprint: str = "fp-1") -> int:
        return store.write(
            lambda tx: tx.record_endpoint_check(
                resource_id="customer",
                test_copy_id="customer-copy",
                production_fingerprint=fingerprint,
                test_copy_fingerprint="fp-copy",
                passed=passed,
                evidence='{"steps": []}',
                actor="operator:tester",
                access_path="test",
            )
        )

    assert not store.read(lambda tx: tx.latest_check_passed("customer", "fp-1"))
    first = check(True)
    assert store.read(lambda tx: tx.latest_check_passed("customer", "fp-1"))
    assert check(False) > first
    assert not store.read(lambda tx: tx.latest_check_passed("customer", "fp-1"))
    check(True, "fp-2")
    assert store.read(lambda tx: tx.latest_check_passed("customer", "fp-2"))
    assert not store.read(lambda tx: tx.latest_check_passed("ticket", "fp-1"))


def test_the_latest_check_and_undo_acceptance_of_a_resource(store: Store) -> None:
    assert store.read(lambda tx: tx.latest_check("contacts", "fp-1")) is None
    assert store.read(lambda tx: tx.latest_undo_acceptance("contacts")) is None
    check_id = store.write(
        lambda tx: tx.record_endpoint_check(
            resource_id="contacts",
            test_copy_id="contacts-copy",
            production_fingerprint="fp-1",
            test_copy_fingerprint="fp-copy",
            passed=True,
            evidence='{"steps": [], "undos": ["undo_of_create"]}',
            actor="operator:tester",
            access_path="test",
        )
    )
    check = store.read(lambda tx: tx.latest_check("contacts", "fp-1"))
    assert check is not None and check.id == check_id and check.passed
    assert check.evidence["undos"] == ["undo_of_create"]
    assert store.read(lambda tx: tx.latest_check("contacts", "fp-2")) is None
    for n in (1, 2):

        def accept(tx: Transaction, n: int = n) -> None:
            tx.add_event(
                job_id=None,
                actor="operator:op_a",
                access_path="cli",
                operation="undo_accepted",
                target="contacts",
                detail={"check": str(n)},
            )

        store.write(accept)
    accepted = store.read(lambda tx: tx.latest_undo_acceptance("contacts"))
    assert accepted is not None and accepted.detail == {"check": "2"}
    assert accepted.actor == "operator:op_a"
    assert store.read(lambda tx: tx.latest_undo_acceptance("other")) is None


# -- closing -----------------------------------------------------------------------------------
