"""``GET /metrics``, the Prometheus scrape (``metrics``), for the gateway's operator: an
operator key with keys:admin, or the master key, never an agent's token. Or, with
``serve --metrics-bind``, on a loopback address of its own (``MetricsBind``), which
answers that one path to whoever can reach it there and nothing else."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..metrics import exposition
from ..service import Administrator, Service
from .responses import NO_STORE
from .routes import requires, service

PATH = "/metrics"


async def _scrape(svc: Service, accept: str) -> Response:
    body, content_type = exposition(await svc.operating_figures(), accept)
    return Response(body, headers={**NO_STORE, "Content-Type": content_type})


@requires(Administrator)
async def metrics(request: Request, operator: Administrator) -> Response:
    return await _scrape(service(request), request.headers.get("accept", ""))


def metrics_routes() -> list[BaseRoute]:
    return [Route(PATH, metrics, methods=["GET"], include_in_schema=False)]


class MetricsBind:
    """Requests that arrived on ``address`` (the socket of ``--metrics-bind``, as the
    server reports the connection's local end: never what the client says) get the
    scrape at ``GET /metrics`` and a 404 anywhere else; the rest go to ``app``."""

    def __init__(self, app: ASGIApp, svc: Service, address: tuple[str, int]) -> None:
        self.app = app
        self.svc = svc
        self.address = address

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server") if scope["type"] == "http" else None
        if server is None or (str(server[0]), int(server[1])) != self.address:
            await self.app(scope, receive, send)
            return
        if scope["path"] == PATH and scope["method"] in ("GET", "HEAD"):
            response = await _scrape(self.svc, Headers(scope=scope).get("accept", ""))
        else:
            response = PlainTextResponse("not found", status_code=404)
        await response(scope, receive, send)


__all__ = ["PATH", "MetricsBind", "metrics_routes"]
