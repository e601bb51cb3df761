"""The webhook outbox's part of the store protocol (``store.Reader`` and
``store.Transaction`` include it; ``sql_outbox.OutboxVerbs`` speaks it on both engines).
A message is added in the write whose state change it announces, and delivered later
by ``webhooks.delivery`` under a claim, so several processes never send it at once.
"""

from __future__ import annotations

from typing import Literal, Protocol

from .records import OutboxMessage


class OutboxReader(Protocol):
    """What a read may ask of the outbox."""

    def due_webhooks(self, now: float, limit: int) -> list[OutboxMessage]:
        """Pending messages whose next attempt is due by ``now``, the longest waiting
        first."""
        ...

    def webhook_messages(
        self,
        owner_id: str,
        agents: tuple[str, ...],
        *,
        status: str | None = None,
        limit: int = 100,
    ) -> list[OutboxMessage]:
        """The messages about ``owner_id``'s jobs and agents, of ``agents`` (only ``status`` ones
        when given), newest first: the filter is in the query, so a key that sees some
        agents gets their newest ``limit``, not what is left of everyone's."""
        ...


class OutboxWriter(Protocol):
    """What a write may do to the outbox."""

    def add_webhook(
        self,
        *,
        message_id: str,
        endpoint: str,
        event: str,
        owner_id: str,
        job_id: str | None,
        agent_id: str,
        payload: str,
    ) -> None:
        """Add one message for one endpoint, due now, about ``owner_id``'s job
        ``job_id``, or about their agent ``agent_id`` when it names no job; call it in
        the write whose change it announces, so it exists exactly when that change
        does."""
        ...

    def claim_webhook(self, message_id: str, *, now: float, until: float) -> bool:
        """Hold a due pending message until ``until`` for one delivery attempt; False
        when it is no longer due (another process claimed it, or it was settled)."""
        ...

    def record_webhook_attempt(
        self,
        message_id: str,
        *,
        claimed_until: float,
        status: Literal["pending", "delivered", "failed"],
        next_attempt_at: float,
        response_status: int | None,
        error: str | None,
    ) -> bool:
        """Count one attempt and its outcome (``error``: a sentence with no secret), if
        the claim that made it (``claimed_until``, as ``claim_webhook`` set it) still
        holds; False when it ran out and another claim took the message over (that
        attempt records its own outcome)."""
        ...


__all__ = ["OutboxReader", "OutboxWriter"]
