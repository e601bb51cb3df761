"""What an agent may see through the HTTP API: no hosts, addresses, token variables;
and request bodies bounded however they are sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from starlette.testclient import TestClient
from starlette.types import Message, Scope

from undogate.api import MAX_BODY_BYTES, create_app
from undogate.api.request_body import DRAIN_MAX_BYTES
from undogate.auth import Keyring
from undogate.config import parse_config
from undogate.ledger import Ledger
from undogate.net import PinnedClient
from undogate.service import Service

from .worlds import LocalGateway

INTERNAL_HOST = "crm-internal.corp.example"
INTERNAL_ADDRESS = "10.20.30.40"
VARIABLE = "CRM_PROD_ADMIN_TOKEN"


@pytest.fixture
def agent_client(tmp_path: Path) -> Iterator[tuple[TestClient, str]]:
    resources = [
        {
            "id": "blocked",
            "agent_id": "account-assistant",
            "name": "Behind a private address",
            "kind": "json_record",
            "url": f"https://{INTERNAL_HOST}/api/customers/123",
            "fields": ["status"],
            "conditional_writes": True,
        },
        {
            "id": "tokenless",
            "agent_id": "account-assistant",
            "name": "Token variable unset",
            "kind": "json_record",
            "url": "https://crm.example/api/customers/7",
            "fields": ["status"],
            "conditional_writes": True,
            "token_env": VARIABLE,
        },
    ]
    config = parse_config(
        {
            "server": {"data_dir": str(tmp_path / "data")},
            "resources": resources,
            "agents": [{"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}],
        }
    )
    ledger = Ledger.open(config.server.data_dir)
    # The resolver answers a private address: refused by policy, nothing is sent.
    http = PinnedClient(request_timeout_s=2.0, resolver=lambda host, port: [INTERNAL_ADDRESS])
    gateway = LocalGateway(config=config, ledger=ledger, http=http, environ={})
    keyring = Keyring(ledger, known_agents=lambda: {"account-assistant"})
    owner = keyring.create_operator(label="alice")
    agent = keyring.create_agent_token(
        owner_id=owner.credential.id, agent_id="account-assistant", label="assistant"
    )
    try:
        yield TestClient(create_app(Service(gateway, keyring))), agent.key
    finally:
        http.close()
        ledger.close()


def _prepare(client: TestClient, key: str, resource: str) -> httpx2.Response:
    body: dict[str, Any] = {
        "summary": "x",
        "changes": [{"resource": resource, "set": {"status": "a"}}],
    }
    return client.post("/api/v1/jobs", headers={"Authorization": f"Bearer {key}"}, json=body)


@pytest.mark.parametrize(
    ("resource", "code"), [("blocked", "blocked_address"), ("tokenless", "missing_token")]
)
def test_agent_refusals_name_no_host_address_or_variable(
    agent_client: tuple[TestClient, str], resource: str, code: str
) -> None:
    client, key = agent_client
    response = _prepare(client, key, resource)
    assert response.json()["error"]["code"] == code
    for secret in (INTERNAL_HOST, INTERNAL_ADDRESS, VARIABLE, "https://"):
        assert secret not in response.text


def test_an_endless_chunked_body_is_refused_and_read_no_further_than_the_drain_bound(
    agent_client: tuple[TestClient, str],
) -> None:
    client, key = agent_client
    app = client.app
    chunk = b" " * (256 * 1024)
    pulled = 0
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal pulled
        pulled += 1  # a body with no Content-Length that never ends
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/jobs",
        "raw_path": b"/api/v1/jobs",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"authorization", f"Bearer {key}".encode()),
            (b"content-type", b"application/json"),
            (b"transfer-encoding", b"chunked"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    anyio.run(app, scope, receive, send)
    assert sent[0]["status"] == 413
    # Read past the limit only to drop it (so the client can read the 413), and only so far.
    assert DRAIN_MAX_BYTES < pulled * len(chunk) <= DRAIN_MAX_BYTES + 2 * len(chunk)


def test_the_mcp_endpoint_stops_reading_an_oversized_chunked_body(
    agent_client: tuple[TestClient, str],
) -> None:
    from undogate.mcp.http import McpApp

    client, key = agent_client
    mcp = McpApp(client.app.state.undogate)  # type: ignore[attr-defined]
    chunk = b" " * (256 * 1024)
    pulled = 0
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": chunk, "more_body": pulled < 64}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"authorization", f"Bearer {key}".encode()),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }

    async def scenario() -> None:
        async with mcp.lifespan():
            await mcp(scope, receive, send)

    anyio.run(scenario)
    assert sent[0]["status"] == 413  # in the API's error shape, not a JSON-RPC 500
    assert pulled * len(chunk) <= MAX_BODY_BYTES + len(chunk)
