"""The audit export over the API (``undogate export`` with ``UNDOGATE_URL``):
events and jobs since a time, a keyset page at a time, for an operator key with
keys:admin or the master key."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..errors import InvalidRequest
from ..operations.inbox import parse_time
from ..service import Administrator
from .responses import NO_STORE, JSONResponse
from .routes import requires, service


async def _page(request: Request, admin: Administrator, what: str) -> Response:
    svc = service(request)
    since_text = request.query_params.get("since")
    if not since_text:
        raise InvalidRequest("since is required: 30m, 12h, 7d ago, or ISO 8601", field="since")
    since = parse_time(since_text, svc.clock(), name="since")
    after = request.query_params.get("after") or None
    if after is not None and len(after) > 200:
        raise InvalidRequest("after is too long", field="after")
    page = await svc.administrators.export_page(admin, what, since, after)
    return JSONResponse(page, headers=NO_STORE)


@requires(Administrator)
async def export_events(request: Request, admin: Administrator) -> Response:
    return await _page(request, admin, "events")


@requires(Administrator)
async def export_jobs(request: Request, admin: Administrator) -> Response:
    return await _page(request, admin, "jobs")


def export_routes() -> list[BaseRoute]:
    return [
        Route("/api/v1/admin/events", export_events, methods=["GET"]),
        Route("/api/v1/admin/jobs", export_jobs, methods=["GET"]),
    ]


__all__ = ["export_routes"]
