"""Which change makes which webhook event, and the outbox rows it adds.

``Notifier.job_moved`` is called inside the very write that moves the job (as
``rewind_applied`` in the one that ends a plan, ``agent_stop_changed`` in the one that
stops or resumes an agent), so a message exists exactly when its change does: a
rolled-back change announces nothing, and a committed one is announced even if the
process dies the next instant. It only adds rows (no I/O): the delivery task sends them
later, so a slow or dead receiver never delays a write.

A payload carries ids, states and a review link, never a value: not the agent's summary,
not a field, not a document (a receiver is one more place a secret could leak to).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from ..jobs import STATES, TRANSITIONS, Actor, Job, JobState, Transition
from ..jsonvalue import JsonObject, JsonValue
from ..ledger import InboxQuery, StoredRewind, Transaction
from ..views import agent_rewind_path, review_path
from .settings import AGENT_RESUMED, AGENT_STOPPED, REWIND_APPLIED, WebhookSettings

#: The states a job waits for an apply's confirmation in: those a stop holds.
APPLY_WAITS = tuple(TRANSITIONS[Transition.START_APPLY])
#: How many of them an ``agent.*`` message names (the newest): the rest are on the agent's
#: page, and ``more_waiting_jobs`` says there are some.
WAITING_NAMED = 100


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
        if event is not None and self._wanted(event):
            payload = self.payload(job, event, state, previous)
            self._add(tx, event, payload, job.owner_id, job.id, job.agent_id)

    def rewind_applied(
        self, tx: Transaction, rewind: StoredRewind, filed_under: str, report: JsonObject
    ) -> None:
        """Announce that a rewind plan ran (``rewind.applied``), inside the write that
        records its end: its id, its agent, each job's outcome, where it stopped early.
        The message is filed under ``filed_under``, the plan's newest job, which the
        operators' listing links it to."""
        if not self._wanted(REWIND_APPLIED):
            return
        body = {
            "type": REWIND_APPLIED,
            "timestamp": self._timestamp(),
            "data": {
                "rewind_id": rewind.id,
                "owner_id": rewind.owner_id,
                "agent_id": rewind.agent_id,
                "jobs": report.get("jobs", {}),
                "stopped": _where_stopped(report.get("stopped")),
                "review_url": self.public_url + f"/rewinds/{rewind.id}",
            },
        }
        self._add(tx, REWIND_APPLIED, _encoded(body), rewind.owner_id, filed_under, rewind.agent_id)

    def agent_stop_changed(
        self, tx: Transaction, actor: Actor, agent_id: str, *, stopped: bool, at: float
    ) -> None:
        """Announce that ``actor`` stopped (``agent.stopped``) or resumed
        (``agent.resumed``) their owner's agent at ``at``, inside the write that does it:
        who acted (as the chain names them, and their key's label, never a key) and the
        owner's jobs of that agent waiting for an apply, which the stop holds or the
        resume releases (the newest ``WAITING_NAMED``, through the inbox's index)."""
        event = AGENT_STOPPED if stopped else AGENT_RESUMED
        if not self._wanted(event):
            return
        waiting = tx.inbox(
            InboxQuery(
                owner_id=actor.owner_id,
                agents=(agent_id,),
                states=APPLY_WAITS,
                limit=WAITING_NAMED + 1,
            )
        )
        credential = tx.credential(actor.id)
        body = {
            "type": event,
            "timestamp": self._timestamp(at),
            "data": {
                "owner_id": actor.owner_id,
                "agent_id": agent_id,
                "stopped": stopped,
                "actor": actor.label,
                "actor_label": credential.label if credential is not None else None,
                "waiting_jobs": [row.id for row in waiting[:WAITING_NAMED]],
                "more_waiting_jobs": len(waiting) > WAITING_NAMED,
                "review_url": self.public_url + agent_rewind_path(agent_id),
            },
        }
        self._add(tx, event, _encoded(body), actor.owner_id, None, agent_id)

    def _wanted(self, event: str) -> bool:
        """Whether any endpoint subscribes to ``event`` (else nothing is built)."""
        return any(e.wants(event) for e in self.settings.endpoints)

    def _add(
        self,
        tx: Transaction,
        event: str,
        payload: str,
        owner_id: str,
        job_id: str | None,
        agent_id: str,
    ) -> None:
        """One outbox row per endpoint subscribed to ``event``, each its own message."""
        for endpoint in self.settings.endpoints:
            if endpoint.wants(event):
                tx.add_webhook(
                    message_id="msg_" + secrets.token_hex(12),
                    endpoint=endpoint.id,
                    event=event,
                    owner_id=owner_id,
                    job_id=job_id,
                    agent_id=agent_id,
                    payload=payload,
                )

    def _timestamp(self, at: float | None = None) -> str:
        when = self.clock() if at is None else at
        return datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds")

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
        return _encoded(body)


def _where_stopped(stopped: JsonValue) -> JsonValue:
    """Where a plan stopped, structured only (its step and stable code): its message can
    quote what a server said (a parse error quoting a line of a document), which is
    never a payload's to carry; the review link leads to the words."""
    if not isinstance(stopped, dict):
        return None
    return {k: stopped[k] for k in ("step", "code") if k in stopped}


def _encoded(body: Mapping[str, object]) -> str:
    """The exact bytes every attempt sends (the signature covers them)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


__all__ = ["APPLY_WAITS", "WAITING_NAMED", "Notifier", "event_for"]
