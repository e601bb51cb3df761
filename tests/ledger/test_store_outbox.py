"""The store contract, the webhook outbox (ledger/sql_outbox.py), the same on every
engine: a message commits with the write that adds it or not at all, is due until it is
claimed, is claimed by one of several racing deliverers, and keeps its outcome for
operators to see."""

from __future__ import annotations

import threading
import time
from typing import Literal

import pytest

from undogate.jobs import JobState
from undogate.ledger import Store, Transaction

from .conftest import AGENT, OWNER, insert, job

SEEN = (AGENT,)


def add(
    tx: Transaction,
    message_id: str,
    job_id: str | None = "job_1",
    agent: str = "agent-a",
    owner: str = OWNER,
) -> None:
    tx.add_webhook(
        message_id=message_id,
        endpoint="ops",
        event="job.rejected" if job_id is not None else "agent.stopped",
        owner_id=owner,
        job_id=job_id,
        agent_id=agent,
        payload='{"type":"job.rejected"}',
    )


def test_a_message_commits_with_the_state_change_or_not_at_all(store: Store) -> None:
    insert(store, job("job_1"))

    def reject_then_fail(tx: Transaction) -> None:
        tx.set_job_state("job_1", JobState.REJECTED)
        add(tx, "msg_1")
        raise RuntimeError("the write fails after the message was added")

    with pytest.raises(RuntimeError):
        store.write(reject_then_fail)
    assert store.read(lambda r: r.webhook_messages(OWNER, SEEN)) == []
    assert store.read(lambda r: r.due_webhooks(time.time() + 1, 10)) == []
    loaded = store.load_job("job_1")
    assert loaded is not None and loaded.state is JobState.PREPARED

    def reject(tx: Transaction) -> None:
        tx.set_job_state("job_1", JobState.REJECTED)
        add(tx, "msg_1")

    store.write(reject)
    [message] = store.read(lambda r: r.due_webhooks(time.time() + 1, 10))
    assert (message.id, message.endpoint, message.event, message.job_id) == (
        "msg_1",
        "ops",
        "job.rejected",
        "job_1",
    )
    assert (message.status, message.attempts, message.agent_id) == ("pending", 0, "agent-a")
    assert message.payload == '{"type":"job.rejected"}'


def test_a_claimed_message_is_not_due_until_its_claim_runs_out(store: Store) -> None:
    insert(store, job("job_1"))
    store.write(lambda tx: add(tx, "msg_1"))
    now = time.time() + 1
    assert store.write(lambda tx: tx.claim_webhook("msg_1", now=now, until=now + 60))
    assert not store.write(lambda tx: tx.claim_webhook("msg_1", now=now, until=now + 60))
    assert store.read(lambda r: r.due_webhooks(now, 10)) == []
    assert [m.id for m in store.read(lambda r: r.due_webhooks(now + 61, 10))] == ["msg_1"]


def test_of_racing_deliverers_exactly_one_claims_a_message(store: Store) -> None:
    insert(store, job("job_1"))
    store.write(lambda tx: add(tx, "msg_1"))
    now = time.time() + 1
    start = threading.Barrier(6)
    won: list[bool] = []

    def claim() -> None:
        start.wait(10)
        won.append(store.write(lambda tx: tx.claim_webhook("msg_1", now=now, until=now + 60)))

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(won) == [False] * 5 + [True]


def claim(store: Store, message_id: str, hold_s: float = 60.0) -> float:
    """Claim a due message as the delivery task does; returns the claim's expiry."""
    now = time.time() + 1
    until = now + hold_s
    assert store.write(lambda tx: tx.claim_webhook(message_id, now=now, until=until))
    return until


def test_attempts_are_counted_and_settled_messages_stay_visible(store: Store) -> None:
    insert(store, job("job_1"), job("job_2"), job("job_other", owner="op_other"))

    def two(tx: Transaction) -> None:
        add(tx, "msg_1", "job_1")
        add(tx, "msg_2", "job_2")

    store.write(two)
    store.write(lambda tx: add(tx, "msg_other", "job_other", owner="op_other"))
    later = time.time() + 3600
    first_claim, second_claim = claim(store, "msg_1"), claim(store, "msg_2")
    assert store.write(
        lambda tx: tx.record_webhook_attempt(
            "msg_1",
            claimed_until=first_claim,
            status="pending",
            next_attempt_at=later,
            response_status=503,
            error="the receiver answered HTTP 503",
        )
    )
    assert store.write(
        lambda tx: tx.record_webhook_attempt(
            "msg_2",
            claimed_until=second_claim,
            status="failed",
            next_attempt_at=0.0,
            response_status=None,
            error="gone",
        )
    )
    now = time.time() + 1
    assert [m.id for m in store.read(lambda r: r.due_webhooks(now, 10))] == ["msg_other"]
    mine = store.read(lambda r: r.webhook_messages(OWNER, SEEN))
    assert [m.id for m in mine] == ["msg_2", "msg_1"]  # newest first; never another owner's
    first = mine[1]
    assert (first.status, first.attempts, first.last_response_status) == ("pending", 1, 503)
    assert first.last_error == "the receiver answered HTTP 503"
    assert first.next_attempt_at == pytest.approx(later)
    failed = store.read(lambda r: r.webhook_messages(OWNER, SEEN, status="failed"))
    assert [m.id for m in failed] == ["msg_2"]
    assert store.read(lambda r: r.webhook_messages(OWNER, SEEN, status="delivered")) == []
    assert [m.id for m in store.read(lambda r: r.webhook_messages(OWNER, SEEN, limit=1))] == [
        "msg_2"
    ]
    # The agents a key sees filter in the query, before the limit.
    store.write(lambda tx: add(tx, "msg_b", agent="agent-b"))
    assert [m.id for m in store.read(lambda r: r.webhook_messages(OWNER, SEEN, limit=1))] == [
        "msg_2"
    ]
    both = store.read(lambda r: r.webhook_messages(OWNER, (AGENT, "agent-b"), limit=1))
    assert [m.id for m in both] == ["msg_b"]
    assert store.read(lambda r: r.webhook_messages(OWNER, ())) == []


def test_an_attempt_that_outlived_its_claim_records_nothing(store: Store) -> None:
    """Two processes: the first's claim runs out mid-attempt, the second claims the
    message and delivers it; the first's late failure must not undo that."""
    insert(store, job("job_1"))
    store.write(lambda tx: add(tx, "msg_1"))
    stale = claim(store, "msg_1", hold_s=-0.5)  # already ran out: due again
    taken_over = claim(store, "msg_1")

    def outcome(until: float, status: Literal["pending", "delivered", "failed"]) -> bool:
        return store.write(
            lambda tx: tx.record_webhook_attempt(
                "msg_1",
                claimed_until=until,
                status=status,
                next_attempt_at=time.time(),
                response_status=204 if status == "delivered" else None,
                error=None if status == "delivered" else "timed out",
            )
        )

    assert outcome(taken_over, "delivered")
    assert not outcome(stale, "failed")
    [message] = store.read(lambda r: r.webhook_messages(OWNER, SEEN))
    assert (message.status, message.attempts, message.last_response_status) == (
        "delivered",
        1,
        204,
    )
    assert not outcome(taken_over, "failed")  # a settled message takes no more outcomes


def test_a_message_about_an_agent_is_its_owners_alone(store: Store) -> None:
    """A message may name no job (an agent stopped or resumed): it is due and listed like
    any other, for its owner only, among their job messages by age."""
    insert(store, job("job_1"))
    store.write(lambda tx: add(tx, "msg_job"))
    store.write(lambda tx: add(tx, "msg_stop", None))
    store.write(lambda tx: add(tx, "msg_theirs", None, owner="op_other"))
    mine = store.read(lambda r: r.webhook_messages(OWNER, SEEN))
    assert [(m.id, m.job_id, m.event) for m in mine] == [
        ("msg_stop", None, "agent.stopped"),
        ("msg_job", "job_1", "job.rejected"),
    ]
    theirs = store.read(lambda r: r.webhook_messages("op_other", SEEN))
    assert [m.id for m in theirs] == ["msg_theirs"]
    due = store.read(lambda r: r.due_webhooks(time.time() + 1, 10))
    assert {m.id for m in due} == {"msg_job", "msg_stop", "msg_theirs"}
    until = claim(store, "msg_stop")
    assert store.write(
        lambda tx: tx.record_webhook_attempt(
            "msg_stop",
            claimed_until=until,
            status="delivered",
            next_attempt_at=time.time(),
            response_status=204,
            error=None,
        )
    )
    [delivered] = store.read(lambda r: r.webhook_messages(OWNER, SEEN, status="delivered"))
    assert (delivered.id, delivered.attempts) == ("msg_stop", 1)
