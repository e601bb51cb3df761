"""The agent tools over MCP (SPEC §9): ``list_resources`` and ``prepare_changes``.

One set of tools, two transports:

- **Streamable HTTP** (``build_mcp_app``), mounted at ``/mcp`` on ``undogate serve``.
  Every HTTP request carries an agent token as bearer; it is authenticated by the
  ``Keyring`` on each request, and the tools call the ``Gateway`` in process.
- **stdio** (``run_stdio``, ``undogate mcp``) for agents that launch tools as
  subprocesses. It forwards to a running gateway's HTTP API (``UNDOGATE_URL``) with
  the agent token from ``UNDOGATE_AGENT_TOKEN``.

An agent sees only the tools its config lists (``Config.agent_tools``); there is no
tool to apply, confirm, undo, reconcile or reject: those are a person's acts. The
tools are thin: they call the same service functions as the API
(``Gateway.list_resources``, ``parse_prepare`` + ``Gateway.prepare``) and render the
same views (``receipts.resource_view``, ``receipts.agent_receipt``). Results never
carry URLs, tokens or before-values; refusals are MCP tool errors whose text starts
with the stable error code and says what the model can do next.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio
import httpx
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send
from typing_extensions import TypedDict  # pydantic needs it below Python 3.12

from . import __version__, receipts
from .auth import Keyring, Principal
from .config import AGENT_TOOLS, Config
from .engine import Gateway
from .errors import Forbidden, UndogateError
from .jsonvalue import JsonError, JsonObject, JsonValue, dumps, from_python, loads

URL_ENV = "UNDOGATE_URL"
TOKEN_ENV = "UNDOGATE_AGENT_TOKEN"  # noqa: S105 - a variable name
PRINCIPAL_KEY = "undogate.principal"  # the ASGI scope key the HTTP auth layer fills

INSTRUCTIONS = (
    "undogate lets you propose changes to a few configured external records and "
    "documents. You prepare a job; a person reviews the exact before/after values and "
    "confirms or rejects it. You can never apply, confirm, undo or reject anything, and "
    "preparing writes nothing to the external system."
)

LIST_RESOURCES_DESCRIPTION = """\
List the external resources you may prepare changes to.

Each resource has an `id` (use it in prepare_changes), a `name`, a `kind` and `fields`:
- kind `json_record`: a JSON record; you may set or remove only the listed top-level
  `fields`.
- kind `webdav_text`: a whole UTF-8 text document; a change replaces the whole text.

Read-only: it changes nothing, and it never shows current values, URLs or credentials.
Safe to call at any time and as often as you like."""

PREPARE_CHANGES_DESCRIPTION = """\
Prepare a job of 1 to 8 changes for a person to review. It writes NOTHING to the
external system: undogate reads each resource now and records its current and planned
values. A person then reviews the exact before/after values and confirms or rejects
the job. You cannot apply, confirm, undo or reject a job, and you never need to.

Each change names a resource `id` from list_resources and then, for a `json_record`,
`set` (field -> new JSON value) and/or `remove` (field names), or, for a
`webdav_text`, `text` (the complete new document). Optional per change:
`expected_version` (the version you based the change on; if the resource has moved on,
nothing is prepared and you get `stale_version` with the current version) and
`assertion_kind` (how you know the value: observed, inferred, imported or supplied).
`summary` tells the reviewer what and why, in one or two sentences.

Retry safely: always pass an `idempotency_key` (a new unique string, e.g. a UUID, per
intended job). If a call fails, times out or you are unsure it ran, call again with
the same key and the same input: you get the original job back (`replay: true`) and no
duplicate is created. The same key with different input is refused
(`idempotency_key_reused`): use a new key for a new change.

Returns the job id, its state, the resources and fields it will touch, and the path
where a person reviews it. Errors start with a stable code (for example
`stale_version`, `not_found`, `invalid_request`) followed by what to do next."""


# -- tool input and output ----------------------------------------------------------


class ChangeInput(BaseModel):
    """One change in a prepare_changes call."""

    model_config = ConfigDict(extra="forbid")

    resource: str = Field(description="A resource id from list_resources.")
    set: dict[str, Any] | None = Field(
        default=None,
        description="json_record only: field name -> new JSON value (top-level fields only).",
    )
    remove: list[str] | None = Field(
        default=None, description="json_record only: field names to remove."
    )
    text: str | None = Field(
        default=None, description="webdav_text only: the complete new text of the document."
    )
    expected_version: str | None = Field(
        default=None,
        description="The version (entity tag) you based this change on; a mismatch is "
        "refused as stale_version and nothing is prepared.",
    )
    assertion_kind: Literal["observed", "inferred", "imported", "supplied"] | None = Field(
        default=None,
        description="How you know the new value: observed, inferred, imported or supplied.",
    )


class ResourceInfo(TypedDict):
    id: str
    name: str
    kind: str
    fields: list[str]


class ResourceList(TypedDict):
    resources: list[ResourceInfo]


class TouchedChange(TypedDict):
    resource: str
    kind: str
    fields: list[str]


class JobReceipt(TypedDict):
    job_id: str
    state: str
    replay: bool
    changes: list[TouchedChange]
    review: str
    review_path: str


# -- refusals -------------------------------------------------------------------------


@dataclass(eq=False)
class Refusal(Exception):
    """A refusal from the service, whichever way it was reached (in process or HTTP)."""

    code: str
    message: str
    details: Mapping[str, Any]

    @classmethod
    def of(cls, exc: UndogateError) -> Refusal:
        return cls(exc.code, exc.message, exc.details)


_NEXT_STEP = {
    "stale_version": "Nothing was prepared. Read the resource again and prepare again, "
    "with expected_version set to the current_version below.",
    "idempotency_key_reused": "Nothing new was prepared. To make a different change use a "
    "new idempotency_key; to get the original job back, repeat its exact input.",
    "not_found": "Nothing was prepared. Use only resource ids that list_resources returns.",
    "invalid_request": "Nothing was prepared. Fix the input and call again.",
    "forbidden": "Nothing was prepared. Only a person can change this; do not retry.",
    "limit_reached": "Nothing was prepared. A person has to make room; do not retry now.",
    "quota_exceeded": "Nothing was prepared. Too many of your jobs wait for a person; do "
    "not retry until a person has applied or rejected some of them.",
    "rate_limited": "Nothing was prepared. Wait retry_after_s seconds (in the details), then "
    "call again with the same idempotency_key.",
    "unauthorized": "A person has to issue a new agent token; do not retry.",
    "remote_unavailable": "Nothing was prepared. You may retry later with the same "
    "idempotency_key.",
    "remote_contract_breach": "Nothing was prepared. A person has to check that system; "
    "do not retry.",
    "blocked_address": "Nothing was prepared. A person has to fix the configuration; do not retry.",
    "missing_token": "Nothing was prepared. A person has to set the credential; do not retry.",
}
_UNKNOWN_OUTCOME = (
    "It is unknown whether a job was prepared: call again with the same idempotency_key "
    "and the same input; a replay returns the job if it exists and creates no duplicate."
)


def agent_error(refusal: Refusal) -> ToolError:
    """The tool error a model sees: ``<code>: <sentence> <next step> Details: {...}``."""
    code = refusal.code
    sentence, details = receipts.agent_refusal(code, refusal.message, refusal.details)
    text = f"{code}: {sentence} {_NEXT_STEP.get(code, _UNKNOWN_OUTCOME)}"
    if details:
        text += " Details: " + dumps(details)
    return ToolError(text)


# -- the service behind the tools -------------------------------------------------------


class AgentBackend(Protocol):
    """What the tools call. Raises ``Refusal`` for every refusal."""

    async def list_resources(self) -> list[JsonValue]: ...

    async def prepare(self, body: JsonObject) -> JsonValue: ...


@dataclass(frozen=True)
class GatewayBackend:
    """The tools in process, as one authenticated agent (streamable HTTP)."""

    gateway: Gateway
    principal: Principal

    @property
    def agent_id(self) -> str:
        assert self.principal.agent_id is not None
        return self.principal.agent_id

    async def list_resources(self) -> list[JsonValue]:
        if "list_resources" not in self.gateway.config.agent_tools(self.agent_id):
            raise Refusal.of(Forbidden("this agent is not opted in to list_resources"))
        return [receipts.resource_view(r) for r in self.gateway.list_resources(self.agent_id)]

    async def prepare(self, body: JsonObject) -> JsonValue:
        from .api import parse_prepare  # the API's own parser: one door for both surfaces

        try:
            request = parse_prepare(body)
            done = await anyio.to_thread.run_sync(
                self.gateway.prepare, self.principal.actor("mcp"), self.agent_id, request
            )
        except UndogateError as exc:
            raise Refusal.of(exc) from None
        return receipts.agent_receipt(done.job, replay=done.replay)


class RemoteBackend:
    """The tools forwarded to a running gateway's HTTP API (stdio)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._client = httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            trust_env=False,
            follow_redirects=False,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _call(self, method: str, path: str, body: JsonObject | None = None) -> JsonValue:
        content = dumps(body, sort_keys=False) if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        try:
            response = await self._client.request(method, path, content=content, headers=headers)
        except httpx.HTTPError:
            raise Refusal("gateway_unavailable", "undogate could not be reached", {}) from None
        try:
            value = loads(response.content)
        except JsonError:
            raise Refusal(
                "gateway_error", f"undogate answered HTTP {response.status_code}", {}
            ) from None
        if response.status_code >= 400:
            error = value.get("error") if isinstance(value, dict) else None
            if not isinstance(error, dict):
                raise Refusal("gateway_error", f"undogate answered HTTP {response.status_code}", {})
            details = error.get("details")
            raise Refusal(
                str(error.get("code") or "gateway_error"),
                str(error.get("message") or f"HTTP {response.status_code}"),
                details if isinstance(details, dict) else {},
            )
        return value

    async def list_resources(self) -> list[JsonValue]:
        value = await self._call("GET", "/api/v1/resources")
        resources = value.get("resources") if isinstance(value, dict) else None
        if not isinstance(resources, list):
            raise Refusal("gateway_error", "undogate listed no resources", {})
        return resources

    async def prepare(self, body: JsonObject) -> JsonValue:
        return await self._call("POST", "/api/v1/jobs", body)

    async def agent_tools(self) -> tuple[str, ...]:
        """The tools the token's agent is opted in to (``GET /api/v1/agent``).

        Raises:
            Refusal: the gateway is unreachable, refuses the token, or answers oddly.
        """
        value = await self._call("GET", "/api/v1/agent")
        listed = value.get("tools") if isinstance(value, dict) else None
        if not isinstance(listed, list):
            raise Refusal("gateway_error", "undogate gave an unexpected answer", {})
        return tuple(t for t in AGENT_TOOLS if t in listed)


# -- the tools ---------------------------------------------------------------------------

BackendFor = Callable[[Context[Any, Any]], AgentBackend]


def _text(value: JsonValue) -> str:
    if not isinstance(value, str):
        raise Refusal("gateway_error", "undogate gave an unexpected answer", {})
    return value


def _texts(value: JsonValue) -> list[str]:
    if not isinstance(value, list):
        raise Refusal("gateway_error", "undogate gave an unexpected answer", {})
    return [_text(v) for v in value]


def _member(value: JsonValue, key: str) -> JsonValue:
    if not isinstance(value, dict):
        raise Refusal("gateway_error", "undogate gave an unexpected answer", {})
    return value.get(key)


def resource_info(value: JsonValue) -> ResourceInfo:
    """Exactly the members an agent may see of a resource (whatever the source sent)."""
    return ResourceInfo(
        id=_text(_member(value, "id")),
        name=_text(_member(value, "name")),
        kind=_text(_member(value, "kind")),
        fields=_texts(_member(value, "fields")),
    )


def job_receipt(value: JsonValue) -> JobReceipt:
    """Exactly the members of the minimal agent receipt (never values or URLs)."""
    changes = _member(value, "changes")
    if not isinstance(changes, list):
        raise Refusal("gateway_error", "undogate gave an unexpected answer", {})
    replay = _member(value, "replay")
    return JobReceipt(
        job_id=_text(_member(value, "job_id")),
        state=_text(_member(value, "state")),
        replay=replay is True,
        changes=[
            TouchedChange(
                resource=_text(_member(c, "resource")),
                kind=_text(_member(c, "kind")),
                fields=_texts(_member(c, "fields")),
            )
            for c in changes
        ],
        review=_text(_member(value, "review")),
        review_path=_text(_member(value, "review_path")),
    )


def prepare_body(
    summary: str,
    changes: Sequence[ChangeInput],
    idempotency_key: str | None,
    attribution_label: str | None,
) -> JsonObject:
    """The tool's arguments as the API's JSON body (``parse_prepare`` reads it).

    Raises:
        Refusal: a value that is not JSON (a non-finite number).
    """
    raw: dict[str, Any] = {
        "summary": summary,
        "changes": [c.model_dump(exclude_none=True) for c in changes],
    }
    if idempotency_key is not None:
        raw["idempotency_key"] = idempotency_key
    if attribution_label is not None:
        raw["attribution_label"] = attribution_label
    try:
        body = from_python(raw)
    except (JsonError, TypeError):
        raise Refusal(
            "invalid_request", "every value must be JSON (finite numbers only)", {}
        ) from None
    assert isinstance(body, dict)
    return body


def build_server(tools: Sequence[str], backend_for: BackendFor) -> MCPServer:
    """An MCP server offering exactly ``tools`` (a subset of ``AGENT_TOOLS``)."""
    server: MCPServer = MCPServer(
        "undogate",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )

    async def list_resources(ctx: Context[Any, Any]) -> ResourceList:
        try:
            found = await backend_for(ctx).list_resources()
            return ResourceList(resources=[resource_info(r) for r in found])
        except Refusal as refusal:
            raise agent_error(refusal) from None

    async def prepare_changes(
        summary: str,
        changes: list[ChangeInput],
        ctx: Context[Any, Any],
        idempotency_key: str | None = None,
        attribution_label: str | None = None,
    ) -> JobReceipt:
        try:
            body = prepare_body(summary, changes, idempotency_key, attribution_label)
            return job_receipt(await backend_for(ctx).prepare(body))
        except Refusal as refusal:
            raise agent_error(refusal) from None

    if "list_resources" in tools:
        server.add_tool(
            list_resources,
            name="list_resources",
            title="List the resources you may change",
            description=LIST_RESOURCES_DESCRIPTION,
            annotations=ToolAnnotations(
                read_only_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        )
    if "prepare_changes" in tools:
        server.add_tool(
            prepare_changes,
            name="prepare_changes",
            title="Prepare changes for a person to review",
            description=PREPARE_CHANGES_DESCRIPTION,
            annotations=ToolAnnotations(
                read_only_hint=False,
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=False,
            ),
        )
    return server


# -- streamable HTTP: /mcp on `undogate serve` ----------------------------------------------

# Bearer tokens are never sent by a browser on its own, so a rebinding page cannot act as
# an agent; the gateway may sit behind any host name.
_NO_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


class McpApp:
    """The ASGI app for ``/mcp``: authenticates each request's agent token and hands it
    to the MCP server holding exactly that agent's tools.

    Mount it as a route (``Route("/mcp", endpoint=app)``) and run ``app.lifespan()`` in
    the host app's lifespan.
    """

    def __init__(self, gateway: Gateway, keyring: Keyring) -> None:
        self.gateway = gateway
        self.keyring = keyring
        tool_sets = {config_tools(gateway.config, a.id) for a in gateway.config.agents} | {()}
        self._servers: dict[tuple[str, ...], MCPServer] = {}
        for tools in sorted(tool_sets):
            server = build_server(tools, self._backend_for)
            server.streamable_http_app(
                stateless_http=True, json_response=True, transport_security=_NO_HOST_CHECK
            )
            self._servers[tools] = server

    def _backend_for(self, ctx: Context[Any, Any]) -> AgentBackend:
        scope = getattr(ctx.request_context.request, "scope", None)
        principal = scope.get(PRINCIPAL_KEY) if isinstance(scope, dict) else None
        if not isinstance(principal, Principal) or principal.agent_id is None:
            raise Refusal("unauthorized", "no agent token", {})
        return GatewayBackend(self.gateway, principal)

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Run the MCP session managers (the host app's lifespan must enter this)."""
        async with AsyncExitStack() as stack:
            for server in self._servers.values():
                await stack.enter_async_context(server.session_manager.run())
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from .api import error_response

        if scope["type"] != "http":
            return
        header = Headers(scope=scope).get("authorization", "")
        scheme, _, key = header.partition(" ")
        key = key.strip()
        try:
            if scheme.lower() != "bearer" or not key or len(key) > 512:
                raise Refusal("unauthorized", "send the agent token as 'Authorization: Bearer'", {})
            try:
                principal = self.keyring.verified(key)
                if principal is None:
                    principal = await anyio.to_thread.run_sync(self.keyring.authenticate, key)
            except UndogateError as exc:
                raise Refusal.of(exc) from None
            if principal.kind != "agent" or principal.agent_id is None:
                raise Refusal("forbidden", "the MCP endpoint is for agent tokens", {})
        except Refusal as refusal:
            response = error_response(refusal.code, refusal.message)
            await response(scope, receive, send)
            return
        server = self._servers.get(config_tools(self.gateway.config, principal.agent_id))
        server = server or self._servers[()]
        await server.session_manager.handle_request(
            {**scope, PRINCIPAL_KEY: principal}, _bounded(receive), send
        )


def _bounded(receive: Receive) -> Receive:
    """``receive`` that stops a request body at MAX_BODY_BYTES, however it is sent
    (a chunked body has no Content-Length to refuse up front)."""
    from .api import MAX_BODY_BYTES

    seen = 0

    async def bounded() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > MAX_BODY_BYTES:
                return {"type": "http.disconnect"}  # stop reading: the body is too large
        return message

    return bounded


def config_tools(config: Config, agent_id: str) -> tuple[str, ...]:
    """The agent's tools in a fixed order (so equal sets share one server)."""
    opted = config.agent_tools(agent_id)
    return tuple(t for t in AGENT_TOOLS if t in opted)


def build_mcp_app(gateway: Gateway, keyring: Keyring) -> McpApp:
    """The streamable-HTTP app to mount at ``/mcp`` (agent token as bearer)."""
    return McpApp(gateway, keyring)


# -- stdio: `undogate mcp` ----------------------------------------------------------------


def run_stdio(url: str | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Serve the agent tools over stdio, forwarding to the gateway at ``url`` (default
    ``UNDOGATE_URL``) with the agent token in ``UNDOGATE_AGENT_TOKEN``. Returns an exit
    status: 0 when the client closed the session, 2 when the gateway refused to start it.
    """
    env = os.environ if environ is None else environ
    url = url or env.get(URL_ENV)
    token = env.get(TOKEN_ENV)
    if not url or not token:
        _say(f"set {URL_ENV} (the gateway, e.g. http://127.0.0.1:8080) and {TOKEN_ENV}")
        return 2
    from .server import require_safe_gateway_url

    try:
        require_safe_gateway_url(url)
    except UndogateError as exc:
        _say(f"error [{exc.code}]: {exc.message}")
        return 2
    return anyio.run(_serve_stdio, url, token)


async def _serve_stdio(url: str, token: str) -> int:
    backend = RemoteBackend(url, token)
    try:
        try:
            tools = await backend.agent_tools()
        except Refusal as refusal:
            where = f" at {url}" if refusal.code == "gateway_unavailable" else ""
            _say(f"error [{refusal.code}]: {refusal.message}{where}")
            return 2
        if not tools:
            _say("warning: this agent is opted in to no tools (see `agents` in the config)")
        await build_server(tools, lambda ctx: backend).run_stdio_async()
        return 0
    finally:
        await backend.aclose()


def _say(line: str) -> None:
    print(f"undogate mcp: {line}", file=sys.stderr, flush=True)


def main() -> None:
    """``python -m undogate.mcp_server``: the same as ``undogate mcp``."""
    sys.exit(run_stdio())


if __name__ == "__main__":  # pragma: no cover
    main()


__all__ = [
    "PRINCIPAL_KEY",
    "TOKEN_ENV",
    "URL_ENV",
    "AgentBackend",
    "ChangeInput",
    "GatewayBackend",
    "JobReceipt",
    "McpApp",
    "Refusal",
    "RemoteBackend",
    "ResourceInfo",
    "agent_error",
    "build_mcp_app",
    "build_server",
    "job_receipt",
    "prepare_body",
    "resource_info",
    "run_stdio",
]
