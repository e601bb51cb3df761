"""Request bodies: read within a bound, answered so that every client sees the answer,
and parsed by one rule for the API and the agents' MCP endpoint alike.

- A body over ``MAX_BODY_BYTES`` is ``payload_too_large``, whether its
  ``Content-Length`` says so up front or a chunked body runs over while it streams.
  Nothing past the limit is kept in memory (``read_body``).
- No answer leaves before the request's body has been read (``DrainUnreadBody``): an
  answer given early (a 413, or a 401 to a large body) first reads and drops the rest,
  up to ``DRAIN_MAX_BYTES`` in all and for at most ``DRAIN_TIMEOUT_S``. A server that
  answers and closes with bytes still unread makes its kernel send a reset, and a
  client that sends the whole body before reading (urllib, http.client, requests) gets
  "connection reset" instead of the answer. A client that asked for
  ``Expect: 100-continue`` and was not told to continue has sent nothing to drain.
- JSON that is not acceptable (invalid UTF-8, malformed, NaN, duplicate keys, unpaired
  surrogates) is ``invalid_request`` with the parser's ``reason``; numbers keep their
  exact text (``jsonvalue``).
"""

from __future__ import annotations

import anyio
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import InvalidRequest, PayloadTooLarge
from ..jsonvalue import JsonError, JsonObject, JsonValue, loads

MAX_BODY_BYTES = 1024 * 1024
# The largest body read to its end only so that its answer arrives, and for how long.
DRAIN_MAX_BYTES = 16 * MAX_BODY_BYTES
DRAIN_TIMEOUT_S = 10.0


def too_large() -> PayloadTooLarge:
    return PayloadTooLarge(f"the body is larger than {MAX_BODY_BYTES} bytes", limit=MAX_BODY_BYTES)


async def read_body(scope: Scope, receive: Receive) -> bytes:
    """The whole request body, at most ``MAX_BODY_BYTES``.

    Raises:
        PayloadTooLarge: the body is over the limit.
        ClientDisconnect: the client went away before the body ended.
    """
    declared = Headers(scope=scope).get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large()
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnect()
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large()
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class DrainUnreadBody:
    """ASGI middleware: before an answer starts, read and drop what is left of the
    request body (within ``DRAIN_MAX_BYTES`` and ``DRAIN_TIMEOUT_S``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length", "")
        read = 0
        asked = False  # whether anything asked for the body (a 100 Continue went out)
        ended = False

        async def tracked() -> Message:
            nonlocal read, asked, ended
            asked = True
            message = await receive()
            read += len(message.get("body", b""))
            ended = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start" and not ended:
                waiting = not asked and headers.get("expect", "").lower() == "100-continue"
                too_big = declared.isdigit() and int(declared) > DRAIN_MAX_BYTES
                if not waiting and not too_big:
                    with anyio.move_on_after(DRAIN_TIMEOUT_S):
                        while not ended and read <= DRAIN_MAX_BYTES:
                            await tracked()
            await send(message)

        await self.app(scope, tracked, answer)


def json_refusal(exc: JsonError) -> InvalidRequest:
    """The refusal of a body that is not acceptable JSON (the same on every surface)."""
    return InvalidRequest(f"the body is not acceptable JSON: {exc}", reason=exc.reason)


def require_object(value: JsonValue) -> JsonObject:
    """Raises: InvalidRequest (the body is JSON but not an object)."""
    if not isinstance(value, dict):
        raise InvalidRequest("the body must be a JSON object")
    return value


def parse_object(raw: bytes) -> JsonObject:
    """A body as a lossless JSON object.

    Raises:
        InvalidRequest: not acceptable JSON, or not an object.
    """
    try:
        value = loads(raw)
    except JsonError as exc:
        raise json_refusal(exc) from None
    return require_object(value)


__all__ = [
    "DRAIN_MAX_BYTES",
    "DRAIN_TIMEOUT_S",
    "MAX_BODY_BYTES",
    "DrainUnreadBody",
    "json_refusal",
    "parse_object",
    "read_body",
    "require_object",
    "too_large",
]
