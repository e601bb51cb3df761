"""The store contract for what an operator watches (``metrics``), the same on every
engine: uncertain writes and the resources they hold, writes in flight, the webhook
backlog and the open leases, as they stand now."""

from __future__ import annotations

from undogate.jobs import ActionStatus, ChangeState, JobState
from undogate.ledger import Store, Transaction

from .conftest import AGENT, OWNER, begin, change, insert, job


def test_the_figures_count_what_is_open_now(store: Store) -> None:
    empty = store.read(lambda tx: tx.operating_figures())
    assert (empty.uncertain_changes, empty.quarantined_resources, empty.writes_in_flight) == (
        0,
        0,
        0,
    )
    assert (empty.webhooks_pending, empty.oldest_webhook_s) == (0, 0.0)
    insert(
        store,
        job("job_1", change(0), change(1, "ticket"), change(2, fields=("owner",))),
        job("job_2"),
    )

    def history(tx: Transaction) -> None:
        tx.set_job_state("job_1", JobState.NEEDS_REVIEW)
        for index in (0, 1, 2):  # three uncertain writes on two resources
            tx.finish_action(begin(tx, "job_1", index), ActionStatus.UNCERTAIN).value()
            tx.set_change_state("job_1", index, ChangeState.UNCERTAIN)
        begin(tx, "job_2")  # one in flight
        for n in range(2):
            tx.add_webhook(
                message_id=f"msg_{n}",
                endpoint="https://hooks.example.test/in",
                event="job.needs_review",
                owner_id=OWNER,
                job_id="job_1",
                agent_id=AGENT,
                payload="{}",
            )

    store.write(history)
    figures = store.read(lambda tx: tx.operating_figures())
    assert (figures.uncertain_changes, figures.quarantined_resources) == (3, 2)
    assert (figures.writes_in_flight, figures.webhooks_pending) == (1, 2)
    assert 0.0 <= figures.oldest_webhook_s < 60

    # Reconciled, delivered: no longer counted.
    def settle(tx: Transaction) -> None:
        for index in (0, 1, 2):
            tx.set_change_state("job_1", index, ChangeState.APPLIED)

    store.write(settle)
    after = store.read(lambda tx: tx.operating_figures())
    assert (after.uncertain_changes, after.quarantined_resources) == (0, 0)


def test_each_open_lease_shows_how_long_ago_it_was_renewed(store: Store) -> None:
    mine = store.read(lambda tx: tx.own_lease)
    leases = store.read(lambda tx: tx.operating_figures()).leases
    if mine is None:  # SQLite: one owner, no leases
        assert leases == ()
        return
    (lease,) = leases
    assert lease.id == mine and lease.holder.startswith("pid ")
    assert 0.0 <= lease.renewed_s_ago < 30
