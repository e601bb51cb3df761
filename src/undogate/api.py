"""The HTTP API (SPEC §9): ``create_app`` builds the ASGI app from a routes list, a
lifespan and exception handlers.

Routes only translate: they authenticate the bearer credential, parse the body
losslessly, call one ``Gateway`` or ``Keyring`` method in a worker thread, and render
a view from ``receipts``. Domain errors become HTTP statuses in one place,
``STATUS_BY_CODE``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import receipts
from .auth import READ, WRITE, Keyring, Principal, require_scope
from .engine import Gateway
from .errors import (
    Forbidden,
    InvalidRequest,
    NotFound,
    RateLimited,
    Unauthorized,
    UndogateError,
)
from .jobs import AssertionKind, ChangeRequest, Job, Operation, PrepareRequest
from .jsonvalue import JsonObject, JsonValue, dumps
from .openapi import openapi_document
from .operations import endpoint_check
from .request_body import MAX_BODY_BYTES, DrainUnreadBody, parse_object, read_body

log = logging.getLogger(__name__)
T = TypeVar("T")

# The one mapping from stable error codes to HTTP statuses.
STATUS_BY_CODE: dict[str, int] = {
    "invalid_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "stale_version": 409,
    "idempotency_key_reused": 409,
    "transition_not_allowed": 409,
    "preview_used": 409,
    "changed_since_preview": 409,
    "conflict": 409,
    "quarantined": 409,
    "later_job_overlaps": 409,
    "reconciliation_blocked": 409,
    "preview_expired": 410,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "limit_reached": 422,
    "quota_exceeded": 429,
    "rate_limited": 429,
    "too_many_streams": 429,
    "remote_contract_breach": 502,
    "remote_unavailable": 502,
    "blocked_address": 502,
    "missing_token": 503,
    "ledger_in_use": 503,
    "ledger_error": 503,
    "config_invalid": 500,
    "internal_error": 500,
}
NO_STORE = {"Cache-Control": "no-store"}
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)


class JSONResponse(Response):
    """A lossless JSON response: ``JsonNumber`` values keep their exact text."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content, sort_keys=False).encode("utf-8")


def error_response(code: str, message: str, details: JsonObject | None = None) -> JSONResponse:
    status = STATUS_BY_CODE.get(code, 400)
    headers = {"WWW-Authenticate": 'Bearer realm="undogate"'} if status == 401 else None
    body: JsonObject = {"error": {"code": code, "message": message, "details": details or {}}}
    return JSONResponse(body, status_code=status, headers=headers)


def _details(exc: UndogateError) -> JsonObject:
    out: JsonObject = {}
    for key, value in exc.details.items():
        out[key] = receipts.json_value(value)
    return out


async def _undogate_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, UndogateError)
    if getattr(request.state, "agent_facing", False):
        message, details = receipts.agent_refusal(exc.code, exc.message, exc.details)
        response = error_response(exc.code, message, details)
    else:
        response = error_response(exc.code, exc.message, _details(exc))
    if isinstance(exc, RateLimited):
        response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {
        404: "not_found",
        405: "method_not_allowed",
        413: "payload_too_large",
        415: "unsupported_media_type",
    }.get(exc.status_code, "invalid_request")
    response = error_response(code, str(exc.detail))
    response.status_code = exc.status_code
    if exc.headers:
        response.headers.update(exc.headers)
    return response


class SecurityHeaders:
    """Every response: ``nosniff`` and ``no-referrer``; every API response: ``no-store``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        no_store = str(scope.get("path", "")).startswith("/api/")

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in (b"x-content-type-options", b"referrer-policy")
                ]
                headers.extend(SECURITY_HEADERS)
                if no_store and not any(k.lower() == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, wrapped)


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


# -- bodies --------------------------------------------------------------------------


async def json_body(request: Request, *, optional: bool = False) -> JsonObject:
    """The request body as a lossless JSON object (big numbers exact, no duplicate keys).

    Raises:
        InvalidRequest: not JSON or not an object. PayloadTooLarge: over the limit.
        HTTPException: 415, the wrong media type.
    """
    raw = await read_body(request.scope, request.receive)
    if not raw.strip():
        if optional:
            return {}
        raise InvalidRequest("a JSON object body is required")
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise HTTPException(415, "send the body as application/json")
    return parse_object(raw)


def _only(body: JsonObject, allowed: Sequence[str], where: str = "body") -> None:
    extra = sorted(set(body) - set(allowed))
    if extra:
        raise InvalidRequest(f"{where}: unknown member {extra[0]!r}", member=extra[0])


def _str(
    body: JsonObject, key: str, *, required: bool = False, max_len: int = 10_000
) -> str | None:
    value = body.get(key)
    if value is None:
        if required:
            raise InvalidRequest(f"{key} is required (a string)", member=key)
        return None
    if not isinstance(value, str) or len(value) > max_len:
        raise InvalidRequest(f"{key} must be a string of at most {max_len} characters", member=key)
    return value


def _bool(body: JsonObject, key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidRequest(f"{key} must be true or false", member=key)
    return value


def _change_request(value: JsonValue, i: int) -> ChangeRequest:
    where = f"changes[{i}]"
    if not isinstance(value, dict):
        raise InvalidRequest(f"{where} must be an object")
    _only(value, ("resource", "set", "remove", "text", "expected_version", "assertion_kind"), where)
    resource = _str(value, "resource", required=True, max_len=64)
    assert resource is not None
    set_ = value.get("set")
    if set_ is not None and not isinstance(set_, dict):
        raise InvalidRequest(f"{where}.set must be an object of field values")
    remove = value.get("remove") or []
    if not isinstance(remove, list) or not all(isinstance(r, str) for r in remove):
        raise InvalidRequest(f"{where}.remove must be a list of field names")
    kind = _str(value, "assertion_kind", max_len=20)
    try:
        assertion = AssertionKind(kind) if kind is not None else None
    except ValueError:
        raise InvalidRequest(
            f"{where}.assertion_kind must be one of " + ", ".join(k.value for k in AssertionKind)
        ) from None
    return ChangeRequest(
        resource_id=resource,
        set=set_,
        remove=tuple(str(r) for r in remove),
        text=_str(value, "text", max_len=10 * MAX_BODY_BYTES),
        expected_version=_str(value, "expected_version", max_len=300),
        assertion_kind=assertion,
    )


def parse_prepare(body: JsonObject) -> PrepareRequest:
    """Raises: InvalidRequest."""
    _only(body, ("summary", "changes", "idempotency_key", "attribution_label"))
    summary = _str(body, "summary", required=True)
    assert summary is not None
    changes = body.get("changes")
    if not isinstance(changes, list) or not changes:
        raise InvalidRequest("changes must be a non-empty list")
    if len(changes) > 64:
        raise InvalidRequest("too many changes")
    return PrepareRequest(
        summary=summary,
        changes=tuple(_change_request(c, i) for i, c in enumerate(changes)),
        idempotency_key=_str(body, "idempotency_key", max_len=1000),
        attribution_label=_str(body, "attribution_label", max_len=1000),
    )


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


def _str_list(body: JsonObject, key: str) -> list[str] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidRequest(f"{key} must be a list of strings", member=key)
    return [str(v) for v in value]


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


def create_app(
    gateway: Gateway,
    keyring: Keyring,
    *,
    routes: Sequence[BaseRoute] = (),
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
    exception_handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]]
    | None = None,
) -> Starlette:
    """The ASGI app: the API routes plus ``routes`` (web views, the MCP mount, ...).

    Extra routes share the services (``request.app.state.undogate``), the security
    headers and the error mapping; ``exception_handlers`` adds to (or overrides) it.
    """
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        UndogateError: _undogate_error,
        HTTPException: _http_error,
    }
    handlers.update(exception_handlers or {})
    app = Starlette(
        routes=[*api_routes(), *routes],
        lifespan=lifespan,
        exception_handlers=handlers,
    )
    app.state.undogate = Services(gateway=gateway, keyring=keyring)
    app.state.openapi = receipts.json_value(openapi_document())
    app.add_middleware(SecurityHeaders)
    app.add_middleware(DrainUnreadBody)  # every client reads its answer, not a reset
    return app


__all__ = [
    "MAX_BODY_BYTES",
    "STATUS_BY_CODE",
    "JSONResponse",
    "Services",
    "api_routes",
    "authenticate",
    "create_app",
    "error_response",
    "json_body",
    "parse_prepare",
    "services",
]
