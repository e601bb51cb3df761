"""Reject a prepared job: it can never be applied after."""

from __future__ import annotations

import logging

from ..jobs import (
    Actor,
    Job,
    JobState,
    Transition,
    check_transition,
)
from ..ledger import Transaction
from .context import Context

log = logging.getLogger(__name__)


def reject_job(gw: Context, actor: Actor, job_id: str) -> Job:
    """Raises: NotFound, TransitionNotAllowed."""
    job = gw.get_job(actor.owner_id, job_id)
    check_transition(Transition.REJECT, job.state, JobState.REJECTED)

    def commit(tx: Transaction) -> None:
        current = tx.load_job(job_id, with_actions=False)
        assert current is not None
        check_transition(Transition.REJECT, current.state, JobState.REJECTED)
        tx.set_job_state(job_id, JobState.REJECTED)
        gw.notifier.job_moved(tx, current, JobState.REJECTED, previous=current.state)
        tx.add_event(
            job_id=job_id,
            actor=actor.label,
            access_path=actor.access_path,
            operation="reject",
            from_state=current.state.value,
            to_state=JobState.REJECTED.value,
        )

    gw.ledger.write(commit)
    return gw.get_job(actor.owner_id, job_id)
