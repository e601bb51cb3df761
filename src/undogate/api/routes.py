"""The routes of SPEC §9 (and key administration), each a thin translation."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from .. import receipts
from ..auth import READ, WRITE, Keyring, Principal, require_scope
from ..engine import Gateway
from ..errors import (
    Forbidden,
    InvalidRequest,
    NotFound,
    Unauthorized,
    UndogateError,
)
from ..jobs import Job, Operation
from ..jsonvalue import JsonObject
from ..operations import endpoint_check
from .bodies import _bool, _only, _str, _str_list, json_body, parse_prepare
from .responses import NO_STORE, JSONResponse, error_response

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Services:
    """What the routes call; reachable as ``request.app.state.undogate``."""

    gateway: Gateway
    keyring: Keyring


def services(request: Request) -> Services:
    svc = request.app.state.undogate
    assert isinstance(svc, Services)
    return svc


# -- credentials ---------------------------------------------------------------------


async def authenticate(request: Request) -> Principal:
    """The principal behind ``Authorization: Bearer ...``.

    Raises:
        Unauthorized: no credential, a malformed header, or an unknown/revoked key.
    """
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise Unauthorized("send a credential as 'Authorization: Bearer <key>'")
    if len(key) > 512:
        raise Unauthorized("the credential is missing, unknown or revoked")
    keyring = services(request).keyring
    principal = keyring.verified(key)
    if principal is None:
        principal = await run_in_threadpool(keyring.authenticate, key)
    return principal


def _agent_principal(request: Request, principal: Principal) -> str:
    if principal.kind != "agent" or principal.agent_id is None:
        raise Forbidden("this route is for agent tokens")
    # From here on, refusals are shaped for an agent (no hosts, addresses, variables).
    request.state.agent_facing = True
    return principal.agent_id


def _master(principal: Principal) -> None:
    if principal.kind != "master":
        raise Forbidden("this route needs the master key")


# -- routes --------------------------------------------------------------------------

Endpoint = Callable[[Request], Awaitable[Response]]


def endpoint(fn: Endpoint) -> Endpoint:
    """Route wrapper: a bug becomes a 500 in the error shape (with the security
    headers), never a stack trace; domain errors go to the exception handlers."""

    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except (UndogateError, HTTPException):
            raise
        except Exception:
            log.exception("unhandled error in %s %s", request.method, request.url.path)
            return error_response("internal_error", "an internal error occurred")

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await run_in_threadpool(fn, *args, **kwargs)


@endpoint
async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def openapi(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)


@endpoint
async def list_resources(request: Request) -> Response:
    principal = await authenticate(request)
    agent_id = _agent_principal(request, principal)
    gw = services(request).gateway
    if "list_resources" not in gw.config.agent_tools(agent_id):
        raise Forbidden(f"agent {agent_id!r} is not opted in to list_resources")
    resources = [receipts.resource_view(r) for r in gw.list_resources(agent_id)]
    return JSONResponse({"agent": agent_id, "resources": resources})


@endpoint
async def agent_info(request: Request) -> Response:
    """Which agent this token speaks for and which tools its config opts it in to."""
    agent_id = _agent_principal(request, await authenticate(request))
    tools = services(request).gateway.config.agent_tools(agent_id)
    return JSONResponse({"agent": agent_id, "tools": list(tools)})


@endpoint
async def prepare_job(request: Request) -> Response:
    principal = await authenticate(request)
    agent_id = _agent_principal(request, principal)
    prepare = parse_prepare(await json_body(request))
    gw = services(request).gateway
    done = await call(gw.prepare, principal.actor("api"), agent_id, prepare)
    return JSONResponse(
        receipts.agent_receipt(done.job, replay=done.replay),
        status_code=200 if done.replay else 201,
    )


def _reader(principal: Principal, scope: str) -> None:
    require_scope(principal, scope)


def _reviewer(principal: Principal) -> None:
    """Previewing, confirming and rejecting show a job's values: write needs read too."""
    require_scope(principal, WRITE)
    require_scope(principal, READ)


async def _visible_job(request: Request, principal: Principal, job_id: str) -> Job:
    job = await call(services(request).gateway.get_job, principal.owner_id, job_id)
    if not principal.sees_agent(job.agent_id):
        raise NotFound(f"no job {job_id!r}", job=job_id)
    return job


@endpoint
async def list_jobs(request: Request) -> Response:
    principal = await authenticate(request)
    _reader(principal, READ)
    agent_id = request.query_params.get("agent")
    if not agent_id:
        raise InvalidRequest("name the agent: /api/v1/jobs?agent=ID")
    if not principal.sees_agent(agent_id):
        raise Forbidden(f"this key has no access to agent {agent_id!r}", agent=agent_id)
    rows = await call(services(request).gateway.list_jobs, principal.owner_id, agent_id)
    return JSONResponse(receipts.job_rows(agent_id, rows))


@endpoint
async def get_job(request: Request) -> Response:
    principal = await authenticate(request)
    _reader(principal, READ)
    job = await _visible_job(request, principal, request.path_params["job_id"])
    return JSONResponse(receipts.job_receipt(job), headers=NO_STORE)


@endpoint
async def job_events(request: Request) -> Response:
    principal = await authenticate(request)
    _reader(principal, READ)
    job = await _visible_job(request, principal, request.path_params["job_id"])
    events = await call(services(request).gateway.events, principal.owner_id, job.id)
    return JSONResponse(receipts.events_view(job.id, events), headers=NO_STORE)


@endpoint
async def preview_job(request: Request) -> Response:
    principal = await authenticate(request)
    _reviewer(principal)
    body = await json_body(request)
    _only(body, ("operation",))
    name = _str(body, "operation", required=True, max_len=40)
    try:
        operation = Operation(name or "")
    except ValueError:
        raise InvalidRequest(
            "operation must be one of " + ", ".join(o.value for o in Operation)
        ) from None
    job = await _visible_job(request, principal, request.path_params["job_id"])
    gw = services(request).gateway
    preview = await call(gw.preview, principal.actor("api"), job.id, operation)
    view = receipts.preview_view(preview, job, gw.clock())
    if preview.blockers:
        # One shape for every blocked preview, whatever the guard (SPEC §9): the code of the
        # first blocked change, and per change what blocks it, as a raised guard gives.
        first = preview.blockers[0]
        details: JsonObject = {"job": job.id, "blockers": view["blockers"], "preview": view}
        response = error_response(str(first["code"]), str(first["message"]), details)
        response.headers.update(NO_STORE)
        return response
    return JSONResponse(view, headers=NO_STORE)


@endpoint
async def confirm_job(request: Request) -> Response:
    principal = await authenticate(request)
    _reviewer(principal)
    body = await json_body(request)
    _only(body, ("preview_token", "dry_run"))
    token = _str(body, "preview_token", required=True, max_len=200)
    assert token is not None
    dry_run = _bool(body, "dry_run")
    job = await _visible_job(request, principal, request.path_params["job_id"])
    svc = services(request)

    def reauthorize() -> None:
        now = svc.keyring.recheck(principal)
        require_scope(now, WRITE)
        if not now.sees_agent(job.agent_id):
            raise Forbidden("this key no longer has access to the job's agent")

    confirmation = await call(
        svc.gateway.confirm,
        principal.actor("api"),
        job.id,
        token,
        dry_run=dry_run,
        reauthorize=reauthorize,
    )
    return JSONResponse(receipts.confirmation_view(confirmation), headers=NO_STORE)


@endpoint
async def reject_job(request: Request) -> Response:
    principal = await authenticate(request)
    _reviewer(principal)
    _only(await json_body(request, optional=True), ())
    job = await _visible_job(request, principal, request.path_params["job_id"])
    done = await call(services(request).gateway.reject, principal.actor("api"), job.id)
    return JSONResponse(receipts.job_receipt(done), headers=NO_STORE)


@endpoint
async def check_test_copy(request: Request) -> Response:
    """Run the endpoint check (SPEC §11) on a test copy while serving."""
    principal = await authenticate(request)
    _reviewer(principal)
    body = await json_body(request)
    _only(body, ("resource",))
    copy_id = _str(body, "resource", required=True, max_len=64)
    assert copy_id is not None
    gw = services(request).gateway
    copy = gw.config.resource(copy_id)
    if copy is not None and not principal.sees_agent(copy.agent_id):
        raise Forbidden(f"this key has no access to agent {copy.agent_id!r}", agent=copy.agent_id)
    actor = principal.actor("api")
    result = await call(
        endpoint_check.check_endpoint,
        gw.config,
        gw.ledger,
        gw.http,
        copy_id,
        gw.environ,
        actor=actor.label,
        access_path=actor.access_path,
    )
    return JSONResponse(endpoint_check.result_view(result), headers=NO_STORE)


@endpoint
async def admin_list_keys(request: Request) -> Response:
    _master(await authenticate(request))
    creds = await call(services(request).keyring.list)
    return JSONResponse({"credentials": [c.to_json() for c in creds]})


@endpoint
async def admin_create_key(request: Request) -> Response:
    _master(await authenticate(request))
    body = await json_body(request)
    _only(body, ("kind", "label", "scopes", "agents", "agent", "owner"))
    keyring = services(request).keyring
    kind = _str(body, "kind", required=True, max_len=20)
    label = _str(body, "label", max_len=200) or f"{kind} key"
    if kind == "operator":
        scopes = _str_list(body, "scopes")
        agents = _str_list(body, "agents")
        issued = await call(
            keyring.create_operator,
            label=label,
            scopes=tuple(scopes) if scopes is not None else (READ, WRITE),
            agents=tuple(agents) if agents is not None else None,
            actor="master",
        )
    elif kind == "agent":
        agent = _str(body, "agent", required=True, max_len=64)
        owner = _str(body, "owner", required=True, max_len=64)
        assert agent is not None and owner is not None
        issued = await call(
            keyring.create_agent_token, owner_id=owner, agent_id=agent, label=label, actor="master"
        )
    else:
        raise InvalidRequest("kind must be operator or agent")
    return JSONResponse(issued.to_json(), status_code=201, headers=NO_STORE)


@endpoint
async def admin_revoke_key(request: Request) -> Response:
    _master(await authenticate(request))
    body = await json_body(request, optional=True)
    _only(body, ("force",))
    revocation = await call(
        services(request).keyring.revoke,
        request.path_params["credential_id"],
        force=_bool(body, "force"),
        actor="master",
    )
    return JSONResponse(revocation.to_json())


def api_routes() -> list[BaseRoute]:
    """The routes of SPEC §9 (and key administration), in the order OpenAPI lists them."""
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
        Route("/api/v1/endpoint-checks", check_test_copy, methods=["POST"]),
        Route("/api/v1/admin/keys", admin_list_keys, methods=["GET"]),
        Route("/api/v1/admin/keys", admin_create_key, methods=["POST"]),
        Route("/api/v1/admin/keys/{credential_id}/revoke", admin_revoke_key, methods=["POST"]),
    ]
