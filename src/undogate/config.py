"""Settings, resources and agents, loaded from YAML and validated at start.

A bad file is reported whole: every problem, each with its YAML path, in one
``ConfigError``. Nothing here touches the network; the address policy that needs DNS
lives in ``net``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from .adapters import adapter_for, copy_authentication_problem, header_problems, kind_problem
from .errors import ConfigError
from .ledger import ledger_url_problem
from .net import NetworkFlags, configured_url_problems
from .net.urls import dot_segment, normalised_url
from .resources import COMMON_KEYS, ID_PATTERN, KINDS_CONTEXT, KindSettings, StrictModel
from .resources import Limits as Limits
from .resources import Resource as Resource
from .webhooks.settings import WebhookSettings, webhook_problems

_M = TypeVar("_M", bound=BaseModel)

AGENT_TOOLS = ("list_resources", "prepare_changes", "job_status")


class ServerSettings(StrictModel):
    data_dir: Path = Path("./.undogate")
    # Absent: the embedded SQLite ledger under data_dir. ``postgresql://user@host:port/db``:
    # a PostgreSQL ledger; its password comes from the environment only (PGPASSWORD).
    ledger: str | None = None
    # How long a process's lease on the ledger outlives its last
    # renewal (renewed every third of it). A dead process's writes in flight become
    # uncertain this long after it stopped; a stall longer than this ends its lease.
    lease_s: float = Field(30.0, ge=1.0, le=3600.0)
    http_timeout_s: float = Field(45.0, gt=0)
    request_timeout_s: float = Field(8.0, gt=0)
    preview_ttl_s: float = Field(300.0, gt=0)
    ca_bundle: Path | None = None
    public_url: str | None = None
    # Every confirm needs the reviewer's passkey over the exact preview (docs/proof.md);
    # a resource's own ``require_passkey`` asks it for that resource alone.
    require_passkey: bool = False

    @field_validator("ledger")
    @classmethod
    def _a_postgresql_url_without_password(cls, value: str | None) -> str | None:
        if value is None:
            return None
        problem = ledger_url_problem(value)
        if problem is not None:
            raise PydanticCustomError("ledger_url", problem)  # never echoes the value
        return value

    @property
    def operation_timeout_s(self) -> float:
        """One preview or confirm stops at min(45 s, http_timeout_s)."""
        return min(45.0, self.http_timeout_s)


class Agent(StrictModel):
    id: str = Field(pattern=ID_PATTERN)
    tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    """A validated configuration. ``warnings`` are reported, never fatal."""

    server: ServerSettings
    limits: Limits
    resources: tuple[Resource, ...]
    agents: tuple[Agent, ...]
    warnings: tuple[str, ...] = ()
    webhooks: WebhookSettings = field(default_factory=WebhookSettings)
    source: str = "<memory>"
    _by_id: dict[str, Resource] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_id.update({r.id: r for r in self.resources})

    def resource(self, resource_id: str) -> Resource | None:
        return self._by_id.get(resource_id)

    def agent(self, agent_id: str) -> Agent | None:
        return next((a for a in self.agents if a.id == agent_id), None)

    def resources_for(self, agent_id: str) -> list[Resource]:
        """What an agent may change: its resources, never a disposable test copy."""
        return [r for r in self.resources if r.agent_id == agent_id and r.test_copy_of is None]

    @property
    def credential_variables(self) -> list[str]:
        """Every variable a resource's credential is read from, by name."""
        return [name for r in self.resources for name in r.credential_variables]

    def agent_tools(self, agent_id: str) -> tuple[str, ...]:
        agent = self.agent(agent_id)
        if agent is None:
            return ()
        return tuple(t for t in agent.tools if t in AGENT_TOOLS)


def url_problems(resource: Resource) -> list[str]:
    """The static URL rules of docs/config.md (no DNS): those of every configured URL
    (``net.configured_url_problems``), then no query, and one object named by a path
    without dot segments."""
    url = resource.url
    flags = NetworkFlags(
        allow_private_host=resource.allow_private_host,
        allow_loopback_http=resource.allow_loopback_http,
    )
    problems = configured_url_problems(url, flags, userinfo="put credentials in auth or token_env")
    if problems[:1] in (["must not contain spaces or control characters"], ["is not a valid URL"]):
        return problems
    path = urlsplit(url).path
    if "?" in url:
        problems.append("must not contain a query string")
    if not path or path == "/":
        problems.append("must name one object (a path), not a whole site")
    if segment := dot_segment(path):
        problems.append(
            f"must not contain the dot segment {segment!r}: servers resolve it to another "
            "path, and the gateway requests exactly what is written (write the path without "
            "'.' or '..' segments)"
        )
    return problems


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _check_semantics(
    limits: Limits,
    resources: list[tuple[int, Resource]],
    agents: list[tuple[int, Agent]],
) -> tuple[list[tuple[str, str]], list[str]]:
    problems: list[tuple[str, str]] = []
    warnings: list[str] = []
    if limits.max_unresolved_jobs_per_agent > limits.max_unresolved_jobs_per_owner:
        problems.append(
            (
                "limits.max_unresolved_jobs_per_agent",
                "must not exceed limits.max_unresolved_jobs_per_owner "
                f"({limits.max_unresolved_jobs_per_owner}): an owner's agent can never hold "
                "more unresolved jobs than the owner",
            )
        )
    if len(resources) > limits.max_resources:
        problems.append(("resources", f"at most {limits.max_resources} resources"))
    agent_ids: set[str] = set()
    for i, agent in agents:
        where = f"agents[{i}]"
        if agent.id in agent_ids:
            problems.append((f"{where}.id", f"duplicate agent id {agent.id!r}"))
        agent_ids.add(agent.id)
        for j, tool in enumerate(agent.tools):
            if "*" in tool:
                warnings.append(
                    f"{where}.tools[{j}]: a wildcard opts in to nothing; list tools explicitly"
                )
            elif tool not in AGENT_TOOLS:
                known = ", ".join(AGENT_TOOLS)
                problems.append((f"{where}.tools[{j}]", f"unknown tool {tool!r}; known: {known}"))
    seen_ids: set[str] = set()
    seen_urls: dict[str, int] = {}
    for i, res in resources:
        where = f"resources[{i}]"
        if res.id in seen_ids:
            problems.append((f"{where}.id", f"duplicate resource id {res.id!r}"))
        seen_ids.add(res.id)
        if res.agent_id not in agent_ids:
            problems.append((f"{where}.agent_id", f"no agent {res.agent_id!r} is declared"))
        for msg in url_problems(res):
            problems.append((f"{where}.url", msg))
        norm = normalised_url(res.url)
        if norm in seen_urls:
            problems.append(
                (
                    f"{where}.url",
                    f"the same URL is already mapped by resources[{seen_urls[norm]}] "
                    f"(both name {norm})",
                )
            )
        seen_urls.setdefault(norm, i)
        problems.extend((f"{where}.{setting}", why) for setting, why in header_problems(res))
        problems.extend(_kind_problems(res, where, limits))
        if not res.conditional_writes and res.test_copy_of is None:  # the check earns it
            warnings.append(
                f"{where}: conditional_writes is false; writes to {res.id!r} are refused "
                "until the operator attests the remote contract"
            )
    problems.extend(_test_copy_problems(resources))
    return problems, warnings


def _test_copy_problems(resources: list[tuple[int, Resource]]) -> list[tuple[str, str]]:
    """A test copy names another declared resource of the same shape, which is itself no
    test copy: the endpoint check writes to the copy and reads (never writes) the other."""
    by_id = {res.id: res for _, res in resources}
    problems: list[tuple[str, str]] = []
    for i, res in resources:
        if res.test_copy_of is None:
            continue
        where = f"resources[{i}].test_copy_of"
        target = by_id.get(res.test_copy_of)
        if target is None:
            problems.append((where, f"no resource {res.test_copy_of!r} is declared"))
        elif target.id == res.id:
            problems.append((where, "a resource cannot be a test copy of itself"))
        elif target.test_copy_of is not None:
            problems.append((where, f"{target.id!r} is itself a test copy"))
        elif target.kind != res.kind:
            problems.append((where, f"{target.id!r} is a {target.kind}, not a {res.kind}"))
        elif problem := copy_authentication_problem(res, target):
            problems.append((where, problem))
        elif _unread(res) or _unread(target):
            continue  # its settings are refused already
        elif problem := adapter_for(res.kind).test_copy_problem(res, target):
            problems.append((where, problem))
    return problems


def _kind_problems(res: Resource, where: str, limits: Limits) -> list[tuple[str, str]]:
    """What the resource's kind needs of its settings (its adapter says)."""
    if _unread(res):
        return []
    return [
        (f"{where}.{setting}", problem)
        for setting, problem in adapter_for(res.kind).config_problems(res, limits)
    ]


def _validate(
    model: type[_M],
    data: Any,
    prefix: str,
    problems: list[tuple[str, str]],
    unknown: str = "unknown setting",
) -> _M | None:
    try:
        return model.model_validate(data, context={KINDS_CONTEXT: kind_problem})
    except ValidationError as exc:
        for err in exc.errors():
            msg = unknown if err["type"] == "extra_forbidden" else err["msg"]
            loc = _path(tuple(err["loc"]))
            path = prefix + ("." + loc if loc and prefix else loc)
            problems.append((path, msg))
        return None


def _validate_resource(data: Any, where: str, problems: list[tuple[str, str]]) -> Resource | None:
    """One resource, flat as the YAML has it: the common keys by ``Resource``, every
    other key by its kind's own settings model, each problem with its path."""
    if not isinstance(data, dict):
        return _validate(Resource, data, where, problems)
    common = {k: v for k, v in data.items() if k in COMMON_KEYS}
    own = {k: v for k, v in data.items() if k not in COMMON_KEYS}
    kind = data.get("kind")
    if not isinstance(kind, str) or kind_problem(kind) is not None:
        # The kind is refused (with why) by the common check; its own keys cannot be
        # read without it.
        _validate(Resource, common, where, problems)
        return None
    model = adapter_for(kind).settings_model
    named = ", ".join(sorted(model.model_fields)) or "none"
    unknown = f"not a setting of a {kind} (its own settings: {named})"
    settings = _validate(model, own, where, problems, unknown)
    resource = _validate(Resource, common, where, problems)
    if resource is None:
        return None
    # Settings that could not be read are reported; the resource still takes part in
    # the checks of the whole file (its id, its URL), never in its kind's own.
    return resource.model_copy(update={"settings": settings or _UNREAD})


class _Unread(KindSettings):
    """The settings of a resource whose kind's settings were refused (the file is
    refused too): the checks that need them are skipped."""


_UNREAD = _Unread()


def _unread(resource: Resource) -> bool:
    return isinstance(resource.settings, _Unread)


def _validate_list(
    validate: Callable[[Any, str, list[tuple[str, str]]], _M | None],
    data: Any,
    name: str,
    problems: list[tuple[str, str]],
) -> list[tuple[int, _M]]:
    if data is None:
        return []
    if not isinstance(data, list):
        problems.append((name, "must be a list"))
        return []
    out: list[tuple[int, _M]] = []
    for i, item in enumerate(data):
        parsed = validate(item, f"{name}[{i}]", problems)
        if parsed is not None:
            out.append((i, parsed))
    return out


def _validate_agent(data: Any, where: str, problems: list[tuple[str, str]]) -> Agent | None:
    return _validate(Agent, data, where, problems)


def parse_config(data: Any, *, source: str = "<memory>", base_dir: Path | None = None) -> Config:
    """Validate already-parsed YAML/JSON data.

    Raises:
        ConfigError: with every problem found, each with its path.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([("", "the config must be a mapping")], source)
    problems: list[tuple[str, str]] = [
        (str(key), "unknown setting")
        for key in data
        if key not in ("server", "limits", "resources", "agents", "webhooks")
    ]
    server = _validate(ServerSettings, data.get("server") or {}, "server", problems)
    limits = _validate(Limits, data.get("limits") or {}, "limits", problems)
    resources = _validate_list(_validate_resource, data.get("resources"), "resources", problems)
    agents = _validate_list(_validate_agent, data.get("agents"), "agents", problems)
    webhooks = _validate(WebhookSettings, data.get("webhooks") or {}, "webhooks", problems)
    if webhooks is not None:
        problems.extend(webhook_problems(webhooks))
    semantic, warnings = _check_semantics(limits or Limits(), resources, agents)
    problems.extend(semantic)
    if server is not None and server.ca_bundle is not None:
        bundle = server.ca_bundle
        if base_dir is not None and not bundle.is_absolute():
            bundle = base_dir / bundle
        if not bundle.is_file():
            problems.append(("server.ca_bundle", f"no such file: {bundle}"))
    if problems or server is None or limits is None or webhooks is None:
        raise ConfigError(problems, source)
    if len(resources) != len(data.get("resources") or []):  # pragma: no cover - reported above
        raise ConfigError(problems, source)
    if base_dir is not None:
        updates: dict[str, Path] = {}
        if not server.data_dir.is_absolute():
            updates["data_dir"] = base_dir / server.data_dir
        if server.ca_bundle is not None and not server.ca_bundle.is_absolute():
            updates["ca_bundle"] = base_dir / server.ca_bundle
        server = server.model_copy(update=updates)
    return Config(
        server=server,
        limits=limits,
        resources=tuple(r for _, r in resources),
        agents=tuple(a for _, a in agents),
        webhooks=webhooks,
        warnings=tuple(warnings),
        source=source,
    )


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (YAML silently keeps the last)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node)
        if key in mapping:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (line {mark.line + 1})", mark
            )
        mapping[key] = loader.construct_object(value_node)
    return mapping


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a YAML config file; relative ``data_dir`` is against the file.

    Raises:
        ConfigError: unreadable file, invalid YAML, or every validation problem.
    """
    file = Path(path)
    source = str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            [("", f"cannot read the file: {exc.__class__.__name__}")], source
        ) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([(where, f"invalid YAML: {problem}")], source) from None
    return parse_config(data, source=source, base_dir=file.parent)
