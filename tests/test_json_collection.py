"""json_collection end to end against the contract server's collections and a real
SQLite ledger: create, delete, upsert, and undo only where it was verified (docs/collections.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.errors import (
    Ambiguous,
    ConfigError,
    Conflict,
    InvalidRequest,
    IrreversibleNotAcknowledged,
    NotFound,
    Quarantined,
    UndoNotVerified,
)
from undogate.jobs import ActionStatus, ChangeState, JobState, Observation, Operation

from .collections_world import CONTACTS, change, contacts, seed, state, verify_and_accept
from .worlds import OWNER, LocalGateway, confirmed, make_config, prepare

Opener = Callable[[Config], LocalGateway]


@pytest.fixture
def config(server: ContractServer, data_dir: Path) -> Config:
    return make_config(server, data_dir, contacts(server))


@pytest.fixture
def gw(config: Config, open_gateway: Opener) -> LocalGateway:
    return open_gateway(config)


def test_create_is_irreversible_until_verified_and_needs_acknowledgement(
    gw: LocalGateway, server: ContractServer
) -> None:
    job_id = prepare(gw, change(create={"email": "ann@example.com", "name": "Ann"}))
    job = gw.ledger.load_job(job_id)
    assert job is not None and job.changes[0].target  # a PUT create mints its id
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token and preview.needs_acknowledgement
    assert preview.changes[0].irreversible and not preview.changes[0].reversible
    with pytest.raises(IrreversibleNotAcknowledged):
        gw.confirm(OWNER, job_id, preview.token)
    assert server.collection_records(CONTACTS) == {}  # nothing written
    done = gw.confirm(OWNER, job_id, preview.token, acknowledge_irreversible=True).job
    assert done.state is JobState.APPLIED
    rid = done.changes[0].target
    assert rid is not None
    assert server.collection_records(CONTACTS)[rid]["email"] == "ann@example.com"
    assert done.actions[0].method == "PUT"
    undo = gw.preview(OWNER, job_id, Operation.UNDO)
    assert undo.token is None and undo.blockers[0]["code"] == "undo_not_verified"


def test_create_then_undo_removes_exactly_that_record(
    gw: LocalGateway, server: ContractServer, config: Config
) -> None:
    other = seed(server, "bob", email="bob@example.com", name="Bob")
    bob = server.raw_bytes(other)
    verify_and_accept(gw, config)
    job_id = prepare(gw, change(create={"email": "ann@example.com"}, record_id="ann-1"))
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert not preview.needs_acknowledgement and preview.changes[0].reversible
    assert confirmed(gw, job_id).job.state is JobState.APPLIED
    assert set(server.collection_records(CONTACTS)) == {"bob", "ann-1"}
    undone = confirmed(gw, job_id, Operation.UNDO).job
    assert undone.state is JobState.UNDONE
    assert undone.actions[-1].method == "DELETE"
    assert undone.actions[-1].if_match == undone.changes[0].applied_etag
    assert set(server.collection_records(CONTACTS)) == {"bob"}
    assert server.raw_bytes(other) == bob


def test_undo_of_a_create_refused_once_the_record_changed(
    gw: LocalGateway, server: ContractServer, config: Config
) -> None:
    verify_and_accept(gw, config)
    job_id = prepare(gw, change(create={"email": "ann@example.com"}, record_id="ann"))
    confirmed(gw, job_id, acknowledge_irreversible=True)
    server.set_field(f"{CONTACTS}/ann", "/notes", "called her")  # an outside edit
    edited = server.raw_bytes(f"{CONTACTS}/ann")
    preview = gw.preview(OWNER, job_id, Operation.UNDO)
    assert preview.token is None and preview.blockers[0]["code"] == "conflict"
    assert server.raw_bytes(f"{CONTACTS}/ann") == edited
    server.delete_record(f"{CONTACTS}/ann")  # gone: refused too
    assert gw.preview(OWNER, job_id, Operation.UNDO).blockers[0]["code"] == "conflict"


def test_create_refuses_an_existing_id_and_a_bad_one(
    gw: LocalGateway, server: ContractServer
) -> None:
    seed(server, "ann", email="ann@example.com")
    with pytest.raises(Conflict):
        prepare(gw, change(create={"email": "x@example.com"}, record_id="ann"))
    with pytest.raises(InvalidRequest):
        prepare(gw, change(create={"email": "x@example.com"}, record_id="../records/x"))
    with pytest.raises(InvalidRequest):
        prepare(gw, change(create={"password": "x"}))  # not allow-listed
    with pytest.raises(InvalidRequest):
        prepare(gw, change(create={"email": "x@example.com"}, delete=True, record_id="ann"))


def test_delete_keeps_the_pre_image_and_its_undo_restores_it_exactly(
    gw: LocalGateway, server: ContractServer, config: Config
) -> None:
    path = seed(server, "ann", email="ann@example.com", name="Ann", extra={"kept": [1, 2]})
    start = server.get_record(path)
    job_id = prepare(gw, change(record_id="ann", delete=True))
    job = gw.ledger.load_job(job_id)
    assert job is not None and job.changes[0].before == {"record": start, "server_fields": []}
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.changes[0].irreversible
    assert confirmed(gw, job_id, acknowledge_irreversible=True).job.state is JobState.APPLIED
    assert server.collection_records(CONTACTS) == {}
    assert gw.preview(OWNER, job_id, Operation.UNDO).blockers[0]["code"] == "undo_not_verified"
    verify_and_accept(gw, config)
    undone = confirmed(gw, job_id, Operation.UNDO, acknowledge_irreversible=True).job
    assert undone.state is JobState.UNDONE
    assert undone.actions[-1].method == "PUT"
    assert server.get_record(path) == start


def test_delete_refused_when_the_record_changed_since_prepare(
    gw: LocalGateway, server: ContractServer
) -> None:
    path = seed(server, "ann", email="ann@example.com", name="Ann")
    job_id = prepare(gw, change(record_id="ann", delete=True))
    server.set_field(path, "/notes", "new")  # outside the allowlist, still a change
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token is None and preview.blockers[0]["code"] == "conflict"
    assert server.get_record(path)["notes"] == "new"


def test_delete_of_a_missing_record_is_not_found(gw: LocalGateway) -> None:
    with pytest.raises(NotFound):
        prepare(gw, change(record_id="nobody", delete=True))


def test_recreate_refused_by_the_store_leaves_the_job_applied(
    gw: LocalGateway, server: ContractServer, config: Config
) -> None:
    seed(server, "ann", email="ann@example.com")
    verify_and_accept(gw, config)
    job_id = prepare(gw, change(record_id="ann", delete=True))
    confirmed(gw, job_id, acknowledge_irreversible=True)
    server.refuse_recreate(CONTACTS)
    done = confirmed(gw, job_id, Operation.UNDO, acknowledge_irreversible=True).job
    assert done.state is JobState.APPLIED
    assert done.actions[-1].status is ActionStatus.REFUSED
    assert server.collection_records(CONTACTS) == {}


def test_upsert_creates_updates_or_refuses_ambiguity(
    gw: LocalGateway, server: ContractServer, config: Config
) -> None:
    verify_and_accept(gw, config)
    created = prepare(gw, change(upsert={"email": "Ann@Example.com", "status": "lead"}))
    job = gw.ledger.load_job(created)
    assert job is not None and job.changes[0].before is not None
    confirmed(gw, created, acknowledge_irreversible=True)
    assert len(server.collection_records(CONTACTS)) == 1
    updated = prepare(gw, change(upsert={"email": " ann@EXAMPLE.com ", "status": "customer"}))
    job = gw.ledger.load_job(updated)
    assert job is not None and job.changes[0].fields == ("email", "status")
    confirmed(gw, updated, acknowledge_irreversible=True)
    (record,) = server.collection_records(CONTACTS).values()
    assert record["status"] == "customer"
    seed(server, "dup", email="ANN@example.com")
    jobs_before = gw.ledger.read(lambda tx: tx.usage()).jobs
    writes = server.write_counts()
    with pytest.raises(Ambiguous) as refused:
        prepare(gw, change(upsert={"email": "ann@example.com", "status": "lost"}))
    candidates = refused.value.details["candidates"]
    assert sorted(c["id"] for c in candidates) == sorted(server.collection_records(CONTACTS))
    assert all(c["evidence"] == {"email": "ann@example.com"} for c in candidates)
    assert "status" not in str(candidates)  # ids and evidence only
    assert gw.ledger.read(lambda tx: tx.usage()).jobs == jobs_before
    assert server.write_counts() == writes


def test_update_by_id_patches_the_record_and_undoes(
    gw: LocalGateway, server: ContractServer
) -> None:
    path = seed(server, "ann", email="ann@example.com", status="lead")
    start = server.raw_bytes(path)
    job_id = prepare(gw, change(record_id="ann", set={"status": "customer"}))
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert not preview.needs_acknowledgement  # an update's undo needs no verification
    assert confirmed(gw, job_id).job.actions[0].method == "PATCH"
    assert server.get_record(path)["status"] == "customer"
    confirmed(gw, job_id, Operation.UNDO)
    assert server.get_record(path) == {"id": "ann", "email": "ann@example.com", "status": "lead"}
    assert server.raw_bytes(path) == start


def test_two_records_of_one_collection_never_overlap(
    gw: LocalGateway, server: ContractServer
) -> None:
    seed(server, "ann", email="ann@example.com", status="lead")
    seed(server, "bob", email="bob@example.com", status="lead")
    first = prepare(gw, change(record_id="ann", set={"status": "customer"}))
    second = prepare(gw, change(record_id="bob", set={"status": "customer"}))
    confirmed(gw, first, acknowledge_irreversible=True)
    server.arm("apply_then_drop", f"{CONTACTS}/bob")
    assert confirmed(gw, second, acknowledge_irreversible=True).job.state is JobState.NEEDS_REVIEW
    # bob's uncertain write quarantines bob, never ann.
    assert (
        confirmed(gw, first, Operation.UNDO, acknowledge_irreversible=True).job.state
        is JobState.UNDONE
    )


def test_put_create_whose_answer_was_lost_is_resolved_by_its_url(
    gw: LocalGateway, server: ContractServer, config: Config
) -> None:
    verify_and_accept(gw, config)
    job_id = prepare(gw, change(create={"email": "ann@example.com"}, record_id="ann"))
    server.arm("apply_then_drop", f"{CONTACTS}/ann")
    done = confirmed(gw, job_id, acknowledge_irreversible=True).job
    assert done.state is JobState.NEEDS_REVIEW
    assert done.changes[0].state is ChangeState.UNCERTAIN
    preview = gw.preview(OWNER, job_id, Operation.ACCEPT_OBSERVED)
    assert preview.changes[0].observation is Observation.LOOKS_APPLIED
    assert (
        confirmed(gw, job_id, Operation.ACCEPT_OBSERVED, acknowledge_irreversible=True).job.state
        is JobState.APPLIED
    )
    confirmed(gw, job_id, Operation.UNDO, acknowledge_irreversible=True)
    assert server.collection_records(CONTACTS) == {}  # created once, removed once


def _post_world(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> tuple[LocalGateway, Config]:
    config = make_config(server, data_dir, contacts(server, create="post"))
    return open_gateway(config), config


def test_post_create_takes_its_id_from_the_answer(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, config = _post_world(server, data_dir, open_gateway)
    verify_and_accept(gw, config)
    with pytest.raises(InvalidRequest):
        prepare(gw, change(create={"name": "No Evidence"}))  # a lost answer could not be found
    with pytest.raises(InvalidRequest):
        prepare(gw, change(create={"email": "a@example.com"}, record_id="chosen"))
    job_id = prepare(gw, change(create={"email": "ann@example.com"}))
    done = confirmed(gw, job_id, acknowledge_irreversible=True).job
    assert done.actions[0].method == "POST" and done.state is JobState.APPLIED
    (rid,) = server.collection_records(CONTACTS)
    assert done.changes[0].target == rid
    confirmed(gw, job_id, Operation.UNDO, acknowledge_irreversible=True)
    assert server.collection_records(CONTACTS) == {}


def test_post_create_lost_answer_finds_the_one_new_record(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, config = _post_world(server, data_dir, open_gateway)
    verify_and_accept(gw, config)
    seed(server, "old", email="ann@example.com")  # there before: never taken for ours
    job_id = prepare(gw, change(create={"email": "ann@example.com", "name": "Ann"}))
    server.arm("apply_then_drop", CONTACTS)
    done = confirmed(gw, job_id, acknowledge_irreversible=True).job
    assert done.state is JobState.NEEDS_REVIEW and done.changes[0].target is None
    preview = gw.preview(OWNER, job_id, Operation.ACCEPT_OBSERVED)
    assert preview.changes[0].observation is Observation.LOOKS_APPLIED
    settled = confirmed(gw, job_id, Operation.ACCEPT_OBSERVED, acknowledge_irreversible=True).job
    new = [r for r in server.collection_records(CONTACTS) if r != "old"]
    assert settled.changes[0].target == new[0]
    confirmed(gw, job_id, Operation.UNDO, acknowledge_irreversible=True)
    assert set(server.collection_records(CONTACTS)) == {"old"}


def test_post_create_lost_answer_with_two_candidates_is_blocked(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, _ = _post_world(server, data_dir, open_gateway)
    job_id = prepare(gw, change(create={"email": "ann@example.com"}))
    server.arm("apply_then_drop", CONTACTS)
    assert confirmed(gw, job_id, acknowledge_irreversible=True).job.state is JobState.NEEDS_REVIEW
    seed(server, "someone-else", email="ANN@example.com")
    preview = gw.preview(OWNER, job_id, Operation.ACCEPT_OBSERVED)
    assert preview.token is None
    assert preview.blockers[0]["code"] == "reconciliation_blocked"


def test_post_create_lost_answer_with_nothing_found_is_blocked(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, _ = _post_world(server, data_dir, open_gateway)
    job_id = prepare(gw, change(create={"email": "ann@example.com"}))
    server.arm("status:503", CONTACTS)  # an answer that says nothing
    assert confirmed(gw, job_id, acknowledge_irreversible=True).job.state is JobState.NEEDS_REVIEW
    assert state(gw, job_id) is JobState.NEEDS_REVIEW
    preview = gw.preview(OWNER, job_id, Operation.ACCEPT_OBSERVED)
    assert preview.blockers[0]["code"] == "reconciliation_blocked"


@pytest.mark.parametrize(
    ("settings", "where"),
    [
        ({"identity": [{"field": "name", "evidence": "similarity"}]}, "identity[0].evidence"),
        ({"identity": [{"field": "name", "evidence": "fuzzy"}]}, "identity[0].evidence"),
        ({"identity": [{"field": "nope", "evidence": "email"}]}, "identity[0].field"),
        ({"create": True}, "create"),
        ({"create": "post", "identity": [], "lookup": None}, "create"),
        ({"lookup": {"query": "email={value}"}}, "lookup.query"),
        ({"lookup": None}, "lookup"),
    ],
)
def test_config_refuses_what_would_guess(
    server: ContractServer, data_dir: Path, settings: dict[str, Any], where: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        make_config(server, data_dir, contacts(server, **settings))
    assert where in str(refused.value.details)


def test_confirming_an_undo_no_longer_verified_is_refused(
    gw: LocalGateway, server: ContractServer, config: Config
) -> None:
    seed(server, "ann", email="ann@example.com")
    verify_and_accept(gw, config)
    job_id = prepare(gw, change(record_id="ann", delete=True))
    confirmed(gw, job_id, acknowledge_irreversible=True)
    preview = gw.preview(OWNER, job_id, Operation.UNDO)
    assert preview.token is not None
    verify_and_accept(gw, config, undos=("undo_of_create",))  # re-create no longer verified
    with pytest.raises(UndoNotVerified):
        gw.confirm(OWNER, job_id, preview.token)
    assert server.collection_records(CONTACTS) == {}


def test_an_uncertain_post_create_quarantines_the_whole_collection_until_reconciled(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, config = _post_world(server, data_dir, open_gateway)
    verify_and_accept(gw, config)
    seed(server, "bob", email="bob@example.com", status="lead")
    job_id = prepare(gw, change(create={"email": "ann@example.com"}))
    server.arm("apply_then_drop", CONTACTS)
    assert confirmed(gw, job_id, acknowledge_irreversible=True).job.state is JobState.NEEDS_REVIEW
    other = prepare(gw, change(record_id="bob", set={"status": "customer"}))
    with pytest.raises(Quarantined):
        gw.preview(OWNER, other, Operation.APPLY)
    confirmed(
        gw, job_id, Operation.ACCEPT_OBSERVED, acknowledge_irreversible=True
    )  # the one new record is ours: now named
    assert confirmed(gw, other, acknowledge_irreversible=True).job.state is JobState.APPLIED


def test_other_kinds_refuse_the_collection_shapes_and_settings(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    from .worlds import resource

    gw = open_gateway(
        make_config(
            server,
            data_dir,
            resource(server, "customer", "/records/customer-123"),
            resource(server, "notes", "/docs/notes.md", kind="webdav_text"),
        )
    )
    for shape in ({"create": {"status": "x"}}, {"record_id": "a", "delete": True}):
        with pytest.raises(InvalidRequest):
            prepare(gw, change(resource="customer", **shape))
        with pytest.raises(InvalidRequest):
            prepare(gw, change(resource="notes", text="x\n", **shape))
    with pytest.raises(ConfigError) as refused:
        make_config(
            server,
            data_dir,
            resource(server, "customer", "/records/customer-123", create="put"),
            resource(
                server,
                "notes",
                "/docs/notes.md",
                kind="webdav_text",
                identity=[{"field": "x", "evidence": "email"}],
            ),
        )
    assert "resources[0].create" in str(refused.value.details)
    assert "resources[1].identity" in str(refused.value.details)


def test_one_record_of_a_collection_per_job(gw: LocalGateway) -> None:
    """Two upserts of one email in one job would both find nothing and create it twice."""
    twice = change(upsert={"email": "ann@example.com"})
    with pytest.raises(InvalidRequest) as refused:
        prepare(gw, twice, twice)
    assert "one record per job" in refused.value.message
