"""Stopping an agent (docs/rewind.md): one act that refuses the agent's new prepares
(``agent_stopped``) and holds its waiting jobs from confirmation until a person resumes
it. Per owner: stopping one owner's agent leaves the same agent of another owner alone.
Both acts are events in the chain (``agent_stopped``, ``agent_resumed``) and webhooks
(``agent.stopped``, ``agent.resumed``), added in the write that does them.
"""

from __future__ import annotations

from ..errors import AgentStopped
from ..jobs import Actor
from ..ledger import Reader, Transaction
from ..views import agent_rewind_path
from .context import Context

NOTHING_PREPARED = "nothing was prepared"
HELD = "its waiting jobs are held from confirmation (undoing its work is not)"


def stopped_at(gw: Context, owner_id: str, agent_id: str) -> float | None:
    return gw.ledger.read(lambda tx: tx.agent_stopped_at(owner_id, agent_id))


def refuse_if_stopped(tx: Reader, owner_id: str, agent_id: str, doing: str) -> None:
    """Raises: AgentStopped, when the owner stopped the agent: the sentence says what
    the stop did (``doing``) and every way a person resumes it."""
    refuse_stopped(tx.agent_stopped_at(owner_id, agent_id), agent_id, doing)


def refuse_stopped(stopped: float | None, agent_id: str, doing: str) -> None:
    """``refuse_if_stopped`` with the stop already read (``stopped``: when, or None)."""
    if stopped is not None:
        raise AgentStopped(
            f"agent {agent_id} was stopped by a person: {doing}; it stays stopped until "
            f"a person resumes it (undogate agents resume {agent_id}, "
            f"POST /api/v1/agents/{agent_id}/resume, or {agent_rewind_path(agent_id)} "
            "in the review UI)",
            agent=agent_id,
        )


def set_stopped(gw: Context, actor: Actor, agent_id: str, stopped: bool) -> float | None:
    """Stop (or resume) the agent for the actor's owner; returns when it was stopped
    (None: it runs). Doing it twice changes nothing and records nothing."""

    def commit(tx: Transaction) -> float | None:
        changed = tx.set_agent_stopped(actor.owner_id, agent_id, stopped=stopped, by=actor.label)
        at = tx.agent_stopped_at(actor.owner_id, agent_id)
        if changed:
            gw.notifier.agent_stop_changed(
                tx, actor, agent_id, stopped=stopped, at=gw.clock() if at is None else at
            )
            tx.add_event(
                job_id=None,
                actor=actor.label,
                access_path=actor.access_path,
                operation="agent_stopped" if stopped else "agent_resumed",
                target=agent_id,
            )
        return at

    return gw.ledger.write(commit)


__all__ = [
    "HELD",
    "NOTHING_PREPARED",
    "refuse_if_stopped",
    "refuse_stopped",
    "set_stopped",
    "stopped_at",
]
