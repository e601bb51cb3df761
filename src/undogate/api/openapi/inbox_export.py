"""The OpenAPI description of the review inbox, bulk reject and ``job_status``
(``api/inbox.py``), the audit export (``api/export.py``), the webhook outbox's messages
and a reject's reason."""

from __future__ import annotations

from ...jobs import JobState
from ...operations.inbox import PAGE, VIEWS
from ...webhooks.settings import EVENTS
from .paths import _JOB_ID, _op
from .schemas import _ANY_OBJ, _BOOL, _INT, _NUM, _STR, S, _nullable, _obj, _ref


def _query(name: str, description: str, schema: S | None = None, many: bool = False) -> S:
    value = schema or _STR
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": "array", "items": value} if many else value,
        **({"style": "form", "explode": True} if many else {}),
    }


_STATES: S = {"enum": [s.value for s in JobState]}

INBOX_EXPORT_SCHEMAS: S = {
    "WebhookMessages": _obj(
        ["messages"],
        {
            "messages": {
                "type": "array",
                "items": _obj(
                    ["id", "endpoint", "event", "job_id", "agent", "status", "attempts"],
                    {
                        "id": _STR,
                        "endpoint": _STR,
                        "event": {"type": "string", "enum": list(EVENTS)},
                        "job_id": _nullable("string"),
                        "agent": _STR,
                        "status": {"type": "string", "enum": ["pending", "delivered", "failed"]},
                        "attempts": _INT,
                        "last_response_status": _nullable("integer"),
                        "last_error": _nullable("string"),
                        "next_attempt_at": _nullable("number"),
                        "created_at": _NUM,
                        "updated_at": _NUM,
                        "review_path": _STR,
                    },
                ),
            }
        },
    ),
    "InboxJob": _obj(
        [
            "id",
            "agent",
            "state",
            "quarantined",
            "summary",
            "resources",
            "changes",
            "created_at",
            "updated_at",
            "review_path",
        ],
        {
            "id": _STR,
            "agent": _STR,
            "state": _STATES,
            "quarantined": _BOOL,
            "summary": _STR,
            "resources": {"type": "array", "items": _STR},
            "changes": {"type": "integer"},
            "created_at": _NUM,
            "updated_at": _NUM,
            "review_path": _STR,
        },
    ),
    "Inbox": _obj(
        ["jobs", "next_after", "counts"],
        {
            "jobs": {"type": "array", "items": _ref("InboxJob")},
            "next_after": _nullable("string"),
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
    ),
    "BulkRejectRequest": {
        "type": "object",
        "required": ["jobs"],
        "additionalProperties": False,
        "properties": {
            "jobs": {"type": "array", "items": _STR},
            "reason": {"type": "string", "maxLength": 2000},
        },
    },
    "BulkRejected": _obj(
        ["outcomes"],
        {
            "outcomes": {
                "type": "array",
                "items": _obj(
                    ["job", "rejected", "code", "message"],
                    {
                        "job": _STR,
                        "rejected": _BOOL,
                        "code": _nullable("string"),
                        "message": _nullable("string"),
                    },
                ),
            }
        },
    ),
    "RejectRequest": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"reason": {"type": "string", "maxLength": 2000}},
    },
    "ExportedEvents": _obj(
        ["events", "next_after"],
        {"events": {"type": "array", "items": _ANY_OBJ}, "next_after": _nullable("integer")},
    ),
    "ExportedJobs": _obj(
        ["jobs", "next_after"],
        {"jobs": {"type": "array", "items": _ANY_OBJ}, "next_after": _nullable("string")},
    ),
    "JobStatus": _obj(
        ["job_id", "state", "updated_at", "reason"],
        {"job_id": _STR, "state": _STATES, "updated_at": _NUM, "reason": _nullable("string")},
    ),
}

INBOX_EXPORT_PATHS: S = {
    "/api/v1/webhooks/messages": {
        "get": _op(
            "the newest 100 webhook messages about this key's jobs and agents (job_id "
            "null: about the agent), no values "
            "(operator, agents:read); status=pending|delivered|failed filters",
            "WebhookMessages",
            params=[{"name": "status", "in": "query", "required": False, "schema": _STR}],
        )
    },
    "/api/v1/inbox": {
        "get": _op(
            "the review inbox across the agents this key sees, newest first, a page at a "
            "time (operator, agents:read); counts per unresolved state",
            "Inbox",
            params=[
                _query("view", "which jobs", {"enum": list(VIEWS)}),
                _query("state", "only these states", _STATES, many=True),
                _query("agent", "only this agent's jobs"),
                _query("resource", "only jobs with a change on this resource"),
                _query("since", "prepared at or after: 30m, 12h, 7d ago, or ISO 8601"),
                _query("until", "prepared before: as since"),
                _query("id", "job ids starting with this"),
                _query("after", "the next_after of the page before (keyset)"),
                _query("limit", f"1 to {PAGE}", {"type": "string", "pattern": "^[0-9]{1,3}$"}),
            ],
        )
    },
    "/api/v1/inbox/reject": {
        "post": _op(
            "reject several prepared jobs at once, with one reason (operator, agents:write); "
            "a job that moved on is left as it is, with why",
            "BulkRejected",
            body="BulkRejectRequest",
        )
    },
    "/api/v1/jobs/{job_id}/status": {
        "get": _op(
            "the agent's own job: its state and a reviewer's reason, never values (agent "
            "token opted in to job_status)",
            "JobStatus",
            params=[_JOB_ID],
        )
    },
    "/api/v1/admin/events": {
        "get": _op(
            "the audit export: events at or after since, oldest first, a page at a time "
            "(keys:admin or the master key); never a key or a value",
            "ExportedEvents",
            params=[
                {**_query("since", "30m, 12h, 7d ago, or ISO 8601"), "required": True},
                _query("after", "the next_after of the page before"),
            ],
        )
    },
    "/api/v1/admin/jobs": {
        "get": _op(
            "the audit export: jobs that moved at or after since, in the order they were "
            "prepared (keys:admin or the master key); never a value",
            "ExportedJobs",
            params=[
                {**_query("since", "30m, 12h, 7d ago, or ISO 8601"), "required": True},
                _query("after", "the next_after of the page before"),
            ],
        )
    },
}


# A reject may carry the reviewer's reason.
REJECT_BODY: S = {
    "required": False,
    "content": {"application/json": {"schema": _ref("RejectRequest")}},
}

__all__ = ["INBOX_EXPORT_PATHS", "INBOX_EXPORT_SCHEMAS", "REJECT_BODY"]
