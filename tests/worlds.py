"""The worlds tests run in, typed, and the vocabulary every test module shares.

- ``OWNER`` and ``AGENT`` act; ``resource``, ``make_config`` and ``two_agent_config``
  build the configs every world starts from.
- ``LocalGateway``: the operations in process over one ``Context`` (a real ledger under
  ``tmp_path`` or PostgreSQL, the real HTTP client), driven as the surfaces drive them:
  jobs by id, each loaded once per verb (the ``gateway`` and ``open_gateway`` fixtures).
- ``ApiWorld``: that gateway's ``Service`` behind the real ASGI app, with a key of every
  kind (``api_world``); ``review_app`` adds the review pages.
- ``WebWorld``: the review pages in process, two owners and a reader (``web_world``).
- ``ServedWorld``: ``undogate serve`` as a subprocess with an agent of each tool set
  (``world``, in tests/fixtures/mcp.py), and ``McpAgent``, one MCP client session on it
  (``connect``).

Fixtures live by topic in tests/fixtures/ (plugins tests/conftest.py loads); running the
CLI and ``serve`` as processes is tests/serving.py's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.types import CallToolResult
from starlette.applications import Starlette

from undogate.api import create_app
from undogate.auth import READ, Keyring
from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.jobs import (
    Actor,
    ChangeRequest,
    Confirmation,
    Job,
    Operation,
    Prepared,
    PrepareRequest,
    Preview,
)
from undogate.jsonvalue import JsonValue
from undogate.operations.confirm import confirm_preview
from undogate.operations.context import Context
from undogate.operations.prepare import prepare_job
from undogate.operations.preview import preview_job
from undogate.operations.recovery import recover
from undogate.operations.reject import reject_job
from undogate.service import Service
from undogate.web import WebSettings, WebUI

#: Who acts: an operator owning the jobs, and the agent that prepares them.
OWNER = Actor(id="op_alice", owner_id="op_alice", kind="operator", access_path="test")
AGENT = Actor(id="account-assistant", owner_id="op_alice", kind="agent", access_path="test")


class LocalGateway(Context):
    """A ``Context`` with the verbs tests call most, by job id."""

    def prepare(self, actor: Actor, agent_id: str, request: PrepareRequest) -> Prepared:
        return prepare_job(self, actor, agent_id, request)

    def preview(self, actor: Actor, job_id: str, operation: Operation) -> Preview:
        return preview_job(self, actor, self.get_job(actor.owner_id, job_id), operation)

    def confirm(self, actor: Actor, job_id: str, token: str, **options: Any) -> Confirmation:
        """``options``: as ``confirm_preview`` takes them (``dry_run``, ...)."""
        job = self.get_job(actor.owner_id, job_id)
        return confirm_preview(self, actor, job, token, **options)

    def reject(self, actor: Actor, job_id: str, reason: str | None = None) -> Job:
        return reject_job(self, actor, self.get_job(actor.owner_id, job_id), reason)

    def recover(self) -> dict[str, int]:
        return recover(self.ledger, self.config)


# -- one helper per verb, over a LocalGateway ------------------------------------------


def prepare(
    gw: LocalGateway,
    *changes: ChangeRequest,
    summary: str = "change",
    resource_id: str = "customer",
    **values: JsonValue,
) -> str:
    """A job the agent prepares, and its id: ``changes``, or one change of ``resource_id``
    setting ``values``."""
    wanted = changes or (ChangeRequest(resource_id=resource_id, set=dict(values)),)
    return gw.prepare(AGENT, AGENT.id, PrepareRequest(summary, wanted)).job.id


def confirmed(
    gw: LocalGateway,
    job_id: str,
    operation: Operation = Operation.APPLY,
    *,
    actor: Actor = OWNER,
    **options: Any,
) -> Confirmation:
    """``operation`` previewed and confirmed as ``actor`` (the preview issues a token);
    ``options`` as ``confirm_preview`` takes them (``acknowledge_irreversible``, ...)."""
    preview = gw.preview(actor, job_id, operation)
    assert preview.token is not None, preview.blockers
    return gw.confirm(actor, job_id, preview.token, **options)


def review_app(service: Service, settings: WebSettings | None = None) -> Starlette:
    """The API and the review pages over ``service``, as ``serve`` mounts them (without
    ``/mcp``)."""
    pages = WebUI(service, settings or WebSettings(), service.context.ledger)
    return create_app(service, routes=pages.routes())


@dataclass
class ApiWorld:
    """The API over a real ledger: ``keys`` by role."""

    gateway: LocalGateway
    keyring: Keyring
    service: Service
    app: Starlette
    server: ContractServer
    keys: dict[str, str]
    owner_id: str
    reader_id: str


# -- the configs every world starts from ---------------------------------------------


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
) -> tuple[LocalGateway, str]:
    """A gateway over the customer record and the wrapped ticket, and a prepared job that
    changes both (customer first, then ticket)."""
    from undogate.jobs import ChangeRequest, PrepareRequest

    gw: LocalGateway = open_gateway(
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


# -- the review pages in process: two owners, a reader, the app as serve mounts it -----

DOCUMENT = "/docs/notes.md"


def web_config(server: ContractServer, data_dir: Path, **settings: Any) -> Config:
    return parse_config(
        {
            "server": {"data_dir": str(data_dir), **settings},
            "resources": [
                resource(server, "customer", RECORD),
                resource(server, "notes", DOCUMENT, kind="webdav_text"),
            ],
            "agents": [
                {"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]},
                {"id": "other-agent", "tools": ["list_resources"]},
            ],
        }
    )


@dataclass
class WebWorld:
    gateway: LocalGateway
    keyring: Keyring
    server: ContractServer
    app: Any
    keys: dict[str, str]
    ids: dict[str, str]
    clock: list[float] = field(default_factory=lambda: [0.0])


def web_world(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    *,
    settings: WebSettings | None = None,
    **server_settings: Any,
) -> WebWorld:
    gw = open_gateway(web_config(server, data_dir, **server_settings))
    keyring = Keyring(gw.ledger, known_agents=lambda: {a.id for a in gw.config.agents})
    alice = keyring.create_operator(label="alice")
    bob = keyring.create_operator(label="bob")
    reader = keyring.create_operator(label="carol (read only)", scopes=(READ,))
    alice_agent = keyring.create_agent_token(
        owner_id=alice.credential.id, agent_id="account-assistant", label="assistant"
    )
    bob_agent = keyring.create_agent_token(
        owner_id=bob.credential.id, agent_id="account-assistant", label="bob's assistant"
    )
    app = review_app(Service(gw, keyring), settings)
    return WebWorld(
        gateway=gw,
        keyring=keyring,
        server=server,
        app=app,
        keys={
            "alice": alice.key,
            "bob": bob.key,
            "reader": reader.key,
            "agent": alice_agent.key,
            "bob_agent": bob_agent.key,
        },
        ids={
            "alice": alice.credential.id,
            "bob": bob.credential.id,
            "reader": reader.credential.id,
        },
    )


def prepare_body(summary: str = "Promote Ada to customer and hand her to Lee", **extra: Any) -> Any:
    body: dict[str, Any] = {
        "summary": summary,
        "attribution_label": "ticket CRM-4521",
        "changes": [
            {
                "resource": "customer",
                "set": {"status": "customer", "owner": "lee"},
                "assertion_kind": "supplied",
            }
        ],
    }
    body.update(extra)
    return body


def prepare_via_api(client: httpx.Client | httpx2.Client, agent_key: str, body: Any) -> str:
    """Prepare a job through the HTTP API as the agent (a served one, or an app in a
    ``TestClient``); returns its id."""
    made = client.post("/api/v1/jobs", json=body, headers={"Authorization": f"Bearer {agent_key}"})
    assert made.status_code == 201, made.text
    job_id = made.json()["job_id"]
    assert isinstance(job_id, str)
    return job_id


# -- a served gateway with an agent of each tool set, and its MCP sessions ------------

RECORD = "/records/customer-123"
WRAPPED = "/records/wrapped-7"
REMOTE_TOKEN = "remote-secret-token-8c1f0e55d2"
REMOTE_TOKEN_ENV = "UNDOGATE_TEST_REMOTE_TOKEN"
UNSET_TOKEN_ENV = "UNDOGATE_TEST_UNSET_TOKEN"
# The customer record's current values: an agent must never see them.
BEFORE_VALUES = ('"lead"', '"sam"', "Ada Lovelace", "123456789012345678901234567890")
ERROR_PREFIX = re.compile(r"^Error executing tool [a-z_]+: ([a-z_]+): ")
ACCEPT_MCP = "application/json, text/event-stream"


@dataclass
class ServedWorld:
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

    def confirm(self, job_id: str, operation: str, **body: Any) -> httpx.Response:
        """The operator previews ``operation`` and confirms it with ``body`` (no status
        check: a refusal is an answer)."""
        preview = self.api("POST", f"/api/v1/jobs/{job_id}/previews", {"operation": operation})
        assert preview["preview_token"], preview["blockers"]
        token = {"preview_token": preview["preview_token"], **body}
        return httpx.post(
            f"{self.url}/api/v1/jobs/{job_id}/confirm",
            json=token,
            headers={"Authorization": f"Bearer {self.keys['operator']}"},
            timeout=30,
            trust_env=False,
        )

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


def served_config(contract: ContractServer, data_dir: Path) -> dict[str, Any]:
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


Connect = Callable[..., AbstractAsyncContextManager["McpAgent"]]


@dataclass
class McpAgent:
    """One MCP client session, recording every tool result for the leak check."""

    client: Client
    world: ServedWorld

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


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


__all__ = [
    "ACCEPT_MCP",
    "AGENT",
    "BEFORE_VALUES",
    "DOCUMENT",
    "ERROR_PREFIX",
    "MASTER_KEY",
    "OWNER",
    "RECORD",
    "REMOTE_TOKEN",
    "REMOTE_TOKEN_ENV",
    "TICKET",
    "UNSET_TOKEN_ENV",
    "WRAPPED",
    "ApiWorld",
    "Connect",
    "LocalGateway",
    "McpAgent",
    "ServedWorld",
    "WebWorld",
    "confirmed",
    "make_config",
    "prepare",
    "prepare_body",
    "prepare_via_api",
    "resource",
    "review_app",
    "run",
    "served_config",
    "two_agent_config",
    "two_record_job",
    "web_config",
    "web_world",
]
