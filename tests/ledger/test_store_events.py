"""The store contract, events: the append-only history comes back in order with its
detail.
"""

from __future__ import annotations

from undogate.ledger import Store, Transaction

from .conftest import event, insert, job


def test_events_come_back_in_order_with_their_detail(store: Store) -> None:
    insert(store, job("job_1"))

    def record(tx: Transaction) -> None:
        event(tx, "job_1", "prepare", to_state="prepared")
        tx.add_event(
            job_id="job_1",
            actor="operator:op",
            access_path="api",
            operation="reject",
            target="customer",
            from_state="prepared",
            to_state="rejected",
            detail={"why": "no", "list": ["a", "b"]},
        )
        event(tx, None, "credential_create_operator")

    store.write(record)
    first, second = store.events("job_1")
    assert (first.operation, first.to_state, first.detail) == ("prepare", "prepared", None)
    assert second.id > first.id and second.at >= first.at
    assert (second.actor, second.access_path, second.target) == ("operator:op", "api", "customer")
    assert (second.from_state, second.to_state) == ("prepared", "rejected")
    assert second.detail == {"why": "no", "list": ["a", "b"]}
    assert store.read(lambda tx: tx.events("job_1")) == [first, second]
