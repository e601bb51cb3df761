"""The edges of ``/mcp`` over real HTTP against a real ``undogate serve``: streams are
bounded per agent and in total and end when idle. (Bodies over the limit: see
test_request_body; lossless arguments: test_mcp_wire.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from undogate.cli.serve import open_configured
from undogate.contract_server import ContractServer

from .serving import base_env, served_gateway
from .worlds import ACCEPT_MCP, resource

AGENTS = ("account-assistant", "auditor")
LISTEN_VERSION = "2026-07-28"  # the first protocol revision with subscriptions/listen


@dataclass
class StreamsWorld:
    """A served gateway and its agents' keys, where streams are opened on ``/mcp``."""

    url: str
    keys: dict[str, str]

    def open_stream(self, stack: ExitStack, agent: str, *, listen: bool = False) -> httpx.Response:
        """Open a stream as ``agent`` (a GET, or a subscriptions/listen call) and keep it
        open until ``stack`` closes; returns the response (a refusal is already read).
        A read waits at most 5 s: the server sends nothing for 15 s (its first ping)."""
        timeout = httpx.Timeout(30, read=5)
        client = stack.enter_context(httpx.Client(timeout=timeout, trust_env=False))
        headers = {"Authorization": f"Bearer {self.keys[agent]}", "Accept": ACCEPT_MCP}
        if listen:
            headers |= {
                "MCP-Protocol-Version": LISTEN_VERSION,
                "Mcp-Method": "subscriptions/listen",
            }
            request = client.build_request(
                "POST", f"{self.url}/mcp", json=_listen(), headers=headers
            )
        else:
            request = client.build_request("GET", f"{self.url}/mcp", headers=headers)
        response = client.send(request, stream=True)
        stack.callback(response.close)
        if response.status_code != 200:
            response.read()
        return response


def _listen() -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": LISTEN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"_meta": meta, "notifications": {"toolsListChanged": True}}
    return {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params}


@contextmanager
def gateway(tmp_path: Path, contract: ContractServer, **limits: Any) -> Iterator[StreamsWorld]:
    config = tmp_path / "undogate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": str(tmp_path / "data")},
                "limits": limits,
                "resources": [resource(contract, "customer", "/records/customer-123")],
                "agents": [{"id": a, "tools": ["list_resources"]} for a in AGENTS],
            }
        )
    )
    env = base_env()
    with open_configured(config, environ=env) as svc:
        owner = svc.keyring.create_operator(label="alice").credential.id
        keys = {
            a: svc.keyring.create_agent_token(owner_id=owner, agent_id=a, label=a).key
            for a in AGENTS
        }
    with served_gateway(config, env) as url:
        yield StreamsWorld(url, keys)


def _refused_for(response: httpx.Response) -> str:
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert error["code"] == "too_many_streams"
    return str(error["details"]["limit"])


def _until_open(open_one: Any, timeout: float = 10.0) -> httpx.Response:
    """Retry until a stream opens: a closed stream's slot frees once the server sees the
    client gone."""
    deadline = time.monotonic() + timeout
    while True:
        response: httpx.Response = open_one()
        if response.status_code == 200 or time.monotonic() > deadline:
            return response
        time.sleep(0.05)  # poll interval of a bounded loop


def test_streams_are_bounded_per_agent_and_in_total(tmp_path: Path, server: ContractServer) -> None:
    bounds = {"max_mcp_streams": 3, "max_mcp_streams_per_agent": 2, "mcp_stream_idle_s": 300}
    with gateway(tmp_path, server, **bounds) as gw, ExitStack() as streams:
        first = ExitStack()
        streams.enter_context(first)
        opened = [
            gw.open_stream(first, "account-assistant"),
            gw.open_stream(streams, "account-assistant"),
        ]
        assert [r.status_code for r in opened] == [200, 200]
        assert opened[0].headers["content-type"].startswith("text/event-stream")
        refused = gw.open_stream(streams, "account-assistant", listen=True)
        assert _refused_for(refused) == "max_mcp_streams_per_agent"
        assert gw.open_stream(streams, "auditor", listen=True).status_code == 200
        assert _refused_for(gw.open_stream(streams, "auditor")) == "max_mcp_streams"
        first.close()  # one of the assistant's streams goes away: its slot is free again
        assert _until_open(lambda: gw.open_stream(streams, "auditor")).status_code == 200


@pytest.mark.parametrize("listen", [False, True], ids=["get", "listen"])
def test_an_idle_stream_is_ended_and_its_slot_freed(
    tmp_path: Path, server: ContractServer, listen: bool
) -> None:
    bounds = {"max_mcp_streams_per_agent": 1, "mcp_stream_idle_s": 1}
    with gateway(tmp_path, server, **bounds) as gw, ExitStack() as streams:
        started = time.monotonic()
        stream = gw.open_stream(streams, "account-assistant", listen=listen)
        assert stream.status_code == 200
        for _ in stream.iter_bytes():  # ends when the server ends the stream
            pass
        assert 1.0 <= time.monotonic() - started < 15.0
        assert _until_open(lambda: gw.open_stream(streams, "account-assistant")).status_code == 200
