"""The OpenAPI description of the routes no kind owns: health, the agent's resources
and jobs, receipts, previews and confirmations, endpoint checks, undo offers and keys
(``api.api_routes``)."""

from __future__ import annotations

from .schemas import _INT, _STR, S, _ref
from .undo_offers import RESOURCE_ID


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


PATHS: S = {
    "/healthz": {"get": _op("liveness", "Health", secured=False)},
    "/api/v1/agent": {"get": _op("this agent token's agent and its opted-in tools", "AgentInfo")},
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
            "run the endpoint check on a test copy while serving "
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
            params=[RESOURCE_ID],
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
            params=[RESOURCE_ID],
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
    "/api/v1/admin/passkey-enrolments": {
        "post": _op(
            "a one-time code (15 minutes, once) that enrols the owner's first passkey on the "
            "passkeys page; the master key only, never an operator key; replace revokes "
            "the owner's live passkeys first (a lost device), else a live one is "
            "enrolment_not_needed",
            "PasskeyEnrolment",
            status="201",
            body="PasskeyEnrolmentRequest",
            body_required=False,
        )
    },
    "/api/v1/admin/keys/{credential_id}/revoke": {
        "post": _op(
            "revoke a credential (master key or keys:admin); force is needed for the "
            "only owner of unresolved jobs",
            "Revocation",
            body="RevokeRequest",
            body_required=False,
            params=[{"name": "credential_id", "in": "path", "required": True, "schema": _STR}],
        )
    },
}
