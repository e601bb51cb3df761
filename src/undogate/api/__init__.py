"""The HTTP API (SPEC §9): ``create_app`` builds the ASGI app from a routes list, a
lifespan and exception handlers.

Routes only translate: they authenticate the bearer credential, parse the body
losslessly (``bodies``), call one ``Gateway`` or ``Keyring`` method in a worker thread,
and render a view from ``receipts``. Domain errors become HTTP statuses in one place
(``responses``).
"""

from ..request_body import MAX_BODY_BYTES
from .app import create_app
from .bodies import json_body, parse_prepare
from .responses import STATUS_BY_CODE, JSONResponse, error_response
from .routes import Services, api_routes, authenticate, services

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
