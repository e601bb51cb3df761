"""The inbox and job_status routes for reviewers and agents: the review inbox, bulk reject of
stale jobs, and an agent's ``job_status``; each a thin translation to the ``Service``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..jsonvalue import JsonObject
from ..operations.inbox import inbox_view, parse_filter
from ..service import AgentCaller, Reader, Reviewer
from .bodies import _only, _str, _str_list, json_body
from .responses import NO_STORE, JSONResponse
from .routes import requires, service


def query_lists(request: Request) -> dict[str, list[str]]:
    """The query string, each name with all its values."""
    out: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        out.setdefault(name, []).append(value)
    return out


@requires(Reader)
async def inbox(request: Request, reader: Reader) -> Response:
    svc = service(request)
    page = await svc.reviewers.inbox(reader, parse_filter(query_lists(request), svc.clock()))
    return JSONResponse(inbox_view(page), headers=NO_STORE)


@requires(Reviewer)
async def reject_jobs(request: Request, reviewer: Reviewer) -> Response:
    body = await json_body(request)
    _only(body, ("jobs", "reason"))
    job_ids = _str_list(body, "jobs") or []
    reason = _str(body, "reason", max_len=2000)
    outcomes = await service(request).reviewers.reject_many(reviewer, tuple(job_ids), reason)
    rows: list[JsonObject] = [
        {"job": o.job_id, "rejected": o.rejected, "code": o.code, "message": o.message}
        for o in outcomes
    ]
    return JSONResponse({"outcomes": list(rows)}, headers=NO_STORE)


@requires(AgentCaller)
async def job_status(request: Request, agent: AgentCaller) -> Response:
    """An agent's own job: state and a reviewer's reason (opt-in ``job_status``)."""
    status = await service(request).agents.job_status(agent, request.path_params["job_id"])
    return JSONResponse(status.to_json(), headers=NO_STORE)


def inbox_routes() -> list[BaseRoute]:
    return [
        Route("/api/v1/inbox", inbox, methods=["GET"]),
        Route("/api/v1/inbox/reject", reject_jobs, methods=["POST"]),
        Route("/api/v1/jobs/{job_id}/status", job_status, methods=["GET"]),
    ]


__all__ = ["inbox_routes", "query_lists"]
