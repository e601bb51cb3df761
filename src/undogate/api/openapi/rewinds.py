"""The OpenAPI description of rewind plans and stopped agents (``api/rewinds.py``;
docs/rewind.md)."""

from __future__ import annotations

from ...operations.rewind_plan import StepVerdict
from .paths import _op
from .schemas import _ANY_OBJ, _BOOL, _CALLER_SUPPLIED, _NUM, _STR, S, _nullable, _obj

_WHEN = {
    "type": "string",
    "description": "a duration ago (30m, 2h, 7d) or an ISO 8601 date or time",
}
_REWIND_ID: S = {"name": "rewind_id", "in": "path", "required": True, "schema": _STR}
_AGENT_ID: S = {"name": "agent_id", "in": "path", "required": True, "schema": _STR}
_OUTCOME: S = {
    "type": ["string", "null"],
    "enum": ["done", "refused", "uncertain", "not_run", "skipped", None],
}

_STEP: S = _obj(
    ["step", "job", "change", "resource", "verdict", "outcome"],
    {
        "step": _NUM,
        "job": _STR,
        "change": _NUM,
        "resource": _STR,
        "verdict": {"enum": [v.value for v in StepVerdict]},
        "current": {
            "description": "blocked by what the resource will show when the step's turn "
            "comes: that (null: it will not exist); absent when something else blocks it"
        },
        "in_the_way": {
            **_nullable("string"),
            "description": "blocked: the job in the way (none: an edit outside the gateway)",
        },
        "message": _STR,
        "summary": _CALLER_SUPPLIED,
        "fields": {"type": "array", "items": _STR},
        "values": _ANY_OBJ,
        "outcome": _OUTCOME,
    },
)

_PLAN_MEMBERS: S = {
    "rewind_id": _STR,
    "agent": _STR,
    "since": _NUM,
    "until": _nullable("number"),
    "label": _CALLER_SUPPLIED,
    "session": _CALLER_SUPPLIED,
    "state": {"enum": ["planned", "running", "finished"]},
    "created_at": _NUM,
    "created_by": _STR,
    "confirmed_at": _nullable("number"),
    "skip_blocked": _BOOL,
    "counts": _ANY_OBJ,
    "steps": {"type": "array", "items": _STEP},
    "jobs": {"type": "object", "additionalProperties": _OUTCOME},
    "stopped": _nullable("object"),
    "review_url": _STR,
}
_PLAN_REQUIRED = ["rewind_id", "agent", "state", "steps", "jobs", "counts"]

REWIND_SCHEMAS: S = {
    "RewindRequest": _obj(
        ["agent", "since"],
        {
            "agent": _STR,
            "since": _WHEN,
            "until": _WHEN,
            "label": {"type": "string", "description": "only jobs with this attribution label"},
            "session": {"type": "string", "description": "only jobs of this agent session"},
        },
        additionalProperties=False,
    ),
    "RewindPlan": _obj(_PLAN_REQUIRED, _PLAN_MEMBERS),
    "RewindPreview": _obj(
        [*_PLAN_REQUIRED, "preview_token", "expires_at", "requests", "skip_blocked_leaves"],
        {
            **_PLAN_MEMBERS,
            "preview_token": _STR,
            "expires_at": _NUM,
            "expires_in_s": _NUM,
            "requests": {"type": "array", "items": _ANY_OBJ},
            "skip_blocked_leaves": {"type": "array", "items": _NUM},
            "passkey_challenge": _nullable("string"),
        },
    ),
    "RewindConfirm": _obj(
        ["preview_token"],
        {
            "preview_token": _STR,
            "skip_blocked": {
                "type": "boolean",
                "description": "undo everything else and leave the blocked steps; without "
                "it a blocked step stops the whole plan (rewind_blocked)",
            },
            "passkey_assertion": _ANY_OBJ,
        },
        additionalProperties=False,
    ),
    "AgentStop": _obj(
        ["agent", "stopped", "stopped_at"],
        {"agent": _STR, "stopped": _BOOL, "stopped_at": _nullable("number")},
    ),
}

REWIND_PATHS: S = {
    "/api/v1/rewinds": {
        "post": _op(
            "plan a rewind of an agent's work since a moment",
            "RewindPlan",
            status="201",
            body="RewindRequest",
        )
    },
    "/api/v1/rewinds/{rewind_id}": {
        "get": _op("a rewind plan and, once run, its report", "RewindPlan", params=[_REWIND_ID])
    },
    "/api/v1/rewinds/{rewind_id}/preview": {
        "post": _op(
            "preview a plan: each resource read once, every request, one token",
            "RewindPreview",
            params=[_REWIND_ID],
        )
    },
    "/api/v1/rewinds/{rewind_id}/confirm": {
        "post": _op(
            "confirm a plan's preview and run it",
            "RewindPlan",
            body="RewindConfirm",
            params=[_REWIND_ID],
        )
    },
    "/api/v1/agents/{agent_id}/stop": {
        "get": _op("whether an agent is stopped", "AgentStop", params=[_AGENT_ID]),
        "post": _op(
            "stop an agent: refuse its prepares, hold its waiting jobs",
            "AgentStop",
            params=[_AGENT_ID],
        ),
    },
    "/api/v1/agents/{agent_id}/resume": {
        "post": _op("resume a stopped agent", "AgentStop", params=[_AGENT_ID])
    },
}

__all__ = ["REWIND_PATHS", "REWIND_SCHEMAS"]
