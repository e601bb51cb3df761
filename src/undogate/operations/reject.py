"""Reject a prepared job: it can never be applied after."""

from __future__ import annotations

import logging
import sqlite3

from ..jobs import (
    Actor,
    Job,
    JobState,
    check_transition,
)
from ..ledger import Ledger
from .context import Context

log = logging.getLogger(__name__)


def reject_job(gw: Context, actor: Actor, job_id: str) -> Job:
    """Raises: NotFound, TransitionNotAllowed."""
    job = gw.get_job(actor.owner_id, job_id)
    check_transition("reject", job.state, JobState.REJECTED)

    def commit(c: sqlite3.Connection) -> None:
        current = Ledger.load_job_in(c, job_id, with_actions=False)
        assert current is not None
        check_transition("reject", current.state, JobState.REJECTED)
        Ledger.set_job_state(c, job_id, JobState.REJECTED)
        Ledger.add_event(
            c,
            job_id=job_id,
            actor=actor.label,
            access_path=actor.access_path,
            operation="reject",
            from_state=current.state.value,
            to_state=JobState.REJECTED.value,
        )

    gw.ledger.write(commit)
    return gw.get_job(actor.owner_id, job_id)
