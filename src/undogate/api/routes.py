"""The HTTP API's routes (and key administration), each a thin translation: read the
request, call the ``Service``, render its answer.

Each route declares, once, the caller it needs (``requires(Reviewer)``): its wrapper
authenticates the bearer key, asks that caller's question before the body is read, and
hands the endpoint the caller, which is what the service's verbs take.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from .. import views
from ..auth import READ, WRITE, Principal
from ..errors import InvalidRequest, UndogateError
from ..jobs import Operation
from ..jsonvalue import JsonNumber, JsonObject, dumps
from ..operations import endpoint_check
from ..service import Administrator, AgentCaller, Caller, Master, Reader, Reviewer, Service
from .bodies import _bool, _only, _str, _str_list, json_body, parse_prepare
from .responses import NO_STORE, JSONResponse, error_response

log = logging.getLogger(__name__)

ASK_FOR_BEARER = "send a credential as 'Authorization: Bearer <key>'"
VIA = "api"  # the access path the ledger records for what arrives here

C = TypeVar("C", bound=Caller)
Endpoint = Callable[[Request], Awaitable[Response]]


def service(request: Request) -> Service:
    """The service the routes call (``request.app.state.undogate``)."""
    svc = request.app.state.undogate
    assert isinstance(svc, Service)
    return svc


async def authenticate(request: Request) -> Principal:
    """The principal behind ``Authorization: Bearer ...``.

    Raises:
        Unauthorized: no credential, a malformed header, or an unknown/revoked key.
    """
    header = request.headers.get("authorization", "")
    return await service(request).access.authenticate_bearer(header, ask=ASK_FOR_BEARER)


def requires(caller: type[C]) -> Callable[[Callable[[Request, C], Awaitable[Response]]], Endpoint]:
    """What a route needs, said once beside it: the bearer key is authenticated and must
    be a ``caller`` (``Forbidden`` otherwise) before the endpoint reads anything. Domain
    errors go to the exception handlers; a bug becomes a 500 in the error shape (with the
    security headers), never a stack trace."""

    def route(fn: Callable[[Request, C], Awaitable[Response]]) -> Endpoint:
        async def authorized(request: Request) -> Response:
            try:
                who = caller.of(await authenticate(request), VIA)
                if isinstance(who, AgentCaller):
                    # From here on, refusals are shaped for an agent (no hosts, addresses,
                    # variables).
                    request.state.agent_facing = True
                return await fn(request, who)
            except (UndogateError, HTTPException):
                raise
            except Exception:
                log.exception("unhandled error in %s %s", request.method, request.url.path)
                return error_response("internal_error", "an internal error occurred")

        authorized.__name__ = fn.__name__
        authorized.__doc__ = fn.__doc__
        return authorized

    return route


# -- routes --------------------------------------------------------------------------


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def openapi(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)


@requires(AgentCaller)
async def list_resources(request: Request, agent: AgentCaller) -> Response:
    resources = [views.resource_view(r) for r in service(request).agents.list_resources(agent)]
    return JSONResponse({"agent": agent.agent_id, "resources": resources})


@requires(AgentCaller)
async def agent_info(request: Request, agent: AgentCaller) -> Response:
    """Which agent this token speaks for and which tools its config opts it in to."""
    tools = service(request).agents.tools(agent)
    return JSONResponse({"agent": agent.agent_id, "tools": list(tools)})


@requires(AgentCaller)
async def prepare_job(request: Request, agent: AgentCaller) -> Response:
    prepare = parse_prepare(await json_body(request))
    done = await service(request).agents.prepare(agent, prepare)
    return JSONResponse(
        views.agent_receipt(done.job, replay=done.replay),
        status_code=200 if done.replay else 201,
    )


@requires(Reader)
async def list_jobs(request: Request, reader: Reader) -> Response:
    agent_id = request.query_params.get("agent")
    if not agent_id:
        raise InvalidRequest("name the agent: /api/v1/jobs?agent=ID")
    rows = await service(request).reviewers.list_jobs(reader, agent_id)
    return JSONResponse(views.job_rows(agent_id, rows))


@requires(Reader)
async def webhook_messages(request: Request, reader: Reader) -> Response:
    status = request.query_params.get("status") or None
    messages = await service(request).reviewers.webhook_messages(reader, status)
    return JSONResponse(views.webhook_messages_view(messages), headers=NO_STORE)


@requires(Reader)
async def get_job(request: Request, reader: Reader) -> Response:
    job = await service(request).reviewers.job(reader, request.path_params["job_id"])
    return JSONResponse(views.job_receipt(job), headers=NO_STORE)


@requires(Reader)
async def job_events(request: Request, reader: Reader) -> Response:
    job, events = await service(request).reviewers.events(reader, request.path_params["job_id"])
    return JSONResponse(views.events_view(job.id, events), headers=NO_STORE)


@requires(Reviewer)
async def preview_job(request: Request, reviewer: Reviewer) -> Response:
    body = await json_body(request)
    _only(body, ("operation",))
    name = _str(body, "operation", required=True, max_len=40)
    try:
        operation = Operation(name or "")
    except ValueError:
        raise InvalidRequest(
            "operation must be one of " + ", ".join(o.value for o in Operation)
        ) from None
    svc = service(request)
    job_id = request.path_params["job_id"]
    job, preview = await svc.reviewers.preview(reviewer, job_id, operation)
    view = views.preview_view(preview, job, svc.clock())
    if preview.blockers:
        # One shape for any blocked preview, whatever the guard (docs/operating.md): the code of the
        # first blocked change, and per change what blocks it, as a raised guard gives.
        first = preview.blockers[0]
        details: JsonObject = {"job": job.id, "blockers": view["blockers"], "preview": view}
        response = error_response(str(first["code"]), str(first["message"]), details)
        response.headers.update(NO_STORE)
        return response
    return JSONResponse(view, headers=NO_STORE)


@requires(Reviewer)
async def confirm_job(request: Request, reviewer: Reviewer) -> Response:
    body = await json_body(request)
    _only(body, ("preview_token", "dry_run", "acknowledge_irreversible", "passkey_assertion"))
    token = _str(body, "preview_token", required=True, max_len=200)
    assert token is not None
    confirmation = await service(request).reviewers.confirm(
        reviewer,
        request.path_params["job_id"],
        token,
        dry_run=_bool(body, "dry_run"),
        acknowledge_irreversible=_bool(body, "acknowledge_irreversible"),
        passkey_assertion=_assertion(body),
    )
    return JSONResponse(views.confirmation_view(confirmation), headers=NO_STORE)


@requires(Reviewer)
async def reject_job(request: Request, reviewer: Reviewer) -> Response:
    body = await json_body(request, optional=True)
    _only(body, ("reason",))
    reason = _str(body, "reason", max_len=2000)
    job_id = request.path_params["job_id"]
    done = await service(request).reviewers.reject(reviewer, job_id, reason)
    return JSONResponse(views.job_receipt(done), headers=NO_STORE)


@requires(Reviewer)
async def check_test_copy(request: Request, reviewer: Reviewer) -> Response:
    """Run the endpoint check on a test copy while serving."""
    body = await json_body(request)
    _only(body, ("resource",))
    copy_id = _str(body, "resource", required=True, max_len=64)
    assert copy_id is not None
    result = await service(request).reviewers.check_endpoint(reviewer, copy_id)
    return JSONResponse(endpoint_check.result_view(result), headers=NO_STORE)


@requires(Administrator)
async def admin_list_keys(request: Request, admin: Administrator) -> Response:
    creds = await service(request).administrators.list_keys(admin)
    return JSONResponse({"credentials": [c.to_json() for c in creds]})


@requires(Administrator)
async def admin_create_key(request: Request, admin: Administrator) -> Response:
    body = await json_body(request)
    _only(body, ("kind", "label", "scopes", "agents", "agent", "owner"))
    administrators = service(request).administrators
    kind = _str(body, "kind", required=True, max_len=20)
    label = _str(body, "label", max_len=200) or f"{kind} key"
    if kind == "operator":
        scopes = _str_list(body, "scopes")
        agents = _str_list(body, "agents")
        issued = await administrators.create_operator(
            admin,
            label=label,
            scopes=tuple(scopes) if scopes is not None else (READ, WRITE),
            agents=tuple(agents) if agents is not None else None,
        )
    elif kind == "agent":
        agent = _str(body, "agent", required=True, max_len=64)
        owner = _str(body, "owner", max_len=64)  # unnamed: see create_agent_token
        assert agent is not None
        issued = await administrators.create_agent_token(
            admin, owner_id=owner, agent_id=agent, label=label
        )
    else:
        raise InvalidRequest("kind must be operator or agent")
    return JSONResponse(issued.to_json(), status_code=201, headers=NO_STORE)


@requires(Administrator)
async def admin_revoke_key(request: Request, admin: Administrator) -> Response:
    body = await json_body(request, optional=True)
    _only(body, ("force",))
    revocation = await service(request).administrators.revoke(
        admin, request.path_params["credential_id"], force=_bool(body, "force")
    )
    return JSONResponse(revocation.to_json())


@requires(Master)
async def admin_enrol_passkey(request: Request, master: Master) -> Response:
    """A one-time code that enrols an owner's first passkey: the master key only."""
    body = await json_body(request, optional=True)
    _only(body, ("owner", "replace"))
    issued = await service(request).administrators.issue_passkey_enrolment(
        master, _str(body, "owner", max_len=64), replace=_bool(body, "replace")
    )
    return JSONResponse(issued.to_json(), status_code=201, headers=NO_STORE)


@requires(Reader)
async def get_undo_offer(request: Request, reader: Reader) -> Response:
    """A resource's undos a test copy verified and a reviewer accepted (docs/collections.md)."""
    resource_id = request.path_params["resource_id"]
    offer = await service(request).reviewers.undo_offer(reader, resource_id)
    return JSONResponse(views.undo_offer_view(offer), headers=NO_STORE)


@requires(Reviewer)
async def accept_undo(request: Request, reviewer: Reviewer) -> Response:
    """A reviewer accepts, once, the undos the latest endpoint check verified."""
    body = await json_body(request, optional=True)
    _only(body, ("passkey_assertion", "passkey_expires_at_ms"))
    offer = await service(request).reviewers.accept_verified_undo(
        reviewer,
        request.path_params["resource_id"],
        passkey_assertion=_assertion(body),
        passkey_expires_at_ms=_expiry(body),
    )
    return JSONResponse(views.undo_offer_view(offer), headers=NO_STORE)


def _assertion(body: JsonObject) -> str | None:
    """The optional ``passkey_assertion`` (the PublicKeyCredential JSON), as text."""
    assertion = body.get("passkey_assertion")
    if assertion is not None and not isinstance(assertion, dict):
        raise InvalidRequest("passkey_assertion must be the PublicKeyCredential JSON object")
    return None if assertion is None else dumps(assertion)


def _expiry(body: JsonObject) -> int | None:
    """The optional ``passkey_expires_at_ms`` the offer showed (milliseconds)."""
    found = body.get("passkey_expires_at_ms")
    if found is None:
        return None
    if not isinstance(found, JsonNumber) or not (found.text.isdigit() and len(found.text) < 16):
        raise InvalidRequest("passkey_expires_at_ms must be the integer the offer showed")
    return int(found.text)


def api_routes() -> list[BaseRoute]:
    """The HTTP API's routes (and key administration), in the order OpenAPI lists them."""
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"], include_in_schema=False),
        Route("/api/v1/agent", agent_info, methods=["GET"]),
        Route("/api/v1/resources", list_resources, methods=["GET"]),
        Route("/api/v1/jobs", prepare_job, methods=["POST"]),
        Route("/api/v1/jobs", list_jobs, methods=["GET"]),
        Route("/api/v1/jobs/{job_id}", get_job, methods=["GET"]),
        Route("/api/v1/jobs/{job_id}/previews", preview_job, methods=["POST"]),
        Route("/api/v1/jobs/{job_id}/confirm", confirm_job, methods=["POST"]),
        Route("/api/v1/jobs/{job_id}/reject", reject_job, methods=["POST"]),
        Route("/api/v1/jobs/{job_id}/events", job_events, methods=["GET"]),
        Route("/api/v1/webhooks/messages", webhook_messages, methods=["GET"]),
        Route("/api/v1/endpoint-checks", check_test_copy, methods=["POST"]),
        Route("/api/v1/resources/{resource_id}/undo-offer", get_undo_offer, methods=["GET"]),
        Route("/api/v1/resources/{resource_id}/undo-acceptance", accept_undo, methods=["POST"]),
        Route("/api/v1/admin/keys", admin_list_keys, methods=["GET"]),
        Route("/api/v1/admin/keys", admin_create_key, methods=["POST"]),
        Route("/api/v1/admin/keys/{credential_id}/revoke", admin_revoke_key, methods=["POST"]),
        Route("/api/v1/admin/passkey-enrolments", admin_enrol_passkey, methods=["POST"]),
    ]
