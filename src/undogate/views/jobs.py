"""The JSON-able views of jobs, previews, confirmations, events and listings.

What a change's values look like is its kind's (``Adapter.receipt_values``,
``preview_values``); everything around them is here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from ..adapters import adapter_for, text_diff
from ..config import Resource
from ..jobs import Action, Change, ChangeView, Confirmation, Job, Preview, UndoOffer
from ..jsonvalue import JsonNumber, JsonObject, JsonValue, from_python
from ..ledger import Event, JobSummary, OutboxMessage

REVIEW_LINE = (
    "A person reviews this job and confirms it before anything is written; "
    "nothing changes until then."
)
UNVERIFIED_NOTE = "supplied by the caller and not verified by undogate; it grants nothing"


def number(value: float | int) -> JsonNumber:
    return JsonNumber(repr(value) if isinstance(value, float) else str(value))


def review_path(job_id: str) -> str:
    return f"/jobs/{job_id}"


def agent_rewind_path(agent_id: str) -> str:
    """The agent's page where a person stops, resumes and rewinds it."""
    return f"/agents/{quote(agent_id, safe='')}/rewind"


def caller_supplied(value: str | None) -> JsonValue:
    """A caller-supplied label, marked as such (None stays None)."""
    if value is None:
        return None
    return {"value": value, "caller_supplied": True, "verified": False}


def _assertion(change: Change) -> JsonValue:
    return caller_supplied(change.assertion_kind.value if change.assertion_kind else None)


def change_receipt(change: Change) -> JsonObject:
    view: JsonObject = {
        "index": number(change.index),
        "resource": change.resource_id,
        "kind": change.kind,
        "state": change.state.value,
        "fields": list(change.fields),
        "assertion_kind": _assertion(change),
        "prepared_version": change.prepared_etag,
        "applied_version": change.applied_etag,
        "media_type": change.media_type,
    }
    view.update(adapter_for(change.kind).receipt_values(change))
    return view


def action_receipt(action: Action) -> JsonObject:
    return {
        "id": number(action.id),
        "change": number(action.change_index),
        "operation": action.operation.value,
        "status": action.status.value,
        "method": action.method,
        "url": action.url,
        "if_match": action.if_match,
        "response_status": number(action.response_status)
        if action.response_status is not None
        else None,
        "result_version": action.result_etag,
        "address": action.address,
        "detail": action.detail,
        "observation": action.observation.value if action.observation else None,
        "started_at": number(action.started_at),
        "finished_at": number(action.finished_at) if action.finished_at is not None else None,
    }


def job_receipt(job: Job) -> JsonObject:
    """The full receipt a reviewer sees: changes with before/after, actions, state."""
    return {
        "id": job.id,
        "agent": job.agent_id,
        "state": job.state.value,
        "summary": {"text": job.summary, "supplied_by": "agent", "inert": True},
        "attribution_label": caller_supplied(job.attribution_label),
        "session": caller_supplied(job.session),
        "idempotency_key": job.idempotency_key,
        "undo_started": job.undo_started,
        "invalidated_reason": job.invalidated_reason,
        "created_at": number(job.created_at),
        "updated_at": number(job.updated_at),
        "changes": [change_receipt(c) for c in job.changes],
        "actions": [action_receipt(a) for a in job.actions],
        "review_path": review_path(job.id),
        "notes": {"caller_supplied": UNVERIFIED_NOTE},
    }


def agent_receipt(job: Job, *, replay: bool = False) -> JsonObject:
    """What an agent sees of a job it prepared: no values, no URLs."""
    return {
        "job_id": job.id,
        "state": job.state.value,
        "replay": replay,
        "changes": [_agent_change(c) for c in job.changes],
        "review": REVIEW_LINE,
        "review_path": review_path(job.id),
    }


def _agent_change(change: Change) -> JsonObject:
    view: JsonObject = {
        "resource": change.resource_id,
        "kind": change.kind,
        "fields": list(change.fields),
    }
    if change.target is not None:
        view["record_id"] = change.target  # the record of a collection it touches
    return view


def undo_offer_view(offer: UndoOffer) -> JsonObject:
    """Which undos of a resource are offered: verified on a test copy and accepted."""
    return {
        "resource": offer.resource_id,
        "check_id": number(offer.check_id) if offer.check_id is not None else None,
        "checked_at": number(offer.checked_at) if offer.checked_at is not None else None,
        "verified": [*sorted(offer.verified)],
        "accepted": [*sorted(offer.accepted)],
        "accepted_at": number(offer.accepted_at) if offer.accepted_at is not None else None,
        "awaiting_acceptance": [*sorted(offer.awaiting_acceptance)],
        "passkey_challenge": offer.passkey_challenge,
        "passkey_expires_at_ms": (
            number(offer.passkey_expires_at_ms) if offer.passkey_expires_at_ms is not None else None
        ),
    }


def resource_view(resource: Resource) -> JsonObject:
    """A resource as its agent sees it: never the URL or the token variable."""
    return {
        "id": resource.id,
        "name": resource.name,
        "kind": resource.kind,
        "fields": list(adapter_for(resource.kind).agent_fields(resource)),
    }


def _change_preview(view: ChangeView, change: Change | None) -> JsonObject:
    out: JsonObject = {
        "index": number(view.index),
        "resource": view.resource_id,
        "kind": view.kind,
        "current_version": view.current_version,
        "moved_since_prepare": view.moved_since_prepare,
        "reversible": view.reversible,
        "irreversible": view.irreversible,
        "note": view.note,
        "observation": view.observation.value if view.observation else None,
        "assertion_kind": _assertion(change) if change else None,
    }
    out.update(adapter_for(view.kind).preview_values(view, change))
    return out


def preview_view(preview: Preview, job: Job | None, now: float) -> JsonObject:
    """Current vs planned per change, what is not reversible, and the token."""
    by_index = {c.index: c for c in job.changes} if job else {}
    changes: list[JsonValue] = [_change_preview(v, by_index.get(v.index)) for v in preview.changes]
    return {
        "job_id": preview.job_id,
        "operation": preview.operation.value,
        "preview_token": preview.token,
        "expires_at": number(preview.expires_at) if preview.expires_at is not None else None,
        "expires_in_s": number(max(0, round(preview.expires_at - now)))
        if preview.expires_at is not None
        else None,
        "changes": changes,
        "irreversible": [
            {"index": number(v.index), "resource": v.resource_id, "note": v.note}
            for v in preview.changes
            if not v.reversible
        ],
        "acknowledgement_required": preview.needs_acknowledgement,
        "blockers": [json_value(b) for b in preview.blockers],
        "writes_externally": preview.operation.value != "accept_observed",
        "passkey_challenge": preview.passkey_challenge,
    }


def _without_crlf(text: str) -> tuple[str, bool]:
    """A text whose every line ends CRLF (vCard, iCalendar) with LF endings instead, and
    whether it was one: its lines are shown with that said once, not with a marked
    carriage return on every line."""
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
    return (text.replace("\r\n", "\n") if crlf else text), crlf


def request_view(request: Mapping[str, Any]) -> JsonObject:
    """One planned request exactly as it will be sent (method, URL, headers, body), and
    the body as the lines it is made of: the CLI and the web preview both show this, so a
    PUT of a document reads as its text and a JSON Patch as its exact bytes. A PUT of a
    whole document that says what it replaces (``ConditionalWrite.replaces``) also
    carries ``body_diff``: its body as a line diff against the document as read. The
    credential is not in it: ``authentication`` says how it is added at send time (its
    scheme in words, the headers it adds), never with what; ``None``: no credential."""
    body = str(request.get("body", ""))
    text, crlf = _without_crlf(body)
    lines = text.split("\n") if text else []
    final_newline = len(lines) > 1 and lines[-1] == ""
    if final_newline:
        lines.pop()
    headers = request.get("headers") or {}
    view: JsonObject = {
        "method": str(request["method"]),
        "url": str(request["url"]),
        "headers": {str(k): str(v) for k, v in dict(headers).items()},
        "body": body,
        "body_bytes": number(len(body.encode("utf-8"))),
        "body_lines": list(lines),
        "missing_final_newline": "\n" in body and not final_newline,
        "authentication": _authentication(request.get("authentication")),
    }
    if crlf:
        view["crlf"] = True
    replaced = request.get("replaces")
    if isinstance(replaced, str):
        old, old_crlf = _without_crlf(replaced)
        # Line endings compared too: the texts are split alike only when both end CRLF.
        view["body_diff"] = text_diff(old, text) if old_crlf == crlf else text_diff(replaced, body)
    return view


def _authentication(described: Any) -> JsonObject | None:
    if not isinstance(described, Mapping):
        return None
    return {
        "scheme": str(described.get("scheme", "")),
        "summary": str(described.get("summary", "")),
        "adds": [str(name) for name in described.get("adds") or ()],
    }


def confirmation_view(confirmation: Confirmation) -> JsonObject:
    return {
        "dry_run": confirmation.dry_run,
        "repeated": confirmation.repeated,
        "requests": [request_view(r) for r in confirmation.requests],
        "job": job_receipt(confirmation.job),
    }


def event_view(event: Event) -> JsonObject:
    return {
        "id": number(event.id),
        "at": number(event.at),
        "actor": event.actor,
        "access_path": event.access_path,
        "operation": event.operation,
        "target": event.target,
        "from_state": event.from_state,
        "to_state": event.to_state,
        "detail": event.detail,
    }


def events_view(job_id: str, events: Sequence[Event]) -> JsonObject:
    return {"job_id": job_id, "events": [event_view(e) for e in events]}


def job_rows(agent_id: str, rows: Sequence[JobSummary]) -> JsonObject:
    """The job list: newest first, no values."""
    return {
        "agent": agent_id,
        "jobs": [
            {
                "id": job_id,
                "state": state,
                "summary": summary,
                "created_at": number(created),
                "changes": number(count),
                "review_path": review_path(job_id),
            }
            for job_id, state, summary, created, count in rows
        ],
    }


def webhook_messages_view(messages: Sequence[OutboxMessage]) -> JsonObject:
    """The webhook outbox as an operator sees it, newest first: each message's endpoint
    (its id, never its URL), event, job (None for a message about the agent), status
    and the last attempt's outcome; ``review_path`` is the job's page, or the agent's."""
    return {
        "messages": [
            {
                "id": m.id,
                "endpoint": m.endpoint,
                "event": m.event,
                "job_id": m.job_id,
                "agent": m.agent_id,
                "status": m.status,
                "attempts": number(m.attempts),
                "last_response_status": number(m.last_response_status)
                if m.last_response_status is not None
                else None,
                "last_error": m.last_error,
                "next_attempt_at": number(m.next_attempt_at) if m.status == "pending" else None,
                "created_at": number(m.created_at),
                "updated_at": number(m.updated_at),
                "review_path": review_path(m.job_id)
                if m.job_id is not None
                else agent_rewind_path(m.agent_id),
            }
            for m in messages
        ]
    }


def json_value(value: Any) -> JsonValue:
    """Plain Python data (engine dicts, documents) as lossless JSON values."""
    if isinstance(value, JsonNumber):
        return value
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return from_python(value)


__all__ = [
    "REVIEW_LINE",
    "action_receipt",
    "agent_receipt",
    "caller_supplied",
    "change_receipt",
    "confirmation_view",
    "event_view",
    "events_view",
    "job_receipt",
    "job_rows",
    "json_value",
    "number",
    "preview_view",
    "request_view",
    "resource_view",
    "review_path",
    "undo_offer_view",
    "webhook_messages_view",
]
