"""json_collection against a real Kinto 26.5 (its own virtual environment ``.venv-kinto``,
memory backends, basic auth): records under ``/data``, ``PUT`` with ``If-None-Match: *``,
``DELETE`` with ``If-Match``, ``POST`` to the collection, ``?field=value`` filters.

What Kinto does (each point a test below):

- ``PUT .../records/{id}`` with ``If-None-Match: *`` creates (201) and refuses an id that
  exists (412); ``POST .../records`` creates with a server id, given in the body's
  ``data.id`` (no ``Location``).
- ``DELETE`` with a stale ``If-Match`` is refused with 412; with the current tag it
  deletes (200). A deleted id can be created again with ``If-None-Match: *``.
- Kinto rewrites ``last_modified`` on every write: declare it in ``server_fields``, so a
  re-create neither sends nor compares it.
- A listing answers ``{"data": [...]}``; ``?email=x`` filters on exact equality, so
  only a listing (``lookup: {list: true}``) sees two spellings of one email.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.config import Config, parse_config
from undogate.errors import Ambiguous, TransitionNotAllowed
from undogate.jobs import JobState, Observation, Operation
from undogate.operations.context import Context
from undogate.operations.endpoint_check import check_endpoint
from undogate.operations.undo_offer import accept_verified_undo

from .collections_world import change, verify_and_accept
from .kintoserver import PASSWORD, USER, KintoServer, kinto_server
from .relay import relay
from .worlds import OWNER, LocalGateway, confirmed, prepare

BUCKET = "/buckets/undogate"
ENV = {"KINTO_AUTH": f"{USER}:{PASSWORD}"}


@pytest.fixture(scope="module")
def kinto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KintoServer]:
    with kinto_server(tmp_path_factory.mktemp("kinto")) as srv:
        srv.request("PUT", BUCKET, json={})
        yield srv


def records(name: str) -> str:
    return f"{BUCKET}/collections/{name}/records"


def listed(kinto: KintoServer, name: str) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in kinto.request("GET", records(name)).json()["data"]}


def collection(kinto: KintoServer, rid: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "agent_id": "account-assistant",
        "name": rid,
        "kind": "json_collection",
        "url": kinto.url(records(name)),
        "token_env": "KINTO_AUTH",
        "token_scheme": "basic",
        "record_pointer": "/data",
        "fields": ["email", "name", "status"],
        "server_fields": ["last_modified"],
        "create": "put",
        "identity": [{"field": "email", "evidence": "email"}],
        "lookup": {"list": True},
        "conditional_writes": True,
        "allow_loopback_http": True,
        **extra,
    }


@pytest.fixture
def world(
    kinto: KintoServer,
    data_dir: Path,
    open_gateway: Callable[..., LocalGateway],
    request: pytest.FixtureRequest,
) -> tuple[LocalGateway, str]:
    """A fresh production collection and its test copy, both seeded with one record."""
    name = request.node.name.replace("_", "-")[5:45]
    for suffix in ("", "-copy"):
        kinto.request("PUT", f"{BUCKET}/collections/{name}{suffix}", json={})
        kinto.request("PUT", f"{records(name + suffix)}/seeded", json={"data": {"email": "s@x.io"}})
    config: Config = parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": [
                collection(kinto, "contacts", name),
                collection(kinto, "contacts-copy", name + "-copy", test_copy_of="contacts"),
            ],
            "agents": [{"id": "account-assistant", "tools": ["list_resources"]}],
        }
    )
    return open_gateway(config, environ=ENV), name


def verify(gw: LocalGateway) -> None:
    result = check_endpoint(Context(gw.config, gw.ledger, gw.http, environ=ENV), "contacts-copy")
    assert result.passed, [(s.name, s.summary, s.message) for s in result.steps]
    assert result.undos == ("undo_of_create", "recreate")
    accept_verified_undo(gw, OWNER, "contacts")


def test_the_check_verifies_kinto_collections_and_leaves_the_copy(
    kinto: KintoServer, world: tuple[LocalGateway, str]
) -> None:
    gw, name = world
    before = listed(kinto, name + "-copy")
    result = check_endpoint(Context(gw.config, gw.ledger, gw.http, environ=ENV), "contacts-copy")
    steps = {s.name: s for s in result.steps}
    assert result.passed, [(s.name, s.summary) for s in result.steps]
    assert steps["probe_created"].evidence == {"status": 201, "method": "PUT"}
    assert steps["stale_delete_refused"].evidence == {"status": 412, "unchanged": True}
    assert steps["good_delete"].evidence == {"status": 200, "absent_after": True}
    assert steps["recreate_deleted_id"].evidence == {"status": 201, "restored": True}
    assert listed(kinto, name + "-copy") == before


def test_create_then_undo_removes_exactly_that_record(
    kinto: KintoServer, world: tuple[LocalGateway, str]
) -> None:
    gw, name = world
    verify(gw)
    before = listed(kinto, name)
    job_id = prepare(gw, change(create={"email": "ann@example.com", "name": "Ann"}))
    done = confirmed(gw, job_id).job
    rid = done.changes[0].target
    assert rid is not None and listed(kinto, name)[rid]["email"] == "ann@example.com"
    assert confirmed(gw, job_id, Operation.UNDO).job.state is JobState.UNDONE
    assert listed(kinto, name) == before


def test_create_then_outside_edit_then_undo_is_refused(
    kinto: KintoServer, world: tuple[LocalGateway, str]
) -> None:
    gw, name = world
    verify(gw)
    job_id = prepare(gw, change(create={"email": "ann@example.com"}, record_id="ann"))
    confirmed(gw, job_id, acknowledge_irreversible=True)
    kinto.request("PATCH", f"{records(name)}/ann", json={"data": {"name": "Edited"}})
    edited = listed(kinto, name)["ann"]
    preview = gw.preview(OWNER, job_id, Operation.UNDO)
    assert preview.token is None and preview.blockers[0]["code"] == "conflict"
    assert listed(kinto, name)["ann"] == edited


def test_upsert_of_an_email_two_records_share_is_ambiguous_and_writes_nothing(
    kinto: KintoServer, world: tuple[LocalGateway, str]
) -> None:
    gw, name = world
    kinto.request("PUT", f"{records(name)}/one", json={"data": {"email": "Ann@Example.com"}})
    kinto.request("PUT", f"{records(name)}/two", json={"data": {"email": " ann@example.COM"}})
    before = listed(kinto, name)
    with pytest.raises(Ambiguous) as refused:
        prepare(gw, change(upsert={"email": "ann@example.com", "status": "customer"}))
    assert sorted(c["id"] for c in refused.value.details["candidates"]) == ["one", "two"]
    assert listed(kinto, name) == before
    assert gw.ledger.read(lambda tx: tx.usage()).jobs == 0


def test_delete_is_irreversible_until_verified_and_its_undo_restores_the_record(
    kinto: KintoServer, world: tuple[LocalGateway, str]
) -> None:
    gw, name = world
    kinto.request(
        "PUT",
        f"{records(name)}/ann",
        json={"data": {"email": "ann@example.com", "name": "Ann", "notes": {"n": [1, 2]}}},
    )
    original = listed(kinto, name)["ann"]
    job_id = prepare(gw, change(record_id="ann", delete=True))
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.needs_acknowledgement and preview.changes[0].irreversible
    assert confirmed(gw, job_id, acknowledge_irreversible=True).job.state is JobState.APPLIED
    assert "ann" not in listed(kinto, name)
    blocked = gw.preview(OWNER, job_id, Operation.UNDO)
    assert blocked.token is None and blocked.blockers[0]["code"] == "undo_not_verified"
    verify(gw)
    assert confirmed(gw, job_id, Operation.UNDO).job.state is JobState.UNDONE
    back = listed(kinto, name)["ann"]
    assert {k: v for k, v in back.items() if k != "last_modified"} == {
        k: v for k, v in original.items() if k != "last_modified"
    }


def test_post_create_and_query_lookup(
    kinto: KintoServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    name = "post-and-query"
    kinto.request("PUT", f"{BUCKET}/collections/{name}", json={})
    config = parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": [
                collection(
                    kinto, "contacts", name, create="post", lookup={"query": "?email={value}"}
                )
            ],
            "agents": [{"id": "account-assistant", "tools": ["list_resources"]}],
        }
    )
    gw = open_gateway(config, environ=ENV)
    created = prepare(gw, change(upsert={"email": "Bo@Example.com", "status": "lead"}))
    done = confirmed(gw, created, acknowledge_irreversible=True).job
    assert done.actions[0].method == "POST" and done.state is JobState.APPLIED
    (rid,) = listed(kinto, name)
    assert done.changes[0].target == rid
    # Kinto filters on exact equality: the query asks for the value as given and as
    # normalized, and only what Kinto returns can match.
    updated = prepare(gw, change(upsert={"email": " Bo@Example.com", "status": "customer"}))
    job = gw.ledger.load_job(updated)
    assert job is not None and job.changes[0].target == rid
    confirmed(gw, updated, acknowledge_irreversible=True)
    assert listed(kinto, name)[rid]["status"] == "customer"


@pytest.mark.parametrize("create", ["put", "post"])
def test_a_held_create_never_adopts_a_third_partys_record(
    kinto: KintoServer, data_dir: Path, open_gateway: Callable[..., LocalGateway], create: str
) -> None:
    """The create never reaches Kinto (a relay holds it and closes without an answer);
    someone else then creates, where the lost create would be found, a record with its
    values and more. Kinto's own members (``id``, ``last_modified``) are never compared,
    but ``owner`` and ``status`` are: the record is never the job's, and never deleted."""
    name = f"held-{create}"
    kinto.request("PUT", f"{BUCKET}/collections/{name}", json={})
    values = {"email": "ann@example.com", "name": "Ann"}
    theirs = {**values, "owner": "third-party", "status": "vip-customer"}
    with relay(kinto.base_url) as held:
        resource = collection(kinto, "contacts", name, create=create)
        resource["url"] = held.url(f"/v1{records(name)}")
        config = parse_config(
            {
                "server": {"data_dir": str(data_dir)},
                "resources": [resource],
                "agents": [{"id": "account-assistant", "tools": ["list_resources"]}],
            }
        )
        gw = open_gateway(config, environ=ENV)
        verify_and_accept(gw, config)
        asked = change(create=values, record_id="ann") if create == "put" else change(create=values)
        job_id = prepare(gw, asked)
        held.withhold_next_write()
        assert (
            confirmed(gw, job_id, acknowledge_irreversible=True).job.state is JobState.NEEDS_REVIEW
        )
        assert [line.split(b" ")[0] for line in held.withheld] == [create.upper().encode()]
        assert listed(kinto, name) == {}  # Kinto never saw it
        if create == "put":
            kinto.request("PUT", f"{records(name)}/ann", json={"data": theirs})
        else:
            kinto.request("POST", records(name), json={"data": theirs})
        before = listed(kinto, name)

        preview = gw.preview(OWNER, job_id, Operation.ACCEPT_OBSERVED)
        assert preview.changes[0].observation is Observation.NEITHER and preview.token is None
        (blocker,) = preview.blockers
        assert blocker["code"] == "reconciliation_blocked"
        assert "'owner'" in blocker["message"] and "'status'" in blocker["message"]
        assert "last_modified" not in blocker["message"] and "third-party" not in blocker["message"]
        with pytest.raises(TransitionNotAllowed):
            gw.preview(OWNER, job_id, Operation.UNDO)
        job = gw.ledger.load_job(job_id)
        assert job is not None and job.changes[0].applied_etag is None
        assert listed(kinto, name) == before  # nothing written, nothing deleted
