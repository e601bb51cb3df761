"""The agents' JSON-RPC messages, read by undogate before the MCP SDK sees them.

The MCP SDK parses JSON-RPC with floats: ``0.1000000000000000055511151231257827``
becomes ``0.1``, ``1.50`` becomes ``1.5``, a duplicate key silently wins and ``1e400``
becomes infinity. Tool arguments are an agent's data and must arrive exactly as
``POST /api/v1/jobs`` reads a body, so both MCP transports (``http``, ``stdio``)
hand every raw message to ``read_message`` first, and the SDK only routes:

- The message is parsed by the API's own rule (``jsonvalue.loads``: numbers keep their
  text, duplicate keys and invalid UTF-8 are refused, with the same ``reason``).
- A ``tools/call`` reaches the SDK with its ``arguments`` emptied; the transport
  attaches the ``InboundMessage`` (the ASGI scope under ``INBOUND_KEY``, or the stdio
  message's request context) and the tool takes its arguments from there
  (``InboundMessage.tool_arguments``). A call whose message is not acceptable JSON is
  still recognisable (read leniently, only to find its id and tool) and is refused by
  the tool like any other bad input, so the agent can correct it.
- Any other message that is not acceptable JSON never reaches the SDK: the transport
  answers a JSON-RPC error whose ``data.code`` (and ``data.reason``) are the API's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

from .. import views
from ..api.request_body import json_refusal, require_object
from ..errors import UndogateError
from ..jsonvalue import JsonError, JsonObject, JsonValue, dumps, loads

INBOUND_KEY = "undogate.mcp_message"  # the ASGI scope key of the message on /mcp
TOOL_CALL = "tools/call"


@dataclass(frozen=True)
class InboundMessage:
    """One JSON-RPC message as undogate read it off the wire."""

    sdk_bytes: bytes  # what the SDK parses: the message, with a tool call's arguments emptied
    method: str | None
    tool_call: bool = False
    arguments: JsonValue = None  # a tool call's arguments, exactly as sent
    error: JsonError | None = None  # why a tool call's message is not acceptable JSON

    def tool_arguments(self) -> JsonObject:
        """The call's arguments, refused exactly as the API refuses a request body.

        Raises:
            InvalidRequest: not acceptable JSON, or not an object.
        """
        if self.error is not None:
            raise json_refusal(self.error)
        return require_object(self.arguments)


class WireRefusal(Exception):
    """A message the SDK never sees; the transport answers ``response()`` instead."""

    def __init__(self, error: UndogateError, rpc_code: int, request_id: str | int | None) -> None:
        super().__init__(error.message)
        self.error = error
        self.rpc_code = rpc_code
        self.request_id = request_id

    def response(self) -> JSONRPCError:
        """The JSON-RPC error: ``data`` carries the stable code and the safe details."""
        code = self.error.code
        sentence, details = views.agent_refusal(code, self.error.message, self.error.details)
        data: JsonObject = {"code": code, **details}
        return JSONRPCError(
            jsonrpc="2.0",
            id=self.request_id,
            error=ErrorData(code=self.rpc_code, message=f"{code}: {sentence}", data=_plain(data)),
        )

    def body(self) -> bytes:
        return self.response().model_dump_json(by_alias=True, exclude_unset=True).encode()


def read_message(raw: bytes) -> InboundMessage:
    """Read one JSON-RPC message (an HTTP body, or one line of stdio).

    Raises:
        WireRefusal: not JSON at all (``PARSE_ERROR``), or a message other than a tool
            call that is not acceptable JSON (``INVALID_REQUEST``).
    """
    try:
        message = loads(raw)
    except JsonError as exc:
        return _read_unacceptable(raw, exc)
    if not _is_tool_call(message):
        return InboundMessage(raw, _method(message))
    assert isinstance(message, dict)
    params = message["params"]
    assert isinstance(params, dict)
    envelope: JsonObject = {**message, "params": {**params, "arguments": {}}}
    arguments = params.get("arguments")
    return InboundMessage(
        dumps(envelope, sort_keys=False).encode(),
        TOOL_CALL,
        tool_call=True,
        arguments={} if arguments is None else arguments,
    )


def _read_unacceptable(raw: bytes, error: JsonError) -> InboundMessage:
    refusal = json_refusal(error)
    try:
        # Only to find the id and the tool; nothing read this way reaches a tool.
        text = raw.decode("utf-8", errors="surrogateescape")
        message: Any = json.loads(text, object_pairs_hook=_unsure_of_duplicate_ids)
    except (ValueError, RecursionError):
        raise WireRefusal(refusal, PARSE_ERROR, None) from None
    if not _is_tool_call(message):
        raise WireRefusal(refusal, INVALID_REQUEST, _request_id(message))
    envelope = {**message, "params": {**message["params"], "arguments": {}}}
    return InboundMessage(json.dumps(envelope).encode(), TOOL_CALL, tool_call=True, error=error)


def _unsure_of_duplicate_ids(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of a leniently read message; an ``id`` given twice is no id at all."""
    found = dict(pairs)
    if sum(key == "id" for key, _ in pairs) > 1:
        found["id"] = None
    return found


def _is_tool_call(message: object) -> bool:
    return (
        isinstance(message, dict)
        and message.get("method") == TOOL_CALL
        and message.get("id") is not None
        and isinstance(message.get("params"), dict)
    )


def _method(message: JsonValue) -> str | None:
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None


def _request_id(message: object) -> str | int | None:
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def _plain(value: JsonObject) -> dict[str, Any]:
    """Error details as plain Python data for the SDK's models (they are codes,
    member names and small integers: nothing whose digits could be lost)."""
    plain: dict[str, Any] = json.loads(dumps(value))
    return plain


def inbound_message(transport_request: object) -> InboundMessage | None:
    """The message a tool call arrived in: the stdio transport attaches it as the
    request context itself; streamable HTTP's request context is the Starlette request,
    whose scope holds it."""
    if isinstance(transport_request, InboundMessage):
        return transport_request
    scope = getattr(transport_request, "scope", None)
    found = scope.get(INBOUND_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, InboundMessage) else None


__all__ = [
    "INBOUND_KEY",
    "InboundMessage",
    "WireRefusal",
    "inbound_message",
    "read_message",
]
