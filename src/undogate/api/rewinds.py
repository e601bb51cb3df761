"""The rewind routes (docs/rewind.md): plan, read, preview and confirm an undo of an
agent's work since a moment, and stop or resume an agent. Each a thin translation."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..jsonvalue import JsonObject
from ..operations.inbox import parse_time
from ..operations.rewind_plan import Selection
from ..operations.rewind_view import plan_view, preview_view
from ..service import Reader, Reviewer
from ..views import number
from .bodies import _bool, _only, _str, json_body
from .responses import NO_STORE, JSONResponse
from .routes import _assertion, requires, service


def parse_selection(body: JsonObject, now: float) -> Selection:
    """Raises: InvalidRequest."""
    _only(body, ("agent", "since", "until", "label", "session"))
    agent = _str(body, "agent", required=True, max_len=64)
    since = _str(body, "since", required=True, max_len=64)
    until = _str(body, "until", max_len=64)
    assert agent is not None and since is not None
    return Selection(
        agent_id=agent,
        since=parse_time(since, now, name="since"),
        until=parse_time(until, now, name="until") if until is not None else None,
        label=_str(body, "label", max_len=1000),
        session=_str(body, "session", max_len=200),
    )


@requires(Reviewer)
async def create_rewind(request: Request, reviewer: Reviewer) -> Response:
    svc = service(request)
    selection = parse_selection(await json_body(request), svc.clock())
    plan = await svc.rewinds.create(reviewer, selection)
    return JSONResponse(plan_view(plan), status_code=201, headers=NO_STORE)


@requires(Reader)
async def get_rewind(request: Request, reader: Reader) -> Response:
    plan = await service(request).rewinds.plan(reader, request.path_params["rewind_id"])
    return JSONResponse(plan_view(plan), headers=NO_STORE)


@requires(Reviewer)
async def preview_rewind(request: Request, reviewer: Reviewer) -> Response:
    await json_body(request, optional=True)  # nothing to say; an empty body is fine
    svc = service(request)
    preview = await svc.rewinds.preview(reviewer, request.path_params["rewind_id"])
    return JSONResponse(preview_view(preview, svc.clock()), headers=NO_STORE)


@requires(Reviewer)
async def confirm_rewind(request: Request, reviewer: Reviewer) -> Response:
    body = await json_body(request)
    _only(body, ("preview_token", "skip_blocked", "passkey_assertion"))
    token = _str(body, "preview_token", required=True, max_len=200)
    assert token is not None
    plan = await service(request).rewinds.confirm(
        reviewer,
        request.path_params["rewind_id"],
        token,
        skip_blocked=_bool(body, "skip_blocked"),
        passkey_assertion=_assertion(body),
    )
    return JSONResponse(plan_view(plan), headers=NO_STORE)


def _stop_view(agent_id: str, stopped_at: float | None) -> JsonObject:
    return {
        "agent": agent_id,
        "stopped": stopped_at is not None,
        "stopped_at": number(stopped_at) if stopped_at is not None else None,
    }


@requires(Reader)
async def agent_stop_state(request: Request, reader: Reader) -> Response:
    agent_id = request.path_params["agent_id"]
    stopped_at = await service(request).rewinds.stopped_at(reader, agent_id)
    return JSONResponse(_stop_view(agent_id, stopped_at), headers=NO_STORE)


@requires(Reviewer)
async def stop_agent(request: Request, reviewer: Reviewer) -> Response:
    await json_body(request, optional=True)
    agent_id = request.path_params["agent_id"]
    stopped_at = await service(request).rewinds.stop(reviewer, agent_id)
    return JSONResponse(_stop_view(agent_id, stopped_at), headers=NO_STORE)


@requires(Reviewer)
async def resume_agent(request: Request, reviewer: Reviewer) -> Response:
    await json_body(request, optional=True)
    agent_id = request.path_params["agent_id"]
    stopped_at = await service(request).rewinds.resume(reviewer, agent_id)
    return JSONResponse(_stop_view(agent_id, stopped_at), headers=NO_STORE)


def rewind_routes() -> list[BaseRoute]:
    return [
        Route("/api/v1/rewinds", create_rewind, methods=["POST"]),
        Route("/api/v1/rewinds/{rewind_id}", get_rewind, methods=["GET"]),
        Route("/api/v1/rewinds/{rewind_id}/preview", preview_rewind, methods=["POST"]),
        Route("/api/v1/rewinds/{rewind_id}/confirm", confirm_rewind, methods=["POST"]),
        Route("/api/v1/agents/{agent_id}/stop", agent_stop_state, methods=["GET"]),
        Route("/api/v1/agents/{agent_id}/stop", stop_agent, methods=["POST"]),
        Route("/api/v1/agents/{agent_id}/resume", resume_agent, methods=["POST"]),
    ]


__all__ = ["rewind_routes"]
