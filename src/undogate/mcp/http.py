"""The agents' MCP endpoint: ``/mcp`` on ``undogate serve`` (streamable HTTP, stateless,
JSON answers).

In front of the SDK's session manager, each request goes through, in order:

1. the agent token, authenticated by the ``Service`` as on the API (401/403);
2. the body, read by the API's rule (``request_body``): over the limit it is a 413 in
   the API's error shape, never a JSON-RPC error from a cut-off read;
3. the message, read losslessly (``wire``): a message that is not acceptable JSON
   gets a JSON-RPC error carrying the API's code; otherwise it goes to the SDK with the
   ``InboundMessage`` in the scope, where the tools find their exact arguments;
4. a request that opens a stream (``GET``, or a ``subscriptions/listen`` call) takes a
   slot: at most ``limits.max_mcp_streams_per_agent`` per agent and
   ``limits.max_mcp_streams`` in all, refused beyond with ``too_many_streams`` (429).
   The gateway never sends anything on such a stream, so one that has carried no event
   for ``limits.mcp_stream_idle_s`` is ended (keep-alive comments do not count).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import views
from ..api import error_response, parse_prepare, status_for
from ..api.request_body import read_body
from ..config import AGENT_TOOLS, Limits
from ..errors import TooManyStreams, UndogateError, log_refusal
from ..jsonvalue import JsonObject, JsonValue
from ..service import AgentCaller, Service
from .tools import AgentBackend, Refusal, build_server
from .wire import INBOUND_KEY, InboundMessage, WireRefusal, read_message

CALLER_KEY = "undogate.caller"  # the ASGI scope key of the authenticated agent
ASK_FOR_BEARER = "send the agent token as 'Authorization: Bearer'"
LISTEN = "subscriptions/listen"  # the one POST whose answer is a stream

# Bearer tokens are never sent by a browser on its own, so a rebinding page cannot act as
# an agent; the gateway may sit behind any host name.
_NO_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


class StreamSlots:
    """The open streams on ``/mcp``, counted per agent and in total."""

    def __init__(self, limits: Limits) -> None:
        self.per_agent = limits.max_mcp_streams_per_agent
        self.total = limits.max_mcp_streams
        self._open: Counter[str] = Counter()

    @property
    def open(self) -> int:
        return self._open.total()

    @contextmanager
    def held(self, agent_id: str) -> Iterator[None]:
        """Hold one slot for ``agent_id`` while the stream is open.

        Raises:
            TooManyStreams: the agent's streams, or all streams, are at their bound.
        """
        if self._open[agent_id] >= self.per_agent:
            raise TooManyStreams(
                f"this agent already has {self.per_agent} open MCP streams; close one first",
                limit="max_mcp_streams_per_agent",
            )
        if self.open >= self.total:
            raise TooManyStreams(
                f"{self.total} MCP streams are open on this gateway; try again later",
                limit="max_mcp_streams",
            )
        self._open[agent_id] += 1
        try:
            yield
        finally:
            self._open[agent_id] -= 1


@dataclass(frozen=True)
class ServiceBackend:
    """The tools in process, as one authenticated agent."""

    service: Service
    agent: AgentCaller

    async def list_resources(self) -> list[JsonValue]:
        try:
            found = self.service.agents.list_resources(self.agent)
        except UndogateError as exc:
            log_refusal(exc, "MCP list_resources")
            raise Refusal.of(exc) from None
        return [views.resource_view(r) for r in found]

    async def prepare(self, body: JsonObject) -> JsonValue:
        try:
            request = parse_prepare(body)  # the API's own parser: one door for both surfaces
            done = await self.service.agents.prepare(self.agent, request)
        except UndogateError as exc:
            log_refusal(exc, "MCP prepare_changes")
            raise Refusal.of(exc) from None
        return views.agent_receipt(done.job, replay=done.replay)

    async def job_status(self, job_id: str) -> JsonValue:
        try:
            status = await self.service.agents.job_status(self.agent, job_id)
        except UndogateError as exc:
            log_refusal(exc, "MCP job_status")
            raise Refusal.of(exc) from None
        return status.to_json()


class McpApp:
    """The ASGI app for ``/mcp``: hands each authenticated request to the MCP server
    holding exactly that agent's tools.

    Mount it as a route (``Route("/mcp", endpoint=app)``) and run ``app.lifespan()`` in
    the host app's lifespan.
    """

    def __init__(self, service: Service) -> None:
        self.service = service
        config = service.config
        self.streams = StreamSlots(config.limits)
        self.stream_idle_s = config.limits.mcp_stream_idle_s
        tool_sets = {offered(service.agents.opted_in(a.id)) for a in config.agents} | {()}
        self._servers: dict[tuple[str, ...], MCPServer[Any]] = {}
        for tools in sorted(tool_sets):
            server = build_server(tools, self._backend_for)
            server.streamable_http_app(
                stateless_http=True, json_response=True, transport_security=_NO_HOST_CHECK
            )
            self._servers[tools] = server

    def _backend_for(self, ctx: Context[Any, Any]) -> AgentBackend:
        scope = getattr(ctx.request_context.request, "scope", None)
        agent = scope.get(CALLER_KEY) if isinstance(scope, dict) else None
        if not isinstance(agent, AgentCaller):
            raise Refusal("unauthorized", "no agent token", {})
        return ServiceBackend(self.service, agent)

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Run the MCP session managers (the host app's lifespan must enter this)."""
        async with AsyncExitStack() as stack:
            for server in self._servers.values():
                await stack.enter_async_context(server.session_manager.run())
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        try:
            agent = await self._agent(scope)
        except UndogateError as exc:
            log_refusal(exc, "MCP")
            await error_response(exc.code, exc.message, status=status_for(exc))(
                scope, receive, send
            )
            return
        message: InboundMessage | None = None
        try:
            if scope["method"] == "POST":
                message = read_message(await read_body(scope, receive))
        except UndogateError as exc:
            await _refused(exc)(scope, receive, send)
            return
        except WireRefusal as refusal:
            rpc_error = Response(refusal.body(), 400, media_type="application/json")
            await rpc_error(scope, receive, send)
            return
        except ClientDisconnect:
            return
        server = self._servers.get(offered(self.service.agents.tools(agent)))
        handle = (server or self._servers[()]).session_manager.handle_request
        inner: Scope = {**scope, CALLER_KEY: agent}
        if message is not None:
            inner = {**_with_body(inner, message), INBOUND_KEY: message}
            receive = _replay(message.sdk_bytes, receive)
        opens_stream = message.method == LISTEN if message else scope["method"] == "GET"
        if not opens_stream:
            await handle(inner, receive, send)
            return
        try:
            with self.streams.held(agent.agent_id):
                await _until_idle(self.stream_idle_s, handle, inner, receive, send)
        except TooManyStreams as exc:
            await _refused(exc)(scope, receive, send)

    async def _agent(self, scope: Scope) -> AgentCaller:
        """The one question ``/mcp`` asks: an agent token. Raises: Unauthorized, Forbidden."""
        header = Headers(scope=scope).get("authorization", "")
        # An over-long token gets the same words as none (as /mcp has always said).
        principal = await self.service.access.authenticate_bearer(
            header, ask=ASK_FOR_BEARER, over_long=ASK_FOR_BEARER
        )
        return AgentCaller.of(principal, "mcp", "the MCP endpoint")


def _refused(exc: UndogateError) -> Response:
    """A refusal to an agent, exactly as the API words it (``api._undogate_error``)."""
    log_refusal(exc, "MCP")
    sentence, details = views.agent_refusal(exc.code, exc.message, exc.details)
    return error_response(exc.code, sentence, details, status=status_for(exc))


def _with_body(scope: Scope, message: InboundMessage) -> Scope:
    """The scope with ``Content-Length`` matching the body the SDK is handed."""
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(message.sdk_bytes)).encode()))
    return {**scope, "headers": headers}


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` that gives ``body`` once, then waits on the connection (for the end of
    a stream: the client going away)."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _until_idle(
    idle_s: float, app: ASGIApp, scope: Scope, receive: Receive, send: Send
) -> None:
    """Serve a stream, ending it once ``idle_s`` pass after its start without an event."""
    watch = anyio.CancelScope()
    started = ended = False

    async def watched(message: Message) -> None:
        nonlocal started, ended
        if message["type"] == "http.response.start":
            started = True
            watch.deadline = anyio.current_time() + idle_s
        elif message["type"] == "http.response.body":
            body: bytes = message.get("body", b"")
            if body and not body.startswith(b":"):  # an SSE line starting ':' is a comment
                watch.deadline = anyio.current_time() + idle_s
            ended = not message.get("more_body", False)
        await send(message)

    with watch:
        await app(scope, receive, watched)
    if watch.cancelled_caught and started and not ended:
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def offered(opted: tuple[str, ...]) -> tuple[str, ...]:
    """Opted-in tools in a fixed order (so equal sets share one server)."""
    return tuple(t for t in AGENT_TOOLS if t in opted)


__all__ = ["CALLER_KEY", "McpApp", "ServiceBackend", "StreamSlots", "offered"]
