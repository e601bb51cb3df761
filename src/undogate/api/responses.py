"""What every API answer shares: lossless JSON, the one error shape (its status from
``statuses``), and the headers every response carries."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import views
from ..errors import RateLimited, UndogateError, log_refusal
from ..jsonvalue import JsonObject, dumps
from .statuses import status_for, status_for_code

NO_STORE = {"Cache-Control": "no-store"}
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)


class JSONResponse(Response):
    """A lossless JSON response: ``JsonNumber`` values keep their exact text."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content, sort_keys=False).encode("utf-8")


def error_response(
    code: str, message: str, details: JsonObject | None = None, *, status: int | None = None
) -> JSONResponse:
    """The one error shape. ``status`` defaults to the code's (``statuses``).

    Raises:
        KeyError: no status given and none mapped for ``code`` (a bug, never a 400).
    """
    status = status_for_code(code) if status is None else status
    headers = {"WWW-Authenticate": 'Bearer realm="undogate"'} if status == 401 else None
    body: JsonObject = {"error": {"code": code, "message": message, "details": details or {}}}
    return JSONResponse(body, status_code=status, headers=headers)


def _details(exc: UndogateError) -> JsonObject:
    out: JsonObject = {}
    for key, value in exc.details.items():
        out[key] = views.json_value(value)
    return out


async def _undogate_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, UndogateError)
    log_refusal(exc, f"{request.method} {request.url.path}")
    status = status_for(exc)
    if getattr(request.state, "agent_facing", False):
        message, details = views.agent_refusal(exc.code, exc.message, exc.details)
        response = error_response(exc.code, message, details, status=status)
    else:
        response = error_response(exc.code, exc.message, _details(exc), status=status)
    if isinstance(exc, RateLimited):
        response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {
        404: "not_found",
        405: "method_not_allowed",
        413: "payload_too_large",
        415: "unsupported_media_type",
    }.get(exc.status_code, "invalid_request")
    response = error_response(code, str(exc.detail))
    response.status_code = exc.status_code
    if exc.headers:
        response.headers.update(exc.headers)
    return response


class SecurityHeaders:
    """Every response: ``nosniff`` and ``no-referrer``; every API response: ``no-store``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        no_store = str(scope.get("path", "")).startswith("/api/")

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in (b"x-content-type-options", b"referrer-policy")
                ]
                headers.extend(SECURITY_HEADERS)
                if no_store and not any(k.lower() == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, wrapped)


__all__ = [
    "NO_STORE",
    "JSONResponse",
    "SecurityHeaders",
    "error_response",
]
