"""Rewind plans' and stopped agents' part of the store protocol (``store.Reader`` and
``store.Transaction`` include it; ``sql_rewinds.RewindVerbs`` speaks it on both
engines; docs/rewind.md)."""

from __future__ import annotations

from typing import Protocol

from ..jsonvalue import JsonObject, JsonValue
from .records import StoredRewind


class RewindReader(Protocol):
    """What a read may ask of plans and stops."""

    def rewind_jobs(
        self,
        owner_id: str,
        agent_id: str,
        since: float,
        until: float | None,
        label: str | None,
        session: str | None,
    ) -> list[str]:
        """The ids of the owner's jobs of ``agent_id`` prepared in ``[since, until)``
        (with that attribution ``label``, of that ``session``, when given) that applied
        anything or may have (an uncertain change), newest first."""
        ...

    def load_rewind(self, rewind_id: str) -> StoredRewind | None:
        """A plan's row (in a write: held to the commit)."""
        ...

    def agent_stopped_at(self, owner_id: str, agent_id: str) -> float | None:
        """When the owner stopped the agent (None: it runs)."""
        ...


class RewindWriter(Protocol):
    """What a write may do to plans and stops."""

    def insert_rewind(self, rewind: StoredRewind) -> None:
        """Record a new plan. Plans are never deleted."""
        ...

    def save_rewind_preview(
        self,
        rewind_id: str,
        *,
        steps: list[JsonValue],
        token_hash: str,
        expires_at: float,
        versions: JsonObject,
    ) -> None:
        """Keep a plan's newest preview: its steps, its token (by hash, replacing any
        earlier one) and the versions it read. A plan that ran keeps what it had."""
        ...

    def claim_rewind(self, rewind_id: str, token_hash: str, *, skip_blocked: bool) -> None:
        """Consume the plan's preview token and mark it running, once.

        Raises:
            PreviewUsed: the plan ran already, or a newer preview replaced this token.
        """
        ...

    def finish_rewind(self, rewind_id: str, *, stopped: JsonObject | None) -> None:
        """Mark the plan finished (``stopped``: where and why a run stopped early)."""
        ...

    def set_agent_stopped(self, owner_id: str, agent_id: str, *, stopped: bool, by: str) -> bool:
        """Stop (or resume) the owner's agent; False when it already was."""
        ...


__all__ = ["RewindReader", "RewindWriter"]
