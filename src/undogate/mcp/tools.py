"""The agent tools (docs/agents.md): ``list_resources``, ``prepare_changes`` and the opt-in
``job_status`` (what they say of themselves: ``descriptions``), what a model sees of a
refusal, and ``build_server``, one MCP server offering exactly an agent's tools over an
``AgentBackend`` (in process on ``/mcp``, ``http.ServiceBackend``; forwarded to a
running gateway by ``undogate mcp``, ``bridge.RemoteBackend``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import (
    Any,
    NotRequired,  # pydantic needs it below Python 3.12
    Protocol,
)

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from .. import __version__, views
from ..errors import UndogateError
from ..jsonvalue import JsonNumber, JsonObject, JsonValue, dumps
from .descriptions import (
    INSTRUCTIONS,
    JOB_STATUS_DESCRIPTION,
    list_resources_description,
    prepare_changes_description,
    prepare_changes_schema,
)
from .wire import inbound_message


class JobStatusInput(BaseModel):
    """The arguments of job_status as its input schema shows them to a model."""

    model_config = ConfigDict(extra="forbid", title="job_statusArguments")

    job_id: str = Field(description="The job_id prepare_changes returned.")


class JobStatusResult(TypedDict):
    job_id: str
    state: str
    updated_at: float
    reason: str | None


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
    record_id: NotRequired[str]


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
    "not_expressible": "Nothing was prepared. This resource's endpoint cannot store that "
    "value (a null) the way it is written to; choose another value or leave it to a person.",
    "forbidden": "Nothing was prepared. Only a person can change this; do not retry.",
    "limit_reached": "Nothing was prepared. A person has to make room; do not retry now.",
    "quota_exceeded": "Nothing was prepared. Too many of your jobs wait for a person; do "
    "not retry until a person has applied or rejected some of them.",
    "rate_limited": "Nothing was prepared. Wait retry_after_s seconds (in the details), then "
    "call again with the same idempotency_key.",
    "job_not_found": "No job of yours has this id: use a job_id that prepare_changes "
    "returned to you.",
    "unauthorized": "A person has to issue a new agent token; do not retry.",
    "remote_unavailable": "Nothing was prepared. You may retry later with the same "
    "idempotency_key.",
    "remote_contract_breach": "Nothing was prepared. A person has to check that system; "
    "do not retry.",
    "blocked_address": "Nothing was prepared. A person has to fix the configuration; do not retry.",
    "missing_token": "Nothing was prepared. A person has to set the credential; do not retry.",
    "ambiguous": "Nothing was prepared. Several records match this evidence (the candidates "
    "below): change one of them by its id, or leave it to a person; never guess.",
    "conflict": "Nothing was prepared. Pick another id or change the existing record by id.",
}
_UNKNOWN_OUTCOME = (
    "It is unknown whether a job was prepared: call again with the same idempotency_key "
    "and the same input; a replay returns the job if it exists and creates no duplicate."
)


def agent_error(refusal: Refusal, tool: str = "prepare_changes") -> ToolError:
    """The tool error a model sees: ``<code>: <sentence> <next step> Details: {...}``."""
    code = refusal.code
    sentence, details = views.agent_refusal(code, refusal.message, refusal.details)
    step = _NEXT_STEP.get(code, _UNKNOWN_OUTCOME)
    if tool == "job_status":  # it prepares nothing: its own next steps
        step = _NEXT_STEP["job_not_found"] if code == "not_found" else "Do not retry."
    text = f"{code}: {sentence} {step}"
    if details:
        text += " Details: " + dumps(details)
    return ToolError(text)


# -- the service behind the tools -------------------------------------------------------


class AgentBackend(Protocol):
    """What the tools call. Raises ``Refusal`` for every refusal."""

    async def list_resources(self) -> list[JsonValue]: ...

    async def prepare(self, body: JsonObject) -> JsonValue: ...

    async def job_status(self, job_id: str) -> JsonValue: ...


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


def _touched(change: JsonValue) -> TouchedChange:
    touched = TouchedChange(
        resource=_text(_member(change, "resource")),
        kind=_text(_member(change, "kind")),
        fields=_texts(_member(change, "fields")),
    )
    record_id = _member(change, "record_id")
    if isinstance(record_id, str):
        touched["record_id"] = record_id  # the record of a collection it touches
    return touched


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
        changes=[_touched(c) for c in changes],
        review=_text(_member(value, "review")),
        review_path=_text(_member(value, "review_path")),
    )


def job_status_result(value: JsonValue) -> JobStatusResult:
    """Exactly the members of an agent's job status (never values)."""
    reason = _member(value, "reason")
    updated = _member(value, "updated_at")
    if not isinstance(updated, JsonNumber):
        raise Refusal("gateway_error", "undogate gave an unexpected answer", {})
    return JobStatusResult(
        job_id=_text(_member(value, "job_id")),
        state=_text(_member(value, "state")),
        updated_at=float(updated.text),
        reason=reason if isinstance(reason, str) else None,
    )


def call_arguments(ctx: Context[Any, Any]) -> JsonObject:
    """The call's arguments exactly as the agent sent them (read by ``wire``).

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


def with_session(arguments: JsonObject, ctx: Context[Any, Any]) -> JsonObject:
    """The call's arguments naming the MCP session it came in (its ``Mcp-Session-Id``),
    unless the agent named a session itself or the transport has none."""
    headers = getattr(ctx.request_context.request, "headers", None)
    session = headers.get("mcp-session-id") if headers is not None else None
    if arguments.get("session") is not None or not isinstance(session, str) or not session:
        return arguments
    return {**arguments, "session": session}


JOB_STATUS_SCHEMA = JobStatusInput.model_json_schema()


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
            arguments = with_session(call_arguments(ctx), ctx)
            return job_receipt(await backend_for(ctx).prepare(arguments))
        except Refusal as refusal:
            raise agent_error(refusal) from None

    async def job_status(ctx: Context[Any, Any]) -> JobStatusResult:
        try:
            arguments = call_arguments(ctx)
            job_id = arguments.get("job_id")
            if not isinstance(job_id, str) or not job_id or set(arguments) - {"job_id"}:
                raise Refusal("invalid_request", "give job_id (a string) and nothing else", {})
            return job_status_result(await backend_for(ctx).job_status(job_id))
        except Refusal as refusal:
            raise agent_error(refusal, "job_status") from None

    offered: list[Tool] = []
    if "list_resources" in tools:
        offered.append(
            Tool.from_function(
                list_resources,
                name="list_resources",
                title="List the resources you may change",
                description=list_resources_description(),
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
            description=prepare_changes_description(),
            annotations=ToolAnnotations(
                read_only_hint=False,
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=False,
            ),
        )
        # The function takes its arguments from the wire, so its signature says nothing
        # about them: the schema a model sees is the documented one.
        offered.append(tool.model_copy(update={"parameters": prepare_changes_schema()}))
    if "job_status" in tools:
        tool = Tool.from_function(
            job_status,
            name="job_status",
            title="Read the state of a job you prepared",
            description=JOB_STATUS_DESCRIPTION,
            annotations=ToolAnnotations(
                read_only_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        )
        offered.append(tool.model_copy(update={"parameters": JOB_STATUS_SCHEMA}))
    return MCPServer(
        "undogate",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
        tools=offered,
    )


__all__ = [
    "AgentBackend",
    "BackendFor",
    "JobReceipt",
    "JobStatusResult",
    "Refusal",
    "ResourceInfo",
    "agent_error",
    "build_server",
    "call_arguments",
    "job_receipt",
    "job_status_result",
    "resource_info",
]
