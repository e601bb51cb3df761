"""The schemas of the OpenAPI document that no kind owns: errors, receipts, previews,
confirmations, events, endpoint checks, keys; and the helpers the other parts build
with. A change's own members and the kinds' names are generated (``kinds``)."""

from __future__ import annotations

from typing import Any

from . import undo_offers

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
            "session": {"type": "string", "maxLength": 1000},
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
            "session": _CALLER_SUPPLIED,
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
                        **undo_offers.PREVIEW_CHANGE_MEMBERS,
                    },
                ),
            },
            **undo_offers.PREVIEW_MEMBERS,
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
            **undo_offers.CONFIRM_MEMBERS,
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
            "mode": {
                **_nullable("string"),
                "description": "how the kind writes the resource, where it can write in "
                "more than one way (a JSON kind's dialect)",
            },
            "stale_statuses": {
                "type": "array",
                "items": _INT,
                "description": "the statuses with which the endpoint refused a stale write, "
                "changing nothing (a passing check only): what lets such an answer count "
                "as a refusal",
            },
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
    "PasskeyEnrolmentRequest": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"owner": _STR, "replace": _BOOL},
    },
    "PasskeyEnrolment": _obj(
        ["code", "owner_id", "expires_at", "revoked"],
        {
            "code": _STR,
            "owner_id": _STR,
            "expires_at": _NUM,
            "revoked": {"type": "array", "items": _STR},
        },
    ),
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
