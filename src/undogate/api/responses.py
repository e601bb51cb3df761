"""What every API answer shares: lossless JSON, the one error shape, the mapping from
errors to statuses, and the headers every response carries."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import receipts
from ..errors import RateLimited, UndogateError
from ..jsonvalue import JsonObject, dumps

# The one mapping from stable error codes to HTTP statuses.
STATUS_BY_CODE: dict[str, int] = {
    "invalid_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "stale_version": 409,
    "idempotency_key_reused": 409,
    "transition_not_allowed": 409,
    "preview_used": 409,
    "changed_since_preview": 409,
    "conflict": 409,
    "quarantined": 409,
    "later_job_overlaps": 409,
    "reconciliation_blocked": 409,
    "preview_expired": 410,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "limit_reached": 422,
    "quota_exceeded": 429,
    "rate_limited": 429,
    "too_many_streams": 429,
    "remote_contract_breach": 502,
    "remote_unavailable": 502,
    "blocked_address": 502,
    "missing_token": 503,
    "ledger_in_use": 503,
    "ledger_error": 503,
    "config_invalid": 500,
    "internal_error": 500,
}
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


def error_response(code: str, message: str, details: JsonObject | None = None) -> JSONResponse:
    status = STATUS_BY_CODE.get(code, 400)
    headers = {"WWW-Authenticate": 'Bearer realm="undogate"'} if status == 401 else None
    body: JsonObject = {"error": {"code": code, "message": message, "details": details or {}}}
    return JSONResponse(body, status_code=status, headers=headers)


def _details(exc: UndogateError) -> JsonObject:
    out: JsonObject = {}
    for key, value in exc.details.items():
        out[key] = receipts.json_value(value)
    return out


async def _undogate_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, UndogateError)
    if getattr(request.state, "agent_facing", False):
        message, details = receipts.agent_refusal(exc.code, exc.message, exc.details)
        response = error_response(exc.code, message, details)
    else:
        response = error_response(exc.code, exc.message, _details(exc))
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
    "STATUS_BY_CODE",
    "JSONResponse",
    "SecurityHeaders",
    "error_response",
]
