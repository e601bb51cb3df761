"""The MCP stdio transport of ``undogate mcp``, reading every line losslessly.

The SDK's own stdio transport decodes stdin leniently (invalid UTF-8 becomes U+FFFD)
and parses with floats. This one reads bytes: each line goes through
``wire.read_message`` (the rule ``/mcp`` uses too) and reaches the SDK with the
``InboundMessage`` attached as its request context, where the tools find their exact
arguments. A line that is not acceptable JSON, or longer than the API's body limit,
is answered here with a JSON-RPC error carrying the API's code; nothing else writes
to stdout.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server import MCPServer
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp.types import INVALID_REQUEST, jsonrpc_message_adapter

from ..api.request_body import MAX_BODY_BYTES, too_large
from .wire import WireRefusal, read_message


async def serve_stdio(
    server: MCPServer[Any], stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> None:
    """Serve ``server`` on stdin and stdout until the client closes stdin."""
    source = stdin or sys.stdin.buffer
    sink = anyio.wrap_file(stdout or sys.stdout.buffer)
    inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        async with inbound_send, outbound.clone() as refusals:
            async for line in _lines(source):
                await _pass_on(line, inbound_send, refusals)

    async def write() -> None:
        async with outbound_receive:
            async for message in outbound_receive:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await sink.write(text.encode() + b"\n")
                await sink.flush()

    # MCPServer runs stdio only through the SDK's lenient reader; its lowlevel server
    # serves any stream pair (the SDK's own in-memory client reaches it the same way).
    lowlevel = server._lowlevel_server
    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(write)
        await lowlevel.run(inbound, outbound, lowlevel.create_initialization_options())


async def _pass_on(
    line: bytes | None,
    to_server: MemoryObjectSendStream[SessionMessage | Exception],
    refusals: MemoryObjectSendStream[SessionMessage],
) -> None:
    try:
        if line is None:
            raise WireRefusal(too_large(), INVALID_REQUEST, None)
        message = read_message(line)
    except WireRefusal as refusal:
        await refusals.send(SessionMessage(refusal.response()))
        return
    try:
        parsed = jsonrpc_message_adapter.validate_json(message.sdk_bytes, by_name=False)
    except Exception as exc:  # handed to the SDK, as its own reader does
        await to_server.send(exc)
        return
    metadata = ServerMessageMetadata(request_context=message)
    await to_server.send(SessionMessage(parsed, metadata=metadata))


async def _lines(source: BinaryIO) -> AsyncIterator[bytes | None]:
    """Each non-blank line, or None for one over ``MAX_BODY_BYTES`` (skipped without
    being held in memory)."""
    while True:
        line = await anyio.to_thread.run_sync(source.readline, MAX_BODY_BYTES + 1)
        if not line:
            return
        complete = line.endswith(b"\n")
        if len(line) - complete > MAX_BODY_BYTES:
            while not complete:
                rest = await anyio.to_thread.run_sync(source.readline, MAX_BODY_BYTES)
                complete = not rest or rest.endswith(b"\n")
            yield None
        elif line.strip():
            yield line


__all__ = ["serve_stdio"]
