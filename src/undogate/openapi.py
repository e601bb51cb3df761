"""The OpenAPI 3.1 document of the HTTP API, served at ``/openapi.json``.

Written by hand because bodies are parsed and rendered losslessly (numbers keep their
exact text), which a model-driven generator would not describe; ``tests/test_api_schema``
checks the running app against it with schemathesis.
"""

from __future__ import annotations

from typing import Any

from . import __version__
from . import openapi_collections as collections
from .adapters import kind_names

S = dict[str, Any]


def _nullable(*types: str) -> S:
    return {"type": [*types, "null"]}


_STR: S = {"type": "string"}
_NUM: S = {"type": "number"}
_INT: S = {"type": "integer"}
_BOOL: S = {"type": "boolean"}
_ANY_OBJ: S = {"type": "object"}
_CALLER_SUPPLIED: S = {
    "oneOf": [
        {"type": "null"},
        {
            "type": "object",
            "required": ["value", "caller_supplied", "verified"],
            "properties": {
                "value": _STR,
                "caller_supplied": {"const": True},
                "verified": {"const": False},
            },
        },
    ]
}


def _obj(required: list[str], props: S, **extra: Any) -> S:
    return {"type": "object", "required": required, "properties": props, **extra}


def _ref(name: str) -> S:
    return {"$ref": f"#/components/schemas/{name}"}


_ROW: S = _obj(["field", "changes"], {"field": _STR, "changes": _BOOL})
_DIFF_LINE: S = _obj(
    ["op", "line"],
    {
        "op": {"enum": ["@", " ", "-", "+"]},
        "line": _STR,
        "old": _nullable("integer"),
        "new": _nullable("integer"),
        "newline": _BOOL,
    },
)

SCHEMAS: S = {
    "Error": _obj(
        ["error"],
        {
            "error": _obj(
                ["code", "message", "details"],
                {"code": _STR, "message": _STR, "details": _ANY_OBJ},
            )
        },
    ),
    "Health": _obj(["status"], {"status": {"const": "ok"}}),
    "AgentInfo": _obj(
        ["agent", "tools"],
        {
            "agent": _STR,
            "tools": {"type": "array", "items": {"enum": ["list_resources", "prepare_changes"]}},
        },
    ),
    "ResourceList": _obj(
        ["agent", "resources"],
        {
            "agent": _STR,
            "resources": {
                "type": "array",
                "items": _obj(
                    ["id", "name", "kind", "fields"],
                    {
                        "id": _STR,
                        "name": _STR,
                        "kind": {"enum": list(kind_names())},
                        "fields": {"type": "array", "items": _STR},
                    },
                ),
            },
        },
    ),
    "ChangeRequest": {
        "type": "object",
        "required": ["resource"],
        "additionalProperties": False,
        "properties": {
            "resource": {"type": "string", "maxLength": 64},
            "set": {"type": "object", "description": "top-level field values to set"},
            "remove": {"type": "array", "items": _STR},
            "text": _STR,
            "expected_version": {"type": "string", "maxLength": 300},
            "assertion_kind": {"enum": ["observed", "inferred", "imported", "supplied"]},
            **collections.CHANGE_MEMBERS,
        },
    },
    "PrepareRequest": {
        "type": "object",
        "required": ["summary", "changes"],
        "additionalProperties": False,
        "properties": {
            "summary": {"type": "string", "maxLength": 10000},
            "changes": {
                "type": "array",
                "minItems": 1,
                "maxItems": 64,
                "items": _ref("ChangeRequest"),
            },
            "idempotency_key": {"type": "string", "maxLength": 1000},
            "attribution_label": {"type": "string", "maxLength": 1000},
        },
    },
    "AgentReceipt": _obj(
        ["job_id", "state", "replay", "changes", "review", "review_path"],
        {
            "job_id": _STR,
            "state": _STR,
            "replay": _BOOL,
            "changes": {
                "type": "array",
                "items": _obj(
                    ["resource", "kind", "fields"],
                    {"resource": _STR, "kind": _STR, "fields": {"type": "array", "items": _STR}},
                ),
            },
            "review": _STR,
            "review_path": _STR,
        },
    ),
    "JobList": _obj(
        ["agent", "jobs"],
        {
            "agent": _STR,
            "jobs": {
                "type": "array",
                "items": _obj(
                    ["id", "state", "summary", "created_at", "changes", "review_path"],
                    {
                        "id": _STR,
                        "state": _STR,
                        "summary": _STR,
                        "created_at": _NUM,
                        "changes": _INT,
                        "review_path": _STR,
                    },
                ),
            },
        },
    ),
    "Change": _obj(
        ["index", "resource", "kind", "state", "fields", "assertion_kind", "prepared_version"],
        {
            "index": _INT,
            "resource": _STR,
            "kind": _STR,
            "state": _STR,
            "fields": {"type": "array", "items": _STR},
            "assertion_kind": _CALLER_SUPPLIED,
            "prepared_version": _STR,
            "applied_version": _nullable("string"),
            "media_type": _STR,
            "before": _nullable("object"),
            "after": _nullable("object"),
            "rows": {"type": "array", "items": _ROW},
            "before_text": _nullable("string"),
            "after_text": _nullable("string"),
            "diff": {"type": "array", "items": _DIFF_LINE},
        },
    ),
    "Action": _obj(
        ["id", "change", "operation", "status", "method", "url"],
        {
            "id": _INT,
            "change": _INT,
            "operation": _STR,
            "status": _STR,
            "method": _STR,
            "url": _STR,
            "if_match": _nullable("string"),
            "response_status": _nullable("integer"),
            "result_version": _nullable("string"),
            "address": _nullable("string"),
            "detail": _nullable("string"),
            "observation": _nullable("string"),
            "started_at": _NUM,
            "finished_at": _nullable("number"),
        },
    ),
    "Receipt": _obj(
        ["id", "agent", "state", "summary", "attribution_label", "changes", "actions"],
        {
            "id": _STR,
            "agent": _STR,
            "state": _STR,
            "summary": _obj(
                ["text", "supplied_by", "inert"],
                {"text": _STR, "supplied_by": {"const": "agent"}, "inert": {"const": True}},
            ),
            "attribution_label": _CALLER_SUPPLIED,
            "idempotency_key": _nullable("string"),
            "undo_started": _BOOL,
            "invalidated_reason": _nullable("string"),
            "created_at": _NUM,
            "updated_at": _NUM,
            "changes": {"type": "array", "items": _ref("Change")},
            "actions": {"type": "array", "items": _ref("Action")},
            "review_path": _STR,
        },
    ),
    "PreviewRequest": {
        "type": "object",
        "required": ["operation"],
        "additionalProperties": False,
        "properties": {"operation": {"enum": ["apply", "undo", "accept_observed"]}},
    },
    "Preview": _obj(
        ["job_id", "operation", "preview_token", "expires_at", "changes", "irreversible"],
        {
            "job_id": _STR,
            "operation": _STR,
            "preview_token": _STR,  # a blocked preview is a 409 error instead
            "expires_at": _NUM,
            "expires_in_s": _NUM,
            "changes": {
                "type": "array",
                "items": _obj(
                    ["index", "resource", "kind", "current_version", "reversible"],
                    {
                        "index": _INT,
                        "resource": _STR,
                        "kind": _STR,
                        "current_version": _STR,
                        "moved_since_prepare": _BOOL,
                        "reversible": _BOOL,
                        "note": _nullable("string"),
                        "observation": _nullable("string"),
                        "current": _nullable("object"),
                        "planned": _nullable("object"),
                        "rows": {"type": "array", "items": _ROW},
                        **collections.PREVIEW_CHANGE_MEMBERS,
                    },
                ),
            },
            **collections.PREVIEW_MEMBERS,
            "irreversible": {"type": "array", "items": _ANY_OBJ},
            "blockers": {"type": "array", "items": _ANY_OBJ},
            "writes_externally": _BOOL,
            # base64url of the preview digest a passkey must sign (docs/proof.md)
            "passkey_challenge": _nullable("string"),
        },
    ),
    "ConfirmRequest": {
        "type": "object",
        "required": ["preview_token"],
        "additionalProperties": False,
        "properties": {
            "preview_token": {"type": "string", "maxLength": 200},
            "dry_run": _BOOL,
            **collections.CONFIRM_MEMBERS,
            # the PublicKeyCredential JSON of navigator.credentials.get over the
            # preview's passkey_challenge, when the preview needs one
            "passkey_assertion": _ANY_OBJ,
        },
    },
    "Confirmation": _obj(
        ["dry_run", "repeated", "requests", "job"],
        {
            "dry_run": _BOOL,
            "repeated": _BOOL,
            "requests": {"type": "array", "items": _ANY_OBJ},
            "job": _ref("Receipt"),
        },
    ),
    "Events": _obj(
        ["job_id", "events"],
        {
            "job_id": _STR,
            "events": {
                "type": "array",
                "items": _obj(
                    ["id", "at", "actor", "access_path", "operation"],
                    {
                        "id": _INT,
                        "at": _NUM,
                        "actor": _STR,
                        "access_path": _STR,
                        "operation": _STR,
                        "target": _nullable("string"),
                        "from_state": _nullable("string"),
                        "to_state": _nullable("string"),
                        "detail": _nullable("object"),
                    },
                ),
            },
        },
    ),
    "EndpointCheckRequest": {
        "type": "object",
        "required": ["resource"],
        "additionalProperties": False,
        "properties": {
            "resource": {
                "type": "string",
                "maxLength": 64,
                "description": "the id of a resource declared with test_copy_of",
            }
        },
    },
    "EndpointCheck": _obj(
        ["check_id", "resource", "test_copy", "passed", "steps"],
        {
            "check_id": _INT,
            "resource": _STR,
            "test_copy": _STR,
            "passed": _BOOL,
            "steps": {
                "type": "array",
                "items": _obj(
                    ["name", "title", "passed", "summary", "evidence", "message"],
                    {
                        "name": _STR,
                        "title": _STR,
                        "passed": _BOOL,
                        "summary": _STR,
                        "evidence": _ANY_OBJ,
                        "message": {
                            **_nullable("string"),
                            "description": "for the operator only (never in the ledger): "
                            "e.g. exactly what to restore by hand",
                        },
                    },
                ),
            },
        },
    ),
    "Credential": _obj(
        ["id", "kind", "owner_id", "scopes", "label", "created_at", "revoked"],
        {
            "id": _STR,
            "kind": {"enum": ["operator", "agent"]},
            "owner_id": _STR,
            "agent_id": _nullable("string"),
            "scopes": {"type": "array", "items": _STR},
            "agents": _nullable("array"),
            "label": _STR,
            "created_at": _NUM,
            "revoked": _BOOL,
            "revoked_at": _nullable("number"),
        },
    ),
    "CredentialList": _obj(
        ["credentials"], {"credentials": {"type": "array", "items": _ref("Credential")}}
    ),
    "KeyRequest": {
        "type": "object",
        "required": ["kind"],
        "additionalProperties": False,
        "properties": {
            "kind": {"enum": ["operator", "agent"]},
            "label": {"type": "string", "maxLength": 200},
            "scopes": {
                "type": "array",
                "items": {"enum": ["agents:read", "agents:write", "keys:admin"]},
            },
            "agents": {"type": "array", "items": _STR},
            "agent": {"type": "string", "maxLength": 64},
            "owner": {
                "type": "string",
                "maxLength": 64,
                "description": "default: the operator asking, or the only operator key",
            },
        },
    },
    "IssuedKey": _obj(
        ["key", "credential", "note"],
        {"key": _STR, "credential": _ref("Credential"), "note": _STR},
    ),
    "RevokeRequest": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"force": _BOOL},
    },
    "Revocation": _obj(
        ["credential", "also_revoked", "unresolved_jobs"],
        {
            "credential": _ref("Credential"),
            "also_revoked": {"type": "array", "items": _STR},
            "unresolved_jobs": _INT,
        },
    ),
}


def _json(schema: str) -> S:
    return {"content": {"application/json": {"schema": _ref(schema)}}}


def _op(
    summary: str,
    ok: str,
    *,
    status: str = "200",
    body: str | None = None,
    body_required: bool = True,
    secured: bool = True,
    params: list[S] | None = None,
    extra_ok: dict[str, str] | None = None,
) -> S:
    responses: S = {status: {"description": "success", **_json(ok)}}
    for code, schema in (extra_ok or {}).items():
        responses[code] = {"description": "success", **_json(schema)}
    responses["default"] = {"description": "an error, with a stable code", **_json("Error")}
    op: S = {"summary": summary, "responses": responses}
    if not secured:
        op["security"] = []
    if body:
        op["requestBody"] = {"required": body_required, **_json(body)}
    if params:
        op["parameters"] = params
    return op


_JOB_ID: S = {"name": "job_id", "in": "path", "required": True, "schema": _STR}


def _too_many(op: S) -> S:
    """A prepare over the agent's fair share (docs/limits.md): 429 ``quota_exceeded``, or
    ``rate_limited`` with ``Retry-After``."""
    op["responses"]["429"] = {
        "description": "quota_exceeded (unresolved jobs) or rate_limited (prepares a minute)",
        "headers": {
            "Retry-After": {
                "description": "rate_limited only: whole seconds until a prepare is admitted",
                "schema": _INT,
            }
        },
        **_json("Error"),
    }
    return op


def openapi_document() -> S:
    """The OpenAPI 3.1 description of every route ``api.api_routes`` serves."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "undogate",
            "version": __version__,
            "description": "Agents prepare changes, people confirm them, every write has a "
            "receipt. JSON numbers are kept as exact text in both directions.",
        },
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {**SCHEMAS, **collections.SCHEMAS},
        },
        "paths": {
            "/healthz": {"get": _op("liveness", "Health", secured=False)},
            "/api/v1/agent": {
                "get": _op("this agent token's agent and its opted-in tools", "AgentInfo")
            },
            "/api/v1/resources": {
                "get": _op("the resources this agent token's agent is opted in to", "ResourceList")
            },
            "/api/v1/jobs": {
                "post": _too_many(
                    _op(
                        "prepare a job (agent token)",
                        "AgentReceipt",
                        status="201",
                        body="PrepareRequest",
                        extra_ok={"200": "AgentReceipt"},
                    )
                ),
                "get": _op(
                    "the newest 100 jobs of an agent, no values (operator, agents:read); "
                    "not_found for an agent not in the config",
                    "JobList",
                    params=[{"name": "agent", "in": "query", "required": True, "schema": _STR}],
                ),
            },
            "/api/v1/jobs/{job_id}": {
                "get": _op("the receipt (operator, agents:read)", "Receipt", params=[_JOB_ID])
            },
            "/api/v1/jobs/{job_id}/previews": {
                "post": _op(
                    "preview apply, undo or accept_observed (operator, agents:write)",
                    "Preview",
                    body="PreviewRequest",
                    params=[_JOB_ID],
                )
            },
            "/api/v1/jobs/{job_id}/confirm": {
                "post": _op(
                    "confirm a preview (operator, agents:write)",
                    "Confirmation",
                    body="ConfirmRequest",
                    params=[_JOB_ID],
                )
            },
            "/api/v1/jobs/{job_id}/reject": {
                "post": _op(
                    "reject a prepared job (operator, agents:write)",
                    "Receipt",
                    params=[_JOB_ID],
                )
            },
            "/api/v1/jobs/{job_id}/events": {
                "get": _op("the job's append-only history (operator)", "Events", params=[_JOB_ID])
            },
            "/api/v1/endpoint-checks": {
                "post": _op(
                    "run the endpoint check (SPEC §11) on a test copy while serving "
                    "(operator, agents:write); passed says the verdict, the evidence goes "
                    "to the ledger",
                    "EndpointCheck",
                    body="EndpointCheckRequest",
                )
            },
            "/api/v1/resources/{resource_id}/undo-offer": {
                "get": _op(
                    "which undos of creates and deletes a test copy verified and a reviewer "
                    "accepted (operator, agents:read)",
                    "UndoOffer",
                    params=[collections.RESOURCE_ID],
                )
            },
            "/api/v1/resources/{resource_id}/undo-acceptance": {
                "post": _op(
                    "accept, once, the undos the latest endpoint check verified (operator, "
                    "agents:write); undo_not_verified when none is, passkey_required when "
                    "the resource requires a passkey and no assertion came",
                    "UndoOffer",
                    body="UndoAcceptanceRequest",
                    body_required=False,
                    params=[collections.RESOURCE_ID],
                )
            },
            "/api/v1/admin/keys": {
                "get": _op("list credentials (master key or keys:admin)", "CredentialList"),
                "post": _op(
                    "create an operator key or agent token (master key or keys:admin); shown once",
                    "IssuedKey",
                    status="201",
                    body="KeyRequest",
                ),
            },
            "/api/v1/admin/keys/{credential_id}/revoke": {
                "post": _op(
                    "revoke a credential (master key or keys:admin); force is needed for the "
                    "only owner of unresolved jobs",
                    "Revocation",
                    body="RevokeRequest",
                    body_required=False,
                    params=[
                        {"name": "credential_id", "in": "path", "required": True, "schema": _STR}
                    ],
                )
            },
        },
    }
