"""The one factory of the served surface: the API, the review web UI and the agents'
``/mcp``, over one ``Service``, as ``undogate serve`` runs it."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Route

from .api import create_app
from .mcp.http import McpApp
from .service import Service
from .web import WebSettings, WebUI


def build_app(service: Service) -> Starlette:
    """The whole served surface: ``/api/v1``, the review pages and ``/mcp``."""
    mcp = McpApp(service)
    pages = WebUI(service, WebSettings(), service.context.ledger)
    routes = [Route("/mcp", endpoint=mcp), *pages.routes()]
    return create_app(service, routes=routes, lifespan=mcp.lifespan)


__all__ = ["build_app"]
