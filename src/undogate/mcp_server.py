"""The agent tools over MCP (SPEC §9): ``list_resources`` and ``prepare_changes``.

One set of tools, two transports:

- **Streamable HTTP** (``mcp_http.build_mcp_app``), mounted at ``/mcp`` on
  ``undogate serve``. Every HTTP request carries an agent token as bearer; it is
  authenticated by the ``Service`` on each request, and the tools call the ``Service``
  in process (``mcp_http.ServiceBackend``).
- **stdio** (``run_stdio``, ``undogate mcp``; the transport is ``mcp_stdio``) for agents
  that launch tools as subprocesses. It forwards to a running gateway's HTTP API
  (``UNDOGATE_URL``) with the agent token from ``UNDOGATE_AGENT_TOKEN``.

Both transports read every message losslessly before the SDK does (``mcp_wire``), and
a tool takes its arguments from that reading, never from the SDK's float-parsed copy:
``prepare_changes`` parses them with the API's own parser, so numbers keep their exact
text and every refusal carries the code ``POST /api/v1/jobs`` gives for the same body.

An agent sees only the tools its config lists (``Config.agent_tools``); there is no
tool to apply, confirm, undo, reconcile or reject: those are a person's acts. The
tools are thin: they call the same service functions as the API
(``Service.list_resources``, ``parse_prepare`` + ``Service.prepare``) and render the
same views (``receipts.resource_view``, ``receipts.agent_receipt``). Results never
carry URLs, tokens or before-values; refusals are MCP tool errors whose text starts
with the stable error code and says what the model can do next.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio
import httpx
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict  # pydantic needs it below Python 3.12

from . import __version__, receipts
from .config import AGENT_TOOLS
from .errors import UndogateError
from .jsonvalue import JsonError, JsonObject, JsonValue, dumps, loads
from .mcp_stdio import serve_stdio
from .mcp_wire import inbound_message

URL_ENV = "UNDOGATE_URL"
TOKEN_ENV = "UNDOGATE_AGENT_TOKEN"  # noqa: S105 - a variable name

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


class PrepareChangesInput(BaseModel):
    """The arguments of prepare_changes as its input schema shows them to a model. The
    tool reads the arguments with the API's parser (``api.parse_prepare``), not with
    this model: it only describes them."""

    model_config = ConfigDict(extra="forbid", title="prepare_changesArguments")

    summary: str = Field(description="What and why, for the reviewer, in one or two sentences.")
    changes: list[ChangeInput] = Field(description="1 to 8 changes.")
    idempotency_key: str | None = Field(
        default=None, description="A new unique string per intended job; repeat it on retries."
    )
    attribution_label: str | None = Field(
        default=None, description="A label the reviewer sees as caller-supplied and unverified."
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


def call_arguments(ctx: Context[Any, Any]) -> JsonObject:
    """The call's arguments exactly as the agent sent them (read by ``mcp_wire``).

    Raises:
        Refusal: they are not acceptable JSON or not an object (as the API refuses such a
            body), or the call did not come through undogate's reader.
    """
    message = inbound_message(ctx.request_context.request)
    if message is None or not message.tool_call:
        raise Refusal("internal_error", "the call did not arrive through undogate's reader", {})
    try:
        return message.tool_arguments()
    except UndogateError as exc:
        raise Refusal.of(exc) from None


PREPARE_CHANGES_SCHEMA = PrepareChangesInput.model_json_schema()


def build_server(tools: Sequence[str], backend_for: BackendFor) -> MCPServer[Any]:
    """An MCP server offering exactly ``tools`` (a subset of ``AGENT_TOOLS``)."""

    async def list_resources(ctx: Context[Any, Any]) -> ResourceList:
        try:
            call_arguments(ctx)  # it takes none, but refuses what is not JSON like any call
            found = await backend_for(ctx).list_resources()
            return ResourceList(resources=[resource_info(r) for r in found])
        except Refusal as refusal:
            raise agent_error(refusal) from None

    async def prepare_changes(ctx: Context[Any, Any]) -> JobReceipt:
        try:
            return job_receipt(await backend_for(ctx).prepare(call_arguments(ctx)))
        except Refusal as refusal:
            raise agent_error(refusal) from None

    offered: list[Tool] = []
    if "list_resources" in tools:
        offered.append(
            Tool.from_function(
                list_resources,
                name="list_resources",
                title="List the resources you may change",
                description=LIST_RESOURCES_DESCRIPTION,
                annotations=ToolAnnotations(
                    read_only_hint=True, idempotent_hint=True, open_world_hint=False
                ),
            )
        )
    if "prepare_changes" in tools:
        tool = Tool.from_function(
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
        # The function takes its arguments from the wire, so its signature says nothing
        # about them: the schema a model sees is the documented one.
        offered.append(tool.model_copy(update={"parameters": PREPARE_CHANGES_SCHEMA}))
    return MCPServer(
        "undogate",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
        tools=offered,
    )


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
    from .client import require_safe_gateway_url

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
        await serve_stdio(build_server(tools, lambda ctx: backend))
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
    "PREPARE_CHANGES_SCHEMA",
    "TOKEN_ENV",
    "URL_ENV",
    "AgentBackend",
    "BackendFor",
    "ChangeInput",
    "JobReceipt",
    "PrepareChangesInput",
    "Refusal",
    "RemoteBackend",
    "ResourceInfo",
    "agent_error",
    "build_server",
    "call_arguments",
    "job_receipt",
    "resource_info",
    "run_stdio",
]
