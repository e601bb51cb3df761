"""Shared by the collection tests: a contract-server collection as a resource, jobs on
it, a verified-and-accepted undo seeded the way a passing check records one, and a
served gateway over a real server's collection that an agent reaches over MCP."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from undogate.cli.serve import open_configured
from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.jobs import ChangeRequest, JobState
from undogate.jsonvalue import JsonObject, dumps
from undogate.operations.undo_offer import accept_verified_undo

from .serving import served_gateway
from .worlds import AGENT, OWNER, LocalGateway, ServedWorld, make_config

CONTACTS = "/collections/contacts"
FIELDS = ["email", "name", "status", "website"]


def contacts(server: ContractServer, rid: str = "contacts", **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": rid,
        "agent_id": "account-assistant",
        "name": "Contacts",
        "kind": "json_collection",
        "url": server.url(extra.pop("path", CONTACTS)),
        "fields": FIELDS,
        "create": "put",
        "identity": [{"field": "email", "evidence": "email"}],
        "lookup": {"list": True},
        "conditional_writes": True,
        "allow_loopback_http": True,
    }
    entry.update(extra)
    return entry


def seed(server: ContractServer, rid: str, **fields: Any) -> str:
    """An existing record, put there as an outside party would; returns its path."""
    path = f"{CONTACTS}/{rid}"
    server.set_record(path, {"id": rid, **fields})
    return path


def change(**members: Any) -> ChangeRequest:
    if "record_id" in members:  # the change's `id` member, named as the receipt names it
        members["id"] = members.pop("record_id")
    return ChangeRequest(resource_id=members.pop("resource", "contacts"), **members)


def verify_and_accept(
    gw: LocalGateway, config: Config, resource_id: str = "contacts", undos: tuple[str, ...] = ()
) -> None:
    """Record what a passing collection check records, then a reviewer's acceptance."""
    record_passing_check(gw, config, resource_id, undos)
    accept_verified_undo(gw, OWNER, resource_id)


def record_passing_check(
    gw: LocalGateway, config: Config, resource_id: str = "contacts", undos: tuple[str, ...] = ()
) -> None:
    """Record what a passing collection check records (its evidence verified ``undos``)."""
    res = config.resource(resource_id)
    assert res is not None
    evidence: JsonObject = {
        "kind": res.kind,
        "steps": [],
        "undos": list(undos or ("recreate", "undo_of_create")),
    }
    gw.ledger.write(
        lambda tx: tx.record_endpoint_check(
            resource_id=res.id,
            test_copy_id=f"{res.id}-copy",
            production_fingerprint=res.fingerprint,
            test_copy_fingerprint="sha256:copy",
            passed=True,
            evidence=dumps(evidence),
            actor="operator:tester",
            access_path="test",
        )
    )


def state(gw: LocalGateway, job_id: str) -> JobState:
    job = gw.ledger.load_job(job_id)
    assert job is not None
    return job.state


def open_contacts(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    **settings: Any,
) -> tuple[LocalGateway, Config]:
    """A gateway over the contacts collection (``settings`` override its own). A held
    write ends at the gateway's request timeout, well before the server's hang."""
    config = make_config(server, data_dir, contacts(server, **settings), request_timeout_s=0.5)
    return open_gateway(config), config


@contextmanager
def served_collection(
    data_dir: Path, resources: list[dict[str, Any]], env: dict[str, str], secrets: list[str]
) -> Iterator[ServedWorld]:
    """``undogate serve`` over ``resources`` (a collection and its test copy) with an
    operator and an agent that lists and prepares, their keys made first; afterwards no
    tool result names a key, one of ``secrets`` or the server's address."""
    config = data_dir / "undogate.yaml"
    agent = {"id": AGENT.id, "tools": ["list_resources", "prepare_changes"]}
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": str(data_dir / "data")},
                "resources": resources,
                "agents": [agent],
            }
        )
    )
    with open_configured(config, environ=env) as svc:
        operator = svc.keyring.create_operator(label="alice")
        keys = {
            "operator": operator.key,
            AGENT.id: svc.keyring.create_agent_token(
                owner_id=operator.credential.id, agent_id=AGENT.id, label=AGENT.id
            ).key,
        }
    with served_gateway(config, env) as url:
        world = ServedWorld(url=url, contract=None, keys=keys)  # type: ignore[arg-type]
        yield world
        for text in world.results:
            for secret in [*keys.values(), *secrets, "127.0.0.1"]:
                assert secret not in text, f"{secret!r} leaked into a tool result: {text}"
