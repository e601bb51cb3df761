"""Shared by the collection tests: a contract-server collection as a resource, jobs on
it, and a verified-and-accepted undo seeded the way a passing check records one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.jobs import ChangeRequest, JobState
from undogate.jsonvalue import JsonObject, dumps
from undogate.operations.undo_offer import accept_verified_undo

from .worlds import OWNER, LocalGateway, make_config

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
