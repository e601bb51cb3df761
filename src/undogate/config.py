"""Settings, resources and agents, loaded from YAML and validated at start.

A bad file is reported whole: every problem, each with its YAML path, in one
``ConfigError``. Nothing here touches the network; the address policy that needs DNS
lives in ``net``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError
from .jobs import ResourceKind
from .net import host_spelling_problem

_M = TypeVar("_M", bound=BaseModel)

AGENT_TOOLS = ("list_resources", "prepare_changes")
_ID_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_ENV_RE = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_FIELD_RE = re.compile(r"^[^\x00-\x1f]{1,128}$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Limits(_Model):
    max_resources: int = Field(64, ge=1)
    max_changes_per_job: int = Field(8, ge=1)
    max_fields_per_resource: int = Field(32, ge=1)
    max_document_bytes: int = Field(64 * 1024, ge=1)
    max_job_bytes: int = Field(2 * 1024 * 1024, ge=1)
    max_jobs: int = Field(2000, ge=1)
    max_receipt_bytes: int = Field(128 * 1024 * 1024, ge=1)
    max_confirm_attempts: int = Field(16, ge=1)
    idempotency_days: int = Field(30, ge=1)
    # Open streams on /mcp (GET, subscriptions/listen): the gateway never sends on them.
    max_mcp_streams: int = Field(64, ge=1)
    max_mcp_streams_per_agent: int = Field(4, ge=1)
    mcp_stream_idle_s: float = Field(60.0, gt=0)


class ServerSettings(_Model):
    data_dir: Path = Path("./.undogate")
    http_timeout_s: float = Field(45.0, gt=0)
    request_timeout_s: float = Field(8.0, gt=0)
    preview_ttl_s: float = Field(300.0, gt=0)
    ca_bundle: Path | None = None
    public_url: str | None = None

    @property
    def operation_timeout_s(self) -> float:
        """One preview or confirm stops at min(45 s, http_timeout_s)."""
        return min(45.0, self.http_timeout_s)


class Resource(_Model):
    id: str = Field(pattern=_ID_RE)
    agent_id: str = Field(pattern=_ID_RE)
    name: str = Field(min_length=1, max_length=200)
    kind: ResourceKind
    url: str = Field(min_length=1, max_length=2048)
    token_env: str | None = Field(None, pattern=_ENV_RE)
    token_scheme: Literal["bearer", "basic"] = "bearer"  # noqa: S105 - a scheme name
    fields: tuple[str, ...] = ()
    record_pointer: str = ""
    conditional_writes: bool = False
    allow_private_host: bool = False
    allow_loopback_http: bool = False
    # This resource is a disposable test copy of the named one (SPEC §11). Not identity:
    # the fingerprint below is unchanged by it.
    test_copy_of: str | None = Field(None, pattern=_ID_RE)

    @property
    def fingerprint(self) -> str:
        """A stable digest of everything that makes this the same resource (SPEC §2).

        The token's *value* is deliberately absent: rotating it invalidates nothing.
        """
        parts = urlsplit(self.url)
        identity = {
            "url": self.url,
            "kind": self.kind.value,
            "token_env": self.token_env,
            "token_scheme": self.token_scheme,
            "scheme": parts.scheme.lower(),
            "host": (parts.hostname or "").lower(),
            "port": _effective_port(self.url),
            "allow_private_host": self.allow_private_host,
            "allow_loopback_http": self.allow_loopback_http,
            "record_pointer": self.record_pointer,
            "fields": sorted(self.fields),
        }
        text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class Agent(_Model):
    id: str = Field(pattern=_ID_RE)
    tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    """A validated configuration. ``warnings`` are reported, never fatal."""

    server: ServerSettings
    limits: Limits
    resources: tuple[Resource, ...]
    agents: tuple[Agent, ...]
    warnings: tuple[str, ...] = ()
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

    def agent_tools(self, agent_id: str) -> tuple[str, ...]:
        agent = self.agent(agent_id)
        if agent is None:
            return ()
        return tuple(t for t in agent.tools if t in AGENT_TOOLS)


def _effective_port(url: str) -> int | None:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    if port is not None:
        return port
    return {"https": 443, "http": 80}.get(parts.scheme.lower())


def _is_loopback_literal(host: str) -> bool:
    """127.0.0.0/8 or ::1 exactly (``is_loopback`` also admits ::ffff:127.0.0.1 on newer
    Pythons, which the network policy refuses: config and runtime must agree)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv4Address):
        return ip in ipaddress.ip_network("127.0.0.0/8")
    return ip == ipaddress.IPv6Address("::1")


def url_problems(resource: Resource) -> list[str]:
    """The static URL rules of SPEC §2 (no DNS): scheme, user-info, query, fragment."""
    url = resource.url
    problems: list[str] = []
    if any(c.isspace() or ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        return ["must not contain spaces or control characters"]
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        problems.append(f"scheme must be https (got {parts.scheme or 'none'!r})")
    if "@" in parts.netloc:
        problems.append("must not contain user-info (put credentials in token_env)")
    if "?" in url:
        problems.append("must not contain a query string")
    if "#" in url:
        problems.append("must not contain a fragment")
    host = parts.hostname or ""
    if not host:
        problems.append("must name a host")
    elif problem := host_spelling_problem(host):
        problems.append(problem)
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        problems.append("has an invalid port")
    if scheme == "http":
        if not resource.allow_loopback_http:
            problems.append("http is allowed only with allow_loopback_http to a loopback address")
        elif not _is_loopback_literal(host):
            problems.append(
                "allow_loopback_http needs a literal loopback address such as 127.0.0.1"
            )
    if scheme == "https" and resource.allow_loopback_http:
        problems.append("allow_loopback_http applies only to http:// loopback URLs")
    if not parts.path or parts.path == "/":
        problems.append("must name one object (a path), not a whole site")
    return problems


def _normalised_url(url: str) -> str:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme.lower()}://{host}:{_effective_port(url)}{parts.path}"


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
        norm = _normalised_url(res.url)
        if norm in seen_urls:
            problems.append(
                (f"{where}.url", f"the same URL is already mapped by resources[{seen_urls[norm]}]")
            )
        seen_urls.setdefault(norm, i)
        problems.extend(_kind_problems(res, where, limits))
        if not res.conditional_writes:
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
        elif target.kind is not res.kind:
            problems.append(
                (where, f"{target.id!r} is a {target.kind.value}, not a {res.kind.value}")
            )
        elif sorted(target.fields) != sorted(res.fields):
            problems.append((where, f"the fields must be the same as {target.id!r}'s"))
        elif target.record_pointer != res.record_pointer:
            problems.append((where, f"the record_pointer must be the same as {target.id!r}'s"))
    return problems


def _kind_problems(res: Resource, where: str, limits: Limits) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if res.kind is ResourceKind.JSON_RECORD:
        if not res.fields:
            problems.append((f"{where}.fields", "a json_record needs at least one field"))
        if len(res.fields) > limits.max_fields_per_resource:
            problems.append((f"{where}.fields", f"at most {limits.max_fields_per_resource} fields"))
        if len(set(res.fields)) != len(res.fields):
            problems.append((f"{where}.fields", "duplicate field names"))
        for j, name in enumerate(res.fields):
            if not _FIELD_RE.match(name):
                problems.append((f"{where}.fields[{j}]", "not a valid top-level field name"))
        if res.record_pointer and not res.record_pointer.startswith("/"):
            problems.append(
                (f"{where}.record_pointer", "must be empty or a JSON Pointer starting with '/'")
            )
    else:
        if res.fields:
            problems.append((f"{where}.fields", "only json_record resources have fields"))
        if res.record_pointer:
            problems.append(
                (f"{where}.record_pointer", "only json_record resources have a record_pointer")
            )
    return problems


def _validate(
    model: type[_M], data: Any, prefix: str, problems: list[tuple[str, str]]
) -> _M | None:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            msg = "unknown setting" if err["type"] == "extra_forbidden" else err["msg"]
            loc = _path(tuple(err["loc"]))
            path = prefix + ("." + loc if loc and prefix else loc)
            problems.append((path, msg))
        return None


def _validate_list(
    model: type[_M], data: Any, name: str, problems: list[tuple[str, str]]
) -> list[tuple[int, _M]]:
    if data is None:
        return []
    if not isinstance(data, list):
        problems.append((name, "must be a list"))
        return []
    out: list[tuple[int, _M]] = []
    for i, item in enumerate(data):
        parsed = _validate(model, item, f"{name}[{i}]", problems)
        if parsed is not None:
            out.append((i, parsed))
    return out


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
        if key not in ("server", "limits", "resources", "agents")
    ]
    server = _validate(ServerSettings, data.get("server") or {}, "server", problems)
    limits = _validate(Limits, data.get("limits") or {}, "limits", problems)
    resources = _validate_list(Resource, data.get("resources"), "resources", problems)
    agents = _validate_list(Agent, data.get("agents"), "agents", problems)
    semantic, warnings = _check_semantics(limits or Limits(), resources, agents)
    problems.extend(semantic)
    if server is not None and server.ca_bundle is not None:
        bundle = server.ca_bundle
        if base_dir is not None and not bundle.is_absolute():
            bundle = base_dir / bundle
        if not bundle.is_file():
            problems.append(("server.ca_bundle", f"no such file: {bundle}"))
    if problems or server is None or limits is None:
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
