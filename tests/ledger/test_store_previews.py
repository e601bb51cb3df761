"""The store contract, previews: kept, claimed at most once, never for an operation or
a job state other than the one previewed, and exactly one of racing claims wins.
"""

from __future__ import annotations

import threading

import pytest

from undogate.errors import ChangedSincePreview, PreviewUsed
from undogate.jobs import Operation
from undogate.ledger import Store, Transaction

from .conftest import insert, job, preview


def test_a_preview_is_kept_and_claimed_once(store: Store) -> None:
    insert(store, job("job_1"))
    store.write(lambda tx: preview(tx, "hash-1"))
    stored = store.read(lambda tx: tx.load_preview("hash-1"))
    assert stored is not None
    assert (stored.job_id, stored.operation, stored.snapshot) == (
        "job_1",
        Operation.APPLY,
        {"0": '"v1"'},
    )
    assert stored.consumed_at is None and stored.op_seq is None
    assert stored.expires_at > stored.created_at
    assert store.read(lambda tx: tx.load_preview("hash-unknown")) is None
    assert store.read(lambda tx: tx.latest_consumed_seq("job_1")) is None

    seq = store.write(lambda tx: tx.claim_preview("hash-1", "job_1", "prepared")).value()
    claimed = store.read(lambda tx: tx.load_preview("hash-1"))
    assert claimed is not None and claimed.op_seq == seq and claimed.consumed_at is not None
    assert store.read(lambda tx: tx.latest_consumed_seq("job_1")) == seq
    with pytest.raises(PreviewUsed, match="used by another confirm"):
        store.write(lambda tx: tx.claim_preview("hash-1", "job_1", "prepared"))
    with pytest.raises(PreviewUsed):
        store.write(lambda tx: tx.claim_preview("hash-unknown", "job_1", "prepared"))


def test_a_preview_made_before_another_operation_can_never_be_claimed(store: Store) -> None:
    insert(store, job("job_1"))

    def two(tx: Transaction) -> None:
        preview(tx, "old")
        preview(tx, "new")

    store.write(two)
    store.write(lambda tx: tx.claim_preview("new", "job_1", "prepared"))
    with pytest.raises(PreviewUsed, match="another operation ran"):
        store.write(lambda tx: tx.claim_preview("old", "job_1", "prepared"))
    store.write(lambda tx: preview(tx, "after"))  # made after the claim: it may run
    assert store.write(lambda tx: tx.claim_preview("after", "job_1", "prepared")).value() > 0


def test_a_preview_is_not_claimed_for_a_job_that_moved_on(store: Store) -> None:
    insert(store, job("job_1"))
    store.write(lambda tx: preview(tx, "hash-1"))
    with pytest.raises(ChangedSincePreview):
        store.write(lambda tx: tx.claim_preview("hash-1", "job_1", "applied"))
    stored = store.read(lambda tx: tx.load_preview("hash-1"))
    assert stored is not None and stored.consumed_at is None  # the refusal kept nothing


def test_of_racing_claims_exactly_one_wins(store: Store) -> None:
    insert(store, job("job_1"))
    store.write(lambda tx: preview(tx, "hash-1"))
    start = threading.Barrier(6)
    won: list[int] = []
    lost: list[Exception] = []

    def claim() -> None:
        start.wait(10)
        try:
            won.append(
                store.write(lambda tx: tx.claim_preview("hash-1", "job_1", "prepared")).value()
            )
        except PreviewUsed as exc:
            lost.append(exc)

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(won) == 1 and len(lost) == 5
