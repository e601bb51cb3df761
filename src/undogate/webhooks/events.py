"""Which job state change makes which webhook event, and the outbox rows it adds.

``Notifier.job_moved`` is called inside the very write that moves the job, so a message
exists exactly when its state change does: a rolled-back change announces nothing, and a
committed one is announced even if the process dies the next instant. It only adds rows
(no I/O): the delivery task sends them later, so a slow or dead receiver never delays a
write.

A payload carries ids, states and a review link, never a value: not the agent's summary,
not a field, not a document (a receiver is one more place a secret could leak to).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime

from ..jobs import STATES, Job, JobState
from ..jsonvalue import JsonObject
from ..ledger import StoredRewind, Transaction
from ..views import review_path
from .settings import REWIND_APPLIED, WebhookSettings


def event_for(state: JobState, previous: JobState | None) -> str | None:
    """The event a move to ``state`` from ``previous`` announces, if any: the state's
    (``jobs.STATES``), unless the move only undid a start that changed nothing."""
    if state is JobState.PREPARED and previous is not None:
        return None  # an apply refused before any write also lands in prepared
    if previous is JobState.UNDOING and STATES[state].webhook == STATES[JobState.APPLIED].webhook:
        return None  # an undo refused before anything was undone: nothing new applied
    return STATES[state].webhook


class Notifier:
    """Adds the outbox rows for a job's state change, one per subscribed endpoint."""

    def __init__(
        self,
        settings: WebhookSettings,
        public_url: str | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.public_url = (public_url or "").rstrip("/")
        self.clock = clock

    def job_moved(
        self, tx: Transaction, job: Job, state: JobState, *, previous: JobState | None
    ) -> None:
        """Announce that ``job`` moved from ``previous`` (None: it was just prepared) to
        ``state``, inside the write ``tx`` that moves it."""
        event = event_for(state, previous)
        if event is None:
            return
        endpoints = [e for e in self.settings.endpoints if e.wants(event)]
        if not endpoints:
            return
        payload = self.payload(job, event, state, previous)
        for endpoint in endpoints:
            tx.add_webhook(
                message_id="msg_" + secrets.token_hex(12),
                endpoint=endpoint.id,
                event=event,
                job_id=job.id,
                agent_id=job.agent_id,
                payload=payload,
            )

    def rewind_applied(
        self, tx: Transaction, rewind: StoredRewind, filed_under: str, report: JsonObject
    ) -> None:
        """Announce that a rewind plan ran (``rewind.applied``), inside the write that
        records its end: its id, its agent, each job's outcome, where it stopped early.
        The message is filed under ``filed_under``, the plan's newest job (the outbox
        lists an owner's messages by their jobs)."""
        endpoints = [e for e in self.settings.endpoints if e.wants(REWIND_APPLIED)]
        if not endpoints:
            return
        body = {
            "type": REWIND_APPLIED,
            "timestamp": self._timestamp(),
            "data": {
                "rewind_id": rewind.id,
                "owner_id": rewind.owner_id,
                "agent_id": rewind.agent_id,
                "jobs": report.get("jobs", {}),
                "stopped": report.get("stopped"),
                "review_url": self.public_url + f"/rewinds/{rewind.id}",
            },
        }
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        for endpoint in endpoints:
            tx.add_webhook(
                message_id="msg_" + secrets.token_hex(12),
                endpoint=endpoint.id,
                event=REWIND_APPLIED,
                job_id=filed_under,
                agent_id=rewind.agent_id,
                payload=payload,
            )

    def _timestamp(self) -> str:
        return datetime.fromtimestamp(self.clock(), UTC).isoformat(timespec="milliseconds")

    def payload(self, job: Job, event: str, state: JobState, previous: JobState | None) -> str:
        """The exact body every attempt sends (the signature covers these bytes)."""
        resources = list(dict.fromkeys(ch.resource_id for ch in job.changes))
        body = {
            "type": event,
            "timestamp": self._timestamp(),
            "data": {
                "job_id": job.id,
                "state": state.value,
                "previous_state": previous.value if previous is not None else None,
                "owner_id": job.owner_id,
                "agent_id": job.agent_id,
                "resources": resources,
                "review_url": self.public_url + review_path(job.id),
            },
        }
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


__all__ = ["Notifier", "event_for"]
