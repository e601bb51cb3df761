"""The one factory of the served surface: the API, the review web UI and the agents'
``/mcp``, over one ``Service``, as ``undogate serve`` runs it."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Route

from .api import create_app
from .auth import Keyring
from .engine import Gateway
from .mcp.http import McpApp
from .service import Service
from .web import WebSettings, WebUI


def build_app(gateway: Gateway, keyring: Keyring) -> Starlette:
    """The whole served surface: ``/api/v1``, the review pages and ``/mcp``."""
    service = Service(gateway, keyring)
    mcp = McpApp(service)
    routes = [Route("/mcp", endpoint=mcp), *WebUI(service, WebSettings(), gateway.ledger).routes()]
    return create_app(gateway, keyring, routes=routes, lifespan=mcp.lifespan, service=service)


__all__ = ["build_app"]
