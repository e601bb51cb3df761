"""The HTTP API (docs/operating.md): ``create_app`` builds the ASGI app from a routes list, a
lifespan and exception handlers.

Routes only translate: each declares the caller it needs (``routes.requires``), reads
the request (the body losslessly, ``bodies``), calls the ``Service`` and renders a view
from ``views``. Errors become HTTP statuses by class in one place
(``statuses``), for the web pages and ``/mcp`` too.
"""

from .app import create_app
from .bodies import json_body, parse_prepare
from .request_body import MAX_BODY_BYTES
from .responses import JSONResponse, error_response
from .routes import api_routes, requires, service
from .statuses import STATUS_BY_CODE, STATUS_BY_ERROR, status_for

__all__ = [
    "MAX_BODY_BYTES",
    "STATUS_BY_CODE",
    "STATUS_BY_ERROR",
    "JSONResponse",
    "api_routes",
    "create_app",
    "error_response",
    "json_body",
    "parse_prepare",
    "requires",
    "service",
    "status_for",
]
