"""Shared fixtures: a real contract server on 127.0.0.1 and a real ledger under tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.engine import Actor, Gateway
from undogate.ledger import Ledger
from undogate.net import RemoteHTTP

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


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def open_gateway(data_dir: Path) -> Iterator[Callable[[Config], Gateway]]:
    opened: list[Gateway] = []

    def factory(config: Config, **kwargs: Any) -> Gateway:
        ledger = Ledger.open(config.server.data_dir)
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
