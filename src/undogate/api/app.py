"""``create_app``: the ASGI app from a routes list, a lifespan and exception handlers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from .. import views
from ..errors import UndogateError
from ..service import Service
from .export import export_routes
from .inbox import inbox_routes
from .metrics import metrics_routes
from .openapi import openapi_document
from .request_body import DrainUnreadBody
from .responses import SecurityHeaders, _http_error, _undogate_error
from .rewinds import rewind_routes
from .routes import api_routes


def create_app(
    service: Service,
    *,
    routes: Sequence[BaseRoute] = (),
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
    exception_handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]]
    | None = None,
) -> Starlette:
    """The ASGI app over ``service``: the API routes plus ``routes`` (web views, the MCP
    mount, ...).

    Extra routes share the service (``request.app.state.undogate``), the security
    headers and the error mapping; ``exception_handlers`` adds to (or overrides) it.
    """
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        UndogateError: _undogate_error,
        HTTPException: _http_error,
    }
    handlers.update(exception_handlers or {})
    app = Starlette(
        routes=[
            *api_routes(),
            *inbox_routes(),
            *export_routes(),
            *rewind_routes(),
            *metrics_routes(),
            *routes,
        ],
        lifespan=lifespan,
        exception_handlers=handlers,
    )
    app.state.undogate = service
    app.state.openapi = views.json_value(openapi_document())
    app.add_middleware(SecurityHeaders)
    app.add_middleware(DrainUnreadBody)  # every client reads its answer, not a reset
    return app


__all__ = ["create_app"]
