"""json_collection creates at their edges, against the contract server and a real SQLite
ledger: a create whose answer was lost never adopts someone else's record (so its undo
can never delete it), and an upsert that became a create never makes a duplicate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from undogate.adapters import adapter_for
from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.errors import (
    ChangedSincePreview,
    Conflict,
    TransitionNotAllowed,
)
from undogate.jobs import ChangeState, JobState, Observation, Operation

from .collections_world import CONTACTS, change, open_contacts, seed, verify_and_accept
from .worlds import OWNER, LocalGateway, confirmed, prepare

Opener = Callable[[Config], LocalGateway]

THIRD_PARTY = {"owner": "third-party", "status": "vip-customer"}


def _endpoint(server: ContractServer) -> tuple[dict[str, Any], dict[str, int]]:
    return server.collection_records(CONTACTS), server.write_counts()


# -- a lost create and a third party's record -------------------------------------------------


@pytest.mark.parametrize("create", ["put", "post"])
def test_a_lost_create_never_adopts_a_third_partys_record_nor_lets_undo_delete_it(
    server: ContractServer, data_dir: Path, open_gateway: Opener, create: str
) -> None:
    gw, config = open_contacts(server, data_dir, open_gateway, create=create)
    verify_and_accept(gw, config)
    values = {"email": "ann@example.com", "name": "Ann"}
    asked = change(create=values, record_id="ann") if create == "put" else change(create=values)
    job_id = prepare(gw, asked)
    # The create is held at the endpoint and never applied; its answer never comes.
    server.arm("hang", f"{CONTACTS}/ann" if create == "put" else CONTACTS)
    done = confirmed(gw, job_id, acknowledge_irreversible=True).job
    assert done.state is JobState.NEEDS_REVIEW
    assert done.changes[0].state is ChangeState.UNCERTAIN
    # Meanwhile someone else creates a record where the lost create would be found (the
    # same id; for a POST, the one new record matching its evidence): the job's values,
    # and more.
    seed(server, "ann", **values, **THIRD_PARTY)
    endpoint = _endpoint(server)

    preview = gw.preview(OWNER, job_id, Operation.ACCEPT_OBSERVED)
    assert preview.changes[0].observation is Observation.NEITHER
    assert preview.token is None
    (blocker,) = preview.blockers
    assert blocker["code"] == "reconciliation_blocked"
    # What differs, by name; never the third party's values.
    assert "'owner'" in blocker["message"] and "'status'" in blocker["message"]
    assert "third-party" not in blocker["message"] and "vip" not in blocker["message"]
    # The job never records that record as its own, so nothing can undo it.
    job = gw.ledger.load_job(job_id)
    assert job is not None and job.state is JobState.NEEDS_REVIEW
    assert job.changes[0].state is ChangeState.UNCERTAIN and job.changes[0].applied_etag is None
    with pytest.raises(TransitionNotAllowed):
        gw.preview(OWNER, job_id, Operation.UNDO)
    assert _endpoint(server) == endpoint  # nothing else changed at the endpoint
    assert server.collection_records(CONTACTS)["ann"] == {"id": "ann", **values, **THIRD_PARTY}

    if create == "put":  # once the record at its id is gone, it looks not applied
        server.delete_record(f"{CONTACTS}/ann")
        assert (
            confirmed(
                gw, job_id, Operation.ACCEPT_OBSERVED, acknowledge_irreversible=True
            ).job.state
            is JobState.PREPARED
        )


def test_what_a_create_differs_in_is_named_by_member_never_by_value(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, config = open_contacts(server, data_dir, open_gateway)
    verify_and_accept(gw, config)
    job_id = prepare(gw, change(create={"email": "bo@example.com"}, record_id="bo"))
    server.arm("hang", f"{CONTACTS}/bo")
    assert confirmed(gw, job_id, acknowledge_irreversible=True).job.state is JobState.NEEDS_REVIEW
    seed(server, "bo", email="bo@example.com", **THIRD_PARTY)
    job = gw.ledger.load_job(job_id)
    assert job is not None
    adapter = adapter_for(job.changes[0].kind)
    snap = gw.read_change(job.changes[0], None)
    assert adapter.differing(job.changes[0], snap) == ("owner", "status")


def test_a_lost_update_edited_since_names_the_fields_that_show_neither_side(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, _ = open_contacts(server, data_dir, open_gateway)
    path = seed(server, "fay", email="fay@example.com", name="Fay", status="lead")
    job_id = prepare(gw, change(record_id="fay", set={"name": "Faye", "status": "customer"}))
    server.arm("apply_then_drop", path)
    assert confirmed(gw, job_id, acknowledge_irreversible=True).job.state is JobState.NEEDS_REVIEW
    server.set_field(path, "/status", "churned")  # neither side; name is the job's
    preview = gw.preview(OWNER, job_id, Operation.ACCEPT_OBSERVED)
    assert preview.changes[0].observation is Observation.NEITHER
    message = preview.blockers[0]["message"]
    assert "('status' differ)" in message and "churned" not in message


def test_a_lost_create_whose_record_holds_exactly_its_values_still_reconciles(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    """The id and the server's own members are never compared (Kinto's ``last_modified``)."""
    gw, config = open_contacts(server, data_dir, open_gateway, server_fields=["last_modified"])
    verify_and_accept(gw, config)
    job_id = prepare(gw, change(create={"email": "cy@example.com"}, record_id="cy"))
    server.arm("apply_then_drop", f"{CONTACTS}/cy")
    assert confirmed(gw, job_id, acknowledge_irreversible=True).job.state is JobState.NEEDS_REVIEW
    server.set_field(f"{CONTACTS}/cy", "/last_modified", 1234)
    preview = gw.preview(OWNER, job_id, Operation.ACCEPT_OBSERVED)
    assert preview.changes[0].observation is Observation.LOOKS_APPLIED
    assert (
        confirmed(gw, job_id, Operation.ACCEPT_OBSERVED, acknowledge_irreversible=True).job.state
        is JobState.APPLIED
    )
    assert (
        confirmed(gw, job_id, Operation.UNDO, acknowledge_irreversible=True).job.state
        is JobState.UNDONE
    )
    assert server.collection_records(CONTACTS) == {}


# -- an upsert that became a create -----------------------------------------------------------


def test_an_upsert_that_became_a_create_refuses_a_record_that_appeared_since(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, config = open_contacts(server, data_dir, open_gateway)
    verify_and_accept(gw, config)
    job_id = prepare(gw, change(upsert={"email": "dee@example.com", "name": "Dee"}))
    job = gw.ledger.load_job(job_id)
    assert job is not None and job.changes[0].target is not None  # a create, by PUT
    minted = f"{CONTACTS}/{job.changes[0].target}"
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token is not None
    seed(server, "dee-elsewhere", email="DEE@example.com")  # made meanwhile, elsewhere
    endpoint = _endpoint(server)
    with pytest.raises(Conflict):
        gw.confirm(OWNER, job_id, preview.token, acknowledge_irreversible=True)
    assert _endpoint(server) == endpoint and server.attempt_count(minted) == 0
    again = gw.preview(OWNER, job_id, Operation.APPLY)
    assert again.token is None and again.blockers[0]["code"] == "conflict"


def test_an_upsert_by_post_refuses_a_record_that_appeared_since_too(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, config = open_contacts(server, data_dir, open_gateway, create="post")
    verify_and_accept(gw, config)
    job_id = prepare(gw, change(upsert={"email": "eve@example.com"}))
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token is not None
    seed(server, "eve-elsewhere", email="eve@example.com")
    with pytest.raises(ChangedSincePreview):  # the lookup found it: nothing was sent
        gw.confirm(OWNER, job_id, preview.token, acknowledge_irreversible=True)
    assert server.attempt_count(CONTACTS) == 0
    assert gw.preview(OWNER, job_id, Operation.APPLY).blockers[0]["code"] == "conflict"


def test_a_create_answered_with_a_record_that_existed_before_never_makes_it_the_jobs(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    """A store that deduplicates creates answers a POST of a record it already holds with
    that record (201, its URL). That record is someone else's, made before the job: the
    job never takes it for its own, so its undo can never delete it."""
    gw, config = open_contacts(server, data_dir, open_gateway, create="post")
    verify_and_accept(gw, config)
    values = {"email": "ann@example.com", "name": "Ann"}
    seed(server, "ann", **values)
    job_id = prepare(gw, change(create=values))
    server.arm("answer_existing", CONTACTS)
    done = confirmed(gw, job_id, acknowledge_irreversible=True).job
    assert done.state is JobState.NEEDS_REVIEW
    assert done.changes[0].target is None and done.changes[0].applied_etag is None
    (action,) = done.actions
    assert "'ann', which existed before this create" in (action.detail or "")
    # Reconciling it never adopts Ann's record either.
    looked = gw.preview(OWNER, job_id, Operation.ACCEPT_OBSERVED)
    assert looked.changes[0].observation is Observation.NEITHER and looked.token is None
    with pytest.raises(TransitionNotAllowed):
        gw.preview(OWNER, job_id, Operation.UNDO)
    assert server.collection_records(CONTACTS) == {"ann": {"id": "ann", **values}}
