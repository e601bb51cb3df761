"""The HTTP API (SPEC §9): ``create_app`` builds the ASGI app from a routes list, a
lifespan and exception handlers.

Routes only translate: they read the request (the body losslessly, ``bodies``), call
the ``Service`` (which authenticates, authorizes and calls the gateway), and render a
view from ``receipts``. Errors become HTTP statuses in one place (``responses``).
"""

from ..request_body import MAX_BODY_BYTES
from .app import create_app
from .bodies import json_body, parse_prepare
from .responses import STATUS_BY_CODE, JSONResponse, error_response
from .routes import api_routes, authenticate, service

__all__ = [
    "MAX_BODY_BYTES",
    "STATUS_BY_CODE",
    "JSONResponse",
    "api_routes",
    "authenticate",
    "create_app",
    "error_response",
    "json_body",
    "parse_prepare",
    "service",
]
