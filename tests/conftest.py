"""Shared fixtures: a real contract server on 127.0.0.1 and a real ledger under tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.engine import Gateway
from undogate.jobs import Actor
from undogate.ledger import open_store
from undogate.net import RemoteHTTP

if TYPE_CHECKING:
    from .caldav_servers import DavCollections
    from .object_stores import BlobServer, S3Server
    from .pouchdb_server import CouchServer

OWNER = Actor(id="op_alice", owner_id="op_alice", kind="operator", access_path="test")
AGENT = Actor(id="account-assistant", owner_id="op_alice", kind="agent", access_path="test")


@pytest.fixture
def server() -> Iterator[ContractServer]:
    with ContractServer(None, faults=True, hang_seconds=3.0) as srv:
        yield srv


def resource(server: ContractServer, rid: str, path: str, **extra: Any) -> dict[str, Any]:
    kind = extra.pop("kind", "json_record")
    entry: dict[str, Any] = {
        "id": rid,
        "agent_id": "account-assistant",
        "name": rid.replace("-", " ").title(),
        "kind": kind,
        "url": server.url(path),
        "conditional_writes": True,
        "allow_loopback_http": True,
    }
    if kind == "json_record":
        entry["fields"] = ["status", "owner", "tier", "balance", "ratio", "notes"]
    entry.update(extra)
    return entry


def make_config(
    server: ContractServer, data_dir: Path, *resources: dict[str, Any], **server_settings: Any
) -> Config:
    res = list(resources) or [resource(server, "customer", "/records/customer-123")]
    return parse_config(
        {
            "server": {"data_dir": str(data_dir), **server_settings},
            "resources": res,
            "agents": [{"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}],
        }
    )


TICKET = "/records/wrapped-7"


def two_record_job(
    server: ContractServer, data_dir: Path, open_gateway: Any
) -> tuple[Gateway, str]:
    """A gateway over the customer record and the wrapped ticket, and a prepared job that
    changes both (customer first, then ticket)."""
    from undogate.jobs import ChangeRequest, PrepareRequest

    gw: Gateway = open_gateway(
        make_config(
            server,
            data_dir,
            resource(server, "customer", "/records/customer-123"),
            resource(server, "ticket", TICKET, record_pointer="/data", fields=["status"]),
        )
    )
    req = PrepareRequest(
        summary="two records",
        changes=(
            ChangeRequest(resource_id="customer", set={"status": "customer"}),
            ChangeRequest(resource_id="ticket", set={"status": "closed"}),
        ),
    )
    return gw, gw.prepare(AGENT, "account-assistant", req).job.id


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def open_gateway(data_dir: Path) -> Iterator[Callable[[Config], Gateway]]:
    opened: list[Gateway] = []

    def factory(config: Config, **kwargs: Any) -> Gateway:
        ledger = open_store(config.server)  # server.ledger: PostgreSQL; else SQLite
        http = RemoteHTTP(request_timeout_s=config.server.request_timeout_s)
        gw = Gateway(config=config, ledger=ledger, http=http, **kwargs)
        gw.recover()
        opened.append(gw)
        return gw

    yield factory
    for gw in opened:
        gw.http.close()
        gw.ledger.close()


@pytest.fixture
def gateway(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., Gateway]
) -> Gateway:
    return open_gateway(make_config(server, data_dir))


# Lines that tests want shown at the end of the run (e.g. the crash matrix).
REPORT: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if REPORT:
        terminalreporter.section("undogate report")
        for line in REPORT:
            terminalreporter.write_line(line)


# -- API fixtures (issue 6): a real app on a real ledger, with every kind of credential --

MASTER_KEY = "ugm_test-master-key-0123456789abcdefghijklmnop"


def two_agent_config(server: ContractServer, data_dir: Path) -> Config:
    """account-assistant owns ``customer``; other-agent owns ``supplier``."""
    return parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": [
                resource(server, "customer", "/records/customer-123"),
                {
                    **resource(server, "supplier", "/records/supplier-7"),
                    "agent_id": "other-agent",
                    "fields": ["status", "owner"],
                },
            ],
            "agents": [
                {"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]},
                {"id": "other-agent", "tools": ["list_resources", "prepare_changes"]},
            ],
        }
    )


@pytest.fixture
def api_world(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], Gateway]
) -> Any:
    from undogate.api import create_app
    from undogate.auth import READ, Keyring

    gw = open_gateway(two_agent_config(server, data_dir))
    keyring = Keyring(
        gw.ledger, master_key=MASTER_KEY, known_agents=lambda: {a.id for a in gw.config.agents}
    )
    owner = keyring.create_operator(label="alice")
    other = keyring.create_operator(label="bob")
    reader = keyring.create_operator(label="carol (read only)", scopes=(READ,))
    agent = keyring.create_agent_token(
        owner_id=owner.credential.id, agent_id="account-assistant", label="assistant"
    )
    other_agent = keyring.create_agent_token(
        owner_id=owner.credential.id, agent_id="other-agent", label="other"
    )

    class World:
        pass

    world = World()
    world.gateway = gw  # type: ignore[attr-defined]
    world.keyring = keyring  # type: ignore[attr-defined]
    world.app = create_app(gw, keyring)  # type: ignore[attr-defined]
    world.server = server  # type: ignore[attr-defined]
    world.keys = {  # type: ignore[attr-defined]
        "none": None,
        "bad": "ugo_000000000000_not-a-real-key-at-all-0000000000000000000",
        "agent": agent.key,
        "other_agent": other_agent.key,
        "owner": owner.key,
        "other_operator": other.key,
        "reader": reader.key,
        "master": MASTER_KEY,
    }
    world.owner_id = owner.credential.id  # type: ignore[attr-defined]
    return world


# -- a served gateway (issue 6): `undogate init`, `keys` and `serve` as real subprocesses --

import os  # noqa: E402 - appended section (conftest is shared; additions go at the end)
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import IO  # noqa: E402

import httpx  # noqa: E402
import yaml  # noqa: E402

SERVED_PATH = "/records/customer-123"
SERVED_COPY_PATH = "/records/customer-copy"  # a test copy of it, for the endpoint check
SERVE = (sys.executable, "-m", "undogate.cli", "serve")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "undogate.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[str], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited early: {proc.stderr.read() if proc.stderr else ''}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # poll interval of a bounded loop, not a fixed wait
    raise AssertionError("serve did not become healthy in time")


@pytest.fixture
def served(
    request: pytest.FixtureRequest, tmp_path: Path, server: ContractServer
) -> Iterator[dict[str, object]]:
    """``undogate serve`` as a subprocess. Indirect parametrisation adds config sections,
    e.g. ``@pytest.mark.parametrize("served", [{"limits": {...}}], indirect=True)``."""
    config = tmp_path / "undogate.yaml"
    server.set_record(SERVED_COPY_PATH, server.get_record(SERVED_PATH))
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": str(tmp_path / "data")},
                "resources": [
                    resource(server, "customer", SERVED_PATH),
                    resource(server, "customer-copy", SERVED_COPY_PATH, test_copy_of="customer"),
                ],
                "agents": [
                    {"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}
                ],
                **getattr(request, "param", {}),
            }
        )
    )
    env = {**os.environ, "UNDOGATE_MASTER_KEY": MASTER_KEY}
    init = cli("init", "--config", str(config), env=env)
    assert init.returncode == 0, init.stderr
    operator_key = init.stdout.strip()
    assert operator_key.startswith("ugo_")
    owner = "op_" + operator_key[4:16]
    made = cli(
        "keys", "create-agent", "--agent", "account-assistant", "--owner", owner,
        "--config", str(config), env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    agent_key = made.stdout.splitlines()[0]
    assert agent_key.startswith("uga_")
    with serving(config, env) as (url, proc):
        yield {
            "url": url,
            "config": config,
            "operator": operator_key,
            "agent": agent_key,
            "owner": owner,
            "env": {**env, "UNDOGATE_URL": url},
            "proc": proc,
        }


# -- MCP (issue 13 moved these here from test_mcp_server): a served gateway with agents
# of every tool set, and the SDK's real client on both transports --------------------

import json  # noqa: E402
import re  # noqa: E402
from collections.abc import AsyncIterator, Awaitable  # noqa: E402
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import anyio  # noqa: E402
import httpx2  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.types import CallToolResult  # noqa: E402

from undogate.cli.serve import open_service  # noqa: E402

from .processes import stop  # noqa: E402
from .raw_stdin import inject_raw  # noqa: E402

RECORD = "/records/customer-123"
WRAPPED = "/records/wrapped-7"
REMOTE_TOKEN = "remote-secret-token-8c1f0e55d2"
REMOTE_TOKEN_ENV = "UNDOGATE_TEST_REMOTE_TOKEN"
UNSET_TOKEN_ENV = "UNDOGATE_TEST_UNSET_TOKEN"
# The customer record's current values: an agent must never see them.
BEFORE_VALUES = ('"lead"', '"sam"', "Ada Lovelace", "123456789012345678901234567890")
ERROR_PREFIX = re.compile(r"^Error executing tool [a-z_]+: ([a-z_]+): ")
ACCEPT_MCP = "application/json, text/event-stream"


# -- the gateway ----------------------------------------------------------------------


@contextmanager
def serving(config: Path, env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``undogate serve`` as a subprocess on a free port, healthy before it is yielded;
    stopped with SIGTERM (then SIGKILL) after. Once healthy its stderr is drained by a
    thread (serve logs every refusal: a full pipe must never stall it); read what it
    said with ``serve_log(proc)``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [*SERVE, "--config", str(config), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(url, proc)
        assert proc.stderr is not None
        _SERVE_LOGS[proc.pid] = _Drained(proc.stderr)
        yield url, proc
    finally:
        stop(proc)
        drained = _SERVE_LOGS.pop(proc.pid, None)
        if drained:
            drained.thread.join(timeout=5)
        if proc.stderr:
            proc.stderr.close()


class _Drained:
    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self.thread.start()

    def _drain(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self.lines.append(line)
        except ValueError:  # closed under us at teardown
            pass


_SERVE_LOGS: dict[int, _Drained] = {}


def serve_log(proc: subprocess.Popen[str]) -> str:
    """What a ``serving`` server wrote on stderr since it was healthy; after it has
    exited, everything it wrote."""
    drained = _SERVE_LOGS[proc.pid]
    if proc.poll() is not None:
        drained.thread.join(timeout=5)
    return "".join(drained.lines)


@contextmanager
def served_gateway(config: Path, env: dict[str, str]) -> Iterator[str]:
    """``undogate serve`` as a subprocess (needs ``/mcp`` mounted by ``serve``)."""
    with serving(config, env) as (url, _):
        yield url


@dataclass
class World:
    url: str
    contract: ContractServer
    keys: dict[str, str]
    results: list[str] = field(default_factory=list)

    def api(self, method: str, path: str, body: Any = None, key: str = "operator") -> Any:
        response = httpx.request(
            method,
            self.url + path,
            json=body,
            headers={"Authorization": f"Bearer {self.keys[key]}"},
            timeout=30,
            trust_env=False,
        )
        assert response.status_code < 400, response.text
        return response.json()

    def get(self, path: str, key: str = "operator") -> httpx.Response:
        """A raw GET (read its body with ``jsonvalue.loads`` to keep numbers exact)."""
        auth = {"Authorization": f"Bearer {self.keys[key]}"}
        return httpx.get(self.url + path, headers=auth, timeout=30, trust_env=False)

    def post(self, path: str, body: bytes, key: str) -> httpx.Response:
        """A raw POST with the exact bytes given (no status check)."""
        return httpx.post(
            self.url + path,
            content=body,
            headers={
                "Authorization": f"Bearer {self.keys[key]}",
                "Content-Type": "application/json",
            },
            timeout=30,
            trust_env=False,
        )

    def jobs(self, agent: str = "account-assistant") -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self.api("GET", f"/api/v1/jobs?agent={agent}")["jobs"]
        return jobs

    @property
    def secrets(self) -> list[str]:
        return [
            *self.keys.values(),
            REMOTE_TOKEN,
            REMOTE_TOKEN_ENV,
            UNSET_TOKEN_ENV,
            self.contract.base_url,
            "http://",
            "https://",
            "127.0.0.1",
            *BEFORE_VALUES,
        ]


def _config(contract: ContractServer, data_dir: Path) -> dict[str, Any]:
    both = ["list_resources", "prepare_changes"]
    return {
        "server": {"data_dir": str(data_dir)},
        "resources": [
            resource(contract, "customer", RECORD, token_env=REMOTE_TOKEN_ENV),
            {
                **resource(contract, "notes", "/docs/notes.md", kind="webdav_text"),
                "token_env": REMOTE_TOKEN_ENV,
            },
            {
                **resource(contract, "wrapped", WRAPPED, token_env=UNSET_TOKEN_ENV),
                "record_pointer": "/data",
                "fields": ["status", "owner"],
            },
            {**resource(contract, "supplier", "/records/supplier-7"), "agent_id": "other-agent"},
        ],
        "agents": [
            {"id": "account-assistant", "tools": both},
            {"id": "other-agent", "tools": both},
            {"id": "lister", "tools": ["list_resources"]},
            {"id": "preparer", "tools": ["prepare_changes"]},
            {"id": "wildcard", "tools": ["*"]},
        ],
    }


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with ContractServer(None, faults=True, token=REMOTE_TOKEN) as contract:
        config = tmp_path / "undogate.yaml"
        config.write_text(yaml.safe_dump(_config(contract, tmp_path / "data")))
        env = {**base_env(), REMOTE_TOKEN_ENV: REMOTE_TOKEN}
        keys: dict[str, str] = {}
        with open_service(config, environ=env) as svc:
            operator = svc.keyring.create_operator(label="alice")
            keys["operator"] = operator.key
            owner = operator.credential.id
            for agent in ("account-assistant", "other-agent", "lister", "preparer", "wildcard"):
                keys[agent] = svc.keyring.create_agent_token(
                    owner_id=owner, agent_id=agent, label=agent
                ).key
            revoked = svc.keyring.create_agent_token(
                owner_id=owner, agent_id="account-assistant", label="revoked"
            )
            svc.keyring.revoke(revoked.credential.id)
            keys["revoked"] = revoked.key
        with served_gateway(config, env) as url:
            world = World(url=url, contract=contract, keys=keys)
            yield world
            for text in world.results:
                for secret in world.secrets:
                    assert secret not in text, f"{secret!r} leaked into a tool result: {text}"


def base_env() -> dict[str, str]:
    """This process's environment without undogate's own variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith("UNDOGATE_")}


# -- the clients ------------------------------------------------------------------------

Connect = Callable[..., AbstractAsyncContextManager["Agent"]]


@dataclass
class Agent:
    """One MCP client session, recording every tool result for the leak check."""

    client: Client
    world: World

    async def tool_names(self) -> list[str]:
        listed = await self.client.list_tools()
        return sorted(t.name for t in listed.tools)

    async def call(self, name: str, **arguments: Any) -> CallToolResult:
        result = await self.client.call_tool(name, arguments)
        text = " ".join(getattr(c, "text", "") for c in result.content)
        self.world.results.append(text + json.dumps(result.structured_content))
        return result

    async def prepare(self, **arguments: Any) -> dict[str, Any]:
        result = await self.call("prepare_changes", **arguments)
        assert not result.is_error, result.content
        found: dict[str, Any] | None = result.structured_content
        assert found is not None
        return found

    async def refusal(self, name: str, **arguments: Any) -> tuple[str, str]:
        """The stable code and the whole text of a refused call."""
        result = await self.call(name, **arguments)
        assert result.is_error, result.structured_content
        text = getattr(result.content[0], "text", "")
        match = ERROR_PREFIX.match(text)
        assert match, text
        return match.group(1), text


@pytest.fixture(params=["http", "stdio"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def connect(transport: str, world: World, tmp_path: Path) -> Connect:
    """``connect(agent, raw=False)``: an MCP session of the SDK's client as ``agent``.
    With ``raw``, every ``raw(...)`` placeholder in what the client sends is replaced by
    its exact bytes on the way (numbers as written, duplicate keys, invalid UTF-8)."""

    @asynccontextmanager
    async def http(agent: str, raw: bool = False) -> AsyncIterator[Agent]:
        headers = {"Authorization": f"Bearer {world.keys[agent]}"}
        wire = RawInjecting() if raw else None
        async with httpx2.AsyncClient(headers=headers, timeout=60, transport=wire) as http_client:
            stream = streamable_http_client(f"{world.url}/mcp", http_client=http_client)
            async with Client(stream) as client:
                yield Agent(client, world)

    @asynccontextmanager
    async def stdio(agent: str, raw: bool = False) -> AsyncIterator[Agent]:
        server = [sys.executable, "-m", "undogate.mcp"]
        params = StdioServerParameters(
            command=server[0],
            args=["-m", "tests.raw_stdin", *server] if raw else server[1:],
            env={
                "UNDOGATE_URL": world.url,
                "UNDOGATE_AGENT_TOKEN": world.keys[agent],
                # The SDK's client passes on only a few variables; this worktree's code
                # must be the code the subprocess runs.
                **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
            },
            cwd=Path(__file__).parent.parent,
        )
        with (tmp_path / f"stdio-{agent}.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                yield Agent(client, world)

    return http if transport == "http" else stdio


class RawInjecting(httpx2.AsyncHTTPTransport):
    """The MCP client's HTTP transport, with ``raw(...)`` placeholders injected."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = inject_raw(await request.aread())
        headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
        sent = httpx2.Request(request.method, request.url, headers=headers, content=body)
        return await super().handle_async_request(sent)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


# -- a real PostgreSQL (tests/postgres.py): started once per session, when a test asks -------

from .postgres import PostgresCluster, start_cluster  # noqa: E402


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL cluster on 127.0.0.1; fails (never skips) when it cannot
    start, with the reason."""
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module (Debian's, through Playwright). Modules
    that use it skip themselves when ``browser.chromium_missing()`` says why."""
    from playwright.sync_api import sync_playwright

    from .browser import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


# -- real third-party servers, each in its own environment (tests/server_envs.py) --------
# One per test module, started only when a test asks; each also works as a plain context
# manager (radicale_server, xandikos_server, moto_s3_server, azurite_server, pouchdb_server).


@pytest.fixture(scope="module")
def radicale(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DavCollections]:
    """Radicale 3 with basic auth, an address book and a calendar."""
    from .caldav_servers import radicale_server

    with radicale_server(tmp_path_factory.mktemp("radicale")) as server:
        yield server


@pytest.fixture(scope="module")
def xandikos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DavCollections]:
    """Xandikos, anonymous, with its default address book and calendar."""
    from .caldav_servers import xandikos_server

    with xandikos_server(tmp_path_factory.mktemp("xandikos")) as server:
        yield server


@pytest.fixture(scope="module")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 with request signatures enforced and one bucket."""
    from .object_stores import moto_s3_server

    with moto_s3_server(tmp_path_factory.mktemp("moto")) as server:
        yield server


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BlobServer]:
    """Azurite's blob service (telemetry off), Shared Key required, one container."""
    from .object_stores import azurite_server

    with azurite_server(tmp_path_factory.mktemp("azurite")) as server:
        yield server


@pytest.fixture(scope="module")
def pouchdb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CouchServer]:
    """pouchdb-server in memory with one database."""
    from .pouchdb_server import pouchdb_server

    with pouchdb_server(tmp_path_factory.mktemp("pouchdb")) as server:
        yield server


# The kit's pytest plugin (the ``undogate_kit`` fixture of the kinds' contract,
# tests/test_kinds_contract.py and tests/test_kind_from_outside.py), loaded as a kind's
# author loads it (docs/kinds.md).
pytest_plugins = ["undogate.testing.plugin"]
