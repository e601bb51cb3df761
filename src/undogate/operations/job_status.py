"""``job_status``: what an agent may learn of its own job after it prepared it: the state,
when it last moved, and the reason a reviewer gave for rejecting it. Never a value, never
who reviewed it, never another agent's job."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import NotFound
from ..jobs import JobState
from ..jsonvalue import JsonNumber, JsonObject
from .context import Context


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    state: JobState
    updated_at: float
    reason: str | None  # a reviewer's, when one rejected it and said why

    def to_json(self) -> JsonObject:
        return {
            "job_id": self.job_id,
            "state": self.state.value,
            "updated_at": JsonNumber(repr(self.updated_at)),
            "reason": self.reason,
        }


def job_status(gw: Context, owner_id: str, agent_id: str, job_id: str) -> JobStatus:
    """Raises: NotFound: no such job of this owner's ``agent_id`` (another agent's job
    gets the same answer as one that does not exist)."""
    job = gw.ledger.load_job(job_id, with_actions=False)
    if job is None or job.owner_id != owner_id or job.agent_id != agent_id:
        raise NotFound(f"no job {job_id!r}", job=job_id)
    reason = None
    if job.state is JobState.REJECTED:
        for event in reversed(gw.ledger.events(job.id)):
            if event.operation == "reject":
                found = event.detail.get("reason") if event.detail else None
                reason = found if isinstance(found, str) else None
                break
    return JobStatus(job.id, job.state, job.updated_at, reason)


__all__ = ["JobStatus", "job_status"]
