"""The endpoint check of a collection's test copy (docs/collections.md) on the contract server,
and a reviewer's acceptance of what it verified: undo offered only where it works."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.errors import UndoNotVerified
from undogate.jobs import JobState, Operation
from undogate.operations.context import Context
from undogate.operations.endpoint_check import Step, check_endpoint, report_lines, result_view
from undogate.operations.undo_offer import accept_verified_undo, resource_undo_offer

from .collections_world import CONTACTS, change, contacts, seed
from .worlds import OWNER, LocalGateway, confirmed, make_config, prepare

COPY = "/collections/contacts-copy"


@pytest.fixture
def config(server: ContractServer, data_dir: Path) -> Config:
    return make_config(
        server,
        data_dir,
        contacts(server),
        contacts(server, "contacts-copy", path=COPY, test_copy_of="contacts"),
    )


@pytest.fixture
def gw(config: Config, open_gateway: Callable[[Config], LocalGateway]) -> LocalGateway:
    return open_gateway(config)


def _seed_copy(server: ContractServer) -> dict[str, object]:
    server.set_record(f"{COPY}/a", {"id": "a", "email": "a@example.com", "name": "Ann"})
    server.set_record(f"{COPY}/b", {"id": "b", "email": "b@example.com"})
    seed(server, "prod", email="p@example.com")
    return {"copy": server.collection_records(COPY), "prod": server.collection_records(CONTACTS)}


def _check(gw: LocalGateway) -> tuple[bool, dict[str, Step], tuple[str, ...]]:
    result = check_endpoint(Context(gw.config, gw.ledger, gw.http, environ={}), "contacts-copy")
    steps = {s.name: s for s in result.steps}
    return result.passed, steps, result.undos


def test_the_check_verifies_create_undo_and_recreate_and_leaves_everything(
    gw: LocalGateway, server: ContractServer
) -> None:
    start = _seed_copy(server)
    passed, steps, undos = _check(gw)
    assert passed, [(s.name, s.summary) for s in steps.values()]
    assert undos == ("undo_of_create", "recreate")
    assert server.collection_records(COPY) == start["copy"]
    assert server.collection_records(CONTACTS) == start["prod"]
    evidence = {name: step.evidence for name, step in steps.items()}
    assert evidence["stale_delete_refused"] == {"status": 412, "unchanged": True}
    assert evidence["collection_snapshot"]["records"] == 2
    assert "example.com" not in str(evidence) and "Ann" not in str(evidence)  # no values
    again = check_endpoint(Context(gw.config, gw.ledger, gw.http, environ={}), "contacts-copy")
    lines = report_lines(result_view(again))
    assert any("verified undos: undo_of_create, recreate" in line for line in lines), lines
    assert lines[-1] == (
        "contacts: verified on a test copy as json_patch, version in If-Match, stale 412 "
        "(check 2 in the ledger)"
    )


def test_a_store_that_never_recreates_verifies_only_the_undo_of_a_create(
    gw: LocalGateway, server: ContractServer
) -> None:
    _seed_copy(server)
    server.refuse_recreate(COPY)
    passed, steps, undos = _check(gw)
    assert passed and undos == ("undo_of_create",)
    assert not steps["recreate_deleted_id"].passed
    assert steps["recreate_deleted_id"].evidence == {"status": 409}


def test_a_store_that_writes_on_a_stale_tag_fails_and_verifies_nothing(
    gw: LocalGateway, server: ContractServer
) -> None:
    start = _seed_copy(server)
    server.arm("ignore_if_match")  # the first stale write: the update of the probe
    passed, steps, undos = _check(gw)
    assert not passed and undos == ()
    assert not steps["stale_update_refused"].passed
    assert "stale_delete_refused" not in steps  # a failed guard stops the check
    assert server.collection_records(COPY) == start["copy"]  # the probe is gone with it


def test_a_store_that_deletes_on_a_stale_tag_fails_and_verifies_nothing(
    gw: LocalGateway, server: ContractServer
) -> None:
    start = _seed_copy(server)
    server.arm("precondition_status:412")  # the stale update: refused as it should be
    server.arm("ignore_if_match")  # the stale delete: carried out
    passed, steps, undos = _check(gw)
    assert not passed and undos == ()
    assert steps["stale_update_refused"].evidence == {"status": 412, "unchanged": True}
    assert not steps["stale_delete_refused"].passed
    assert server.collection_records(COPY) == start["copy"]  # the probe is gone with it


def test_undo_is_offered_only_after_the_check_and_one_acceptance(
    gw: LocalGateway, server: ContractServer
) -> None:
    _seed_copy(server)
    with pytest.raises(UndoNotVerified):
        accept_verified_undo(gw, OWNER, "contacts")  # nothing verified yet
    job_id = prepare(gw, change(create={"email": "new@example.com"}, record_id="new"))
    assert gw.preview(OWNER, job_id, Operation.APPLY).needs_acknowledgement
    assert _check(gw)[0]
    offer = resource_undo_offer(gw, "contacts")
    assert offer.verified == {"undo_of_create", "recreate"} and not offer.accepted
    assert gw.preview(OWNER, job_id, Operation.APPLY).needs_acknowledgement  # not accepted
    accepted = accept_verified_undo(gw, OWNER, "contacts")
    assert accepted.accepted == accepted.verified
    events = gw.ledger.read(lambda tx: tx.latest_undo_acceptance("contacts"))
    assert events is not None and events.actor == OWNER.label
    assert not gw.preview(OWNER, job_id, Operation.APPLY).needs_acknowledgement
    assert confirmed(gw, job_id).job.state is JobState.APPLIED
    assert confirmed(gw, job_id, Operation.UNDO).job.state is JobState.UNDONE
    assert "new" not in server.collection_records(CONTACTS)
    server.arm("ignore_if_match")  # a later check that fails takes the offer away
    assert not _check(gw)[0]
    assert resource_undo_offer(gw, "contacts").verified == frozenset()


def test_an_acceptance_belongs_to_the_check_it_accepted(
    gw: LocalGateway, server: ContractServer
) -> None:
    """pass → accept → fail → pass: the old acceptance does not come back; the undo is
    irreversible again until a reviewer accepts the new check, a new event."""
    _seed_copy(server)
    job_id = prepare(gw, change(create={"email": "new@example.com"}, record_id="new"))
    assert _check(gw)[0]
    accept_verified_undo(gw, OWNER, "contacts")
    assert not gw.preview(OWNER, job_id, Operation.APPLY).needs_acknowledgement
    server.arm("ignore_if_match")
    assert not _check(gw)[0]
    server.clear_faults()
    assert _check(gw)[0]
    offer = resource_undo_offer(gw, "contacts")
    assert offer.verified == {"undo_of_create", "recreate"}
    assert offer.accepted == frozenset() and offer.accepted_at is None
    assert gw.preview(OWNER, job_id, Operation.APPLY).needs_acknowledgement
    accepted = accept_verified_undo(gw, OWNER, "contacts")
    assert accepted.accepted == accepted.verified and accepted.check_id == offer.check_id
    events = gw.ledger.read(lambda tx: tx.events_since(0, 0, 1000))
    checks = [(e.detail or {})["check"] for e in events if e.operation == "undo_accepted"]
    assert offer.check_id is not None
    assert checks == [str(offer.check_id - 2), str(offer.check_id)]  # the third check's
    assert not gw.preview(OWNER, job_id, Operation.APPLY).needs_acknowledgement
