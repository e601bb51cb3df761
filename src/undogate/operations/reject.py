"""Reject a prepared job: it can never be applied after. The reviewer may say why: the
reason is stored in the ``reject`` event (the history shows it, and an agent opted in
to ``job_status`` reads it for its own job)."""

from __future__ import annotations

import logging

from ..errors import InvalidRequest
from ..jobs import (
    Actor,
    Job,
    JobState,
    Transition,
    check_transition,
)
from ..ledger import Transaction
from .context import Context
from .preview import require_start_of

log = logging.getLogger(__name__)

MAX_REASON_CHARS = 500


def check_reason(reason: str | None) -> str | None:
    """A reviewer's reason, trimmed (empty is none).

    Raises:
        InvalidRequest: longer than ``MAX_REASON_CHARS``, or with a control character
            other than a newline or tab.
    """
    if reason is None or not reason.strip():
        return None
    reason = reason.strip()
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidRequest(f"a reason is at most {MAX_REASON_CHARS} characters", field="reason")
    if any(ord(ch) < 0x20 and ch not in "\n\t" for ch in reason):
        raise InvalidRequest("a reason holds no control characters", field="reason")
    return reason


def reject_job(gw: Context, actor: Actor, job: Job, reason: str | None = None) -> Job:
    """Reject ``job`` (as its caller loaded it); returns it rejected.

    Raises: TransitionNotAllowed, InvalidRequest (the reason)."""
    reason = check_reason(reason)
    require_start_of(gw, Transition.REJECT, job)
    job_id = job.id

    def commit(tx: Transaction) -> Job:
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
            detail={"reason": reason} if reason is not None else None,
        )
        rejected = tx.load_job(job_id)
        assert rejected is not None
        return rejected

    return gw.ledger.write(commit)
