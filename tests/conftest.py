"""Shared fixtures: a real contract server on 127.0.0.1 and a real ledger under tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.engine import Gateway
from undogate.jobs import Actor
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
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

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
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [*SERVE, "--config", str(config), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(url, proc)
        yield {
            "url": url,
            "config": config,
            "operator": operator_key,
            "agent": agent_key,
            "owner": owner,
            "env": {**env, "UNDOGATE_URL": url},
            "proc": proc,
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
