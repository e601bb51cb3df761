"""json_record and json_collection against a real CouchDB-compatible server:
pouchdb-server 4.2 (npm, in memory; tests/pouchdb_server.py), whose version lives in the
body (``_rev``), which answers a stale one with 409, ignores ``If-Match``, deletes
conditionally only with ``?rev=``, answers a write with 201 and lists a database's
documents only under ``_all_docs?include_docs=true`` (each pinned as plain HTTP in
tests/test_servers_pouchdb.py). The resources say so:

    write: put
    version: {pointer: /_rev, delete_query: rev}   # a record never deletes: no delete_query
    stale_status: [409]
    listing: {path: "_all_docs?include_docs=true", records: /rows/*/doc}   # collections
    id_field: _id

Every request goes through the kit's proxy (``undogate.testing.proxy``), which records
what reached the server and can let another client's write land just before ours.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.config import parse_config
from undogate.jobs import ActionStatus, JobState, Operation
from undogate.operations.endpoint_check import (
    check_endpoint,
    report_lines,
    result_view,
    stale_statuses_seen,
)
from undogate.operations.undo_offer import accept_verified_undo
from undogate.testing import KindCase, KindContract
from undogate.testing.proxy import FaultProxy

from .collections_world import change
from .json_text import member_texts, untouched
from .pouchdb_server import JSON, CouchServer
from .worlds import OWNER, LocalGateway, confirmed, prepare

RECORD_MODE = "put, version in the body at /_rev, stale 409"
COLLECTION_MODE = "put, version in the body at /_rev (DELETE ?rev=), stale 409"
START = {
    "status": "lead",
    "owner": "sam",
    "note": 'caf\u00e9 "quoted" \\ back',
    "nested": {"list": [1, 2.5, None, {"deep": True}], "empty": {}},
    "big": 12345678901234,
}


@dataclass
class Couch:
    """pouchdb-server behind the kit's proxy, and a gateway over the databases a test
    made."""

    server: CouchServer
    proxy: FaultProxy
    data_dir: Path
    open_gateway: Callable[..., LocalGateway]

    def database(self) -> CouchServer:
        db = CouchServer(self.server.base_url, f"db-{uuid.uuid4().hex[:8]}")
        assert db.request("PUT", "").status_code == 201
        return db

    def url(self, db: CouchServer, doc_id: str = "") -> str:
        return self.proxy.url(db.url(doc_id))

    def gateway(self, *resources: dict[str, Any]) -> LocalGateway:
        config = parse_config(
            {
                "server": {"data_dir": str(self.data_dir)},
                "resources": list(resources),
                "agents": [{"id": "account-assistant", "tools": ["list_resources"]}],
            }
        )
        return self.open_gateway(config)


@pytest.fixture
def couch(
    pouchdb: CouchServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> Iterator[Couch]:
    proxy = FaultProxy(pouchdb.base_url).start()
    try:
        yield Couch(pouchdb, proxy, data_dir, open_gateway)
    finally:
        proxy.stop()


def raw(db: CouchServer, doc_id: str) -> bytes:
    answer = db.request("GET", doc_id)
    assert answer.status_code == 200, answer.text
    return answer.content


def rev_of(db: CouchServer, doc_id: str) -> str:
    return str(db.request("GET", doc_id).json()["_rev"])


def put_doc(db: CouchServer, doc_id: str, body: dict[str, Any]) -> str:
    """As another client: create, or update over the current rev; the new rev."""
    current = db.request("GET", doc_id)
    if current.status_code == 200:
        body = {**body, "_rev": current.json()["_rev"]}
    answer = db.request("PUT", doc_id, json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["rev"])


def record(rid: str, url: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "agent_id": "account-assistant",
        "name": rid,
        "kind": "json_record",
        "url": url,
        "fields": ["status", "owner"],
        "write": "put",
        "version": {"pointer": "/_rev"},
        "stale_status": [409],
        "conditional_writes": True,
        "allow_loopback_http": True,
        **extra,
    }


def collection(rid: str, url: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "agent_id": "account-assistant",
        "name": rid,
        "kind": "json_collection",
        "url": url,
        "fields": ["email", "name", "status"],
        "write": "put",
        "version": {"pointer": "/_rev", "delete_query": "rev"},
        "stale_status": [409],
        "listing": {"path": "_all_docs?include_docs=true", "records": "/rows/*/doc"},
        "id_field": "_id",
        "create": "put",
        "identity": [{"field": "email", "evidence": "email"}],
        "lookup": {"list": True},
        "conditional_writes": True,
        "allow_loopback_http": True,
        **extra,
    }


def planned(gw: LocalGateway, job_id: str, operation: Operation) -> dict[str, Any]:
    """The one request ``operation`` would send, as a dry run shows it."""
    [request] = confirmed(gw, job_id, operation, dry_run=True).requests
    return dict(request)


# -- one record ------------------------------------------------------------------------


@pytest.fixture
def accounts(couch: Couch) -> tuple[LocalGateway, CouchServer]:
    """A record and its test copy, both START, in a fresh database."""
    db = couch.database()
    for doc in ("acct", "acct-copy"):
        put_doc(db, doc, START)
    gw = couch.gateway(
        record("account", couch.url(db, "acct")),
        record("account-copy", couch.url(db, "acct-copy"), test_copy_of="account"),
    )
    return gw, db


def test_the_check_verifies_a_record_whose_version_is_its_rev(
    couch: Couch, accounts: tuple[LocalGateway, CouchServer]
) -> None:
    gw, db = accounts
    production, copy = raw(db, "acct"), raw(db, "acct-copy")
    result = check_endpoint(gw, "account-copy")
    assert result.passed, [(s.name, s.summary) for s in result.steps]
    steps = {s.name: s for s in result.steps}
    # No weak tag is probed: the version is no entity-tag; the stale one is a rev the
    # server issued for the copy, carried where the writes carry it (the body).
    assert "weak_if_match_refused" not in steps
    assert steps["good_write"].evidence["status"] == 201
    assert steps["stale_write_refused"].evidence == {"status": 409, "unchanged": True}
    assert steps["missing_not_created"].evidence == {"status": 409, "absent_after": True}
    assert result.mode == RECORD_MODE and result.stale_statuses == (409,)
    lines = report_lines(result_view(result))
    assert lines[-1] == f"account: verified on a test copy as {RECORD_MODE} (check 1 in the ledger)"
    # Its steps are told in this mode's words: no write carries If-Match here.
    assert not [line for line in lines if "If-Match" in line], lines
    assert raw(db, "acct") == production  # never written
    assert untouched(copy, raw(db, "acct-copy"), {"_rev"})  # put back, byte for byte
    stale = [w for w in couch.proxy.writes() if w.body.count(b"undogate-check-")]
    assert stale and all(b'"_rev":"' in w.body for w in stale)
    assert all("if-match" not in {k.lower() for k in w.headers} for w in stale)


def test_a_record_applies_and_undoes_keeping_every_other_members_bytes(
    couch: Couch, accounts: tuple[LocalGateway, CouchServer]
) -> None:
    gw, db = accounts
    start = raw(db, "acct")
    job_id = prepare(gw, change(resource="account", set={"status": "customer"}, remove=["owner"]))
    expected = start.replace(b'"status":"lead","owner":"sam",', b'"status":"customer",')
    assert expected != start
    assert planned(gw, job_id, Operation.APPLY) == {
        "method": "PUT",
        "url": couch.url(db, "acct"),
        "headers": {"Content-Type": "application/json"},  # the version is in the body
        "body": expected.decode(),
        "authentication": None,  # pouchdb-server admits anyone
    }
    assert confirmed(gw, job_id, acknowledge_irreversible=True).job.state is JobState.APPLIED
    assert couch.proxy.writes()[-1].body == expected  # what reached the server
    applied = raw(db, "acct")
    assert untouched(start, applied, {"status", "owner", "_rev"})
    assert member_texts(applied)["status"] == '"customer"' and b'"owner"' not in applied
    job = gw.ledger.load_job(job_id)
    assert job is not None and job.changes[0].applied_etag == f'"{rev_of(db, "acct")}"'

    assert (
        confirmed(gw, job_id, Operation.UNDO, acknowledge_irreversible=True).job.state
        is JobState.UNDONE
    )
    back = applied.replace(b'"status":"customer"', b'"status":"lead"')
    end = back.rindex(b"}")  # the removed member goes back after the last one
    assert couch.proxy.writes()[-1].body == back[:end] + b',"owner":"sam"' + back[end:]
    assert untouched(start, raw(db, "acct"), {"_rev"})  # every member's text as at the start


def test_a_stale_rev_counts_as_refused_only_once_the_check_saw_409(
    couch: Couch, accounts: tuple[LocalGateway, CouchServer]
) -> None:
    gw, db = accounts
    production = gw.config.resource("account")
    assert production is not None

    def confirm_while_another_client_writes(value: str) -> tuple[str, bytes]:
        job_id = prepare(gw, change(resource="account", set={"status": value}))
        preview = gw.preview(OWNER, job_id, Operation.APPLY)
        assert preview.token is not None
        edited: list[bytes] = []

        def edit() -> None:  # lands between the gateway's last read and its write
            put_doc(db, "acct", {**START, "owner": f"someone else ({value})"})
            edited.append(raw(db, "acct"))

        couch.proxy.arm("outside_edit", edit)
        gw.confirm(OWNER, job_id, preview.token)
        assert couch.proxy.writes()[-1].method == "PUT"  # sent, with the read's rev
        return job_id, edited[0]

    job_id, edited = confirm_while_another_client_writes("customer")
    job = gw.ledger.load_job(job_id)
    assert job is not None and job.state is JobState.NEEDS_REVIEW  # 409 is only declared
    assert [(a.status, a.response_status) for a in job.actions] == [(ActionStatus.UNCERTAIN, 409)]
    assert raw(db, "acct") == edited  # nothing of ours was written
    assert (
        confirmed(gw, job_id, Operation.ACCEPT_OBSERVED, acknowledge_irreversible=True).job.state
        is JobState.PREPARED
    )

    assert check_endpoint(gw, "account-copy").passed
    assert gw.ledger.read(lambda tx: stale_statuses_seen(tx, production)) == {409}

    job_id, edited = confirm_while_another_client_writes("vip")
    job = gw.ledger.load_job(job_id)
    assert job is not None and job.state is JobState.PREPARED  # refused: nothing written
    assert [(a.status, a.response_status) for a in job.actions] == [(ActionStatus.REFUSED, 409)]
    assert raw(db, "acct") == edited


# -- a collection ----------------------------------------------------------------------


@pytest.fixture
def contacts(couch: Couch) -> tuple[LocalGateway, CouchServer, CouchServer]:
    """A collection (one database) and its test copy (another), each with one contact."""
    prod, copy = couch.database(), couch.database()
    for db in (prod, copy):
        put_doc(db, "seeded", {"email": "s@example.com", "name": "Sam", "status": "lead"})
    gw = couch.gateway(
        collection("contacts", couch.url(prod)),
        collection("contacts-copy", couch.url(copy), test_copy_of="contacts"),
    )
    return gw, prod, copy


def all_docs(db: CouchServer) -> dict[str, Any]:
    answer = httpx.get(
        db.url("_all_docs"), params={"include_docs": "true"}, headers=JSON, trust_env=False
    )
    return {row["id"]: row["doc"] for row in answer.json()["rows"]}


def test_the_check_verifies_a_collection_listed_under_all_docs(
    contacts: tuple[LocalGateway, CouchServer, CouchServer],
) -> None:
    gw, prod, copy = contacts
    before = (all_docs(prod), all_docs(copy))
    result = check_endpoint(gw, "contacts-copy")
    assert result.passed, [(s.name, s.summary) for s in result.steps]
    steps = {s.name: s.evidence for s in result.steps}
    assert steps["production_read"]["records"] == 1  # listed under /rows/*/doc
    assert steps["probe_created"] == {"status": 201, "method": "PUT"}
    assert steps["stale_update_refused"] == {"status": 409, "unchanged": True}
    assert steps["stale_delete_refused"] == {"status": 409, "unchanged": True}
    assert steps["good_delete"] == {"status": 200, "absent_after": True}
    assert steps["recreate_deleted_id"] == {"status": 201, "restored": True}
    assert result.undos == ("undo_of_create", "recreate")
    assert result.mode == COLLECTION_MODE and result.stale_statuses == (409,)
    lines = report_lines(result_view(result))
    assert lines[1].startswith("  [pass] list the production collection (never written)")
    assert not [line for line in lines if "If-Match" in line or "ETag" in line], lines
    assert (all_docs(prod), all_docs(copy)) == before  # the probe is gone, nothing else moved


def test_a_collection_creates_updates_deletes_and_undoes_each(
    couch: Couch, contacts: tuple[LocalGateway, CouchServer, CouchServer]
) -> None:
    gw, prod, _ = contacts
    assert check_endpoint(gw, "contacts-copy").passed
    accept_verified_undo(gw, OWNER, "contacts")

    created = prepare(
        gw,
        change(resource="contacts", create={"email": "ann@example.com", "name": "Ann"}, id="ann"),
    )
    assert planned(gw, created, Operation.APPLY)["headers"] == {
        "Content-Type": "application/json",
        "If-None-Match": "*",
    }
    assert confirmed(gw, created, acknowledge_irreversible=True).job.state is JobState.APPLIED
    made = rev_of(prod, "ann")
    assert planned(gw, created, Operation.UNDO)["url"] == couch.url(prod, "ann") + f"?rev={made}"
    assert (
        confirmed(gw, created, Operation.UNDO, acknowledge_irreversible=True).job.state
        is JobState.UNDONE
    )
    assert "ann" not in all_docs(prod)

    start = raw(prod, "seeded")
    updated = prepare(gw, change(resource="contacts", id="seeded", set={"status": "customer"}))
    assert planned(gw, updated, Operation.APPLY)["body"] == start.decode().replace(
        '"status":"lead"', '"status":"customer"'
    )
    assert confirmed(gw, updated, acknowledge_irreversible=True).job.state is JobState.APPLIED
    assert (
        confirmed(gw, updated, Operation.UNDO, acknowledge_irreversible=True).job.state
        is JobState.UNDONE
    )
    assert untouched(start, raw(prod, "seeded"), {"_rev"})

    deleted = prepare(gw, change(resource="contacts", id="seeded", delete=True))
    current = rev_of(prod, "seeded")
    assert planned(gw, deleted, Operation.APPLY) == {
        "method": "DELETE",
        "url": couch.url(prod, "seeded") + f"?rev={current}",
        "headers": {},
        "body": "",
        "authentication": None,  # pouchdb-server admits anyone
    }
    assert confirmed(gw, deleted, acknowledge_irreversible=True).job.state is JobState.APPLIED
    assert "seeded" not in all_docs(prod)
    assert (
        confirmed(gw, deleted, Operation.UNDO, acknowledge_irreversible=True).job.state
        is JobState.UNDONE
    )  # re-created from its pre-image
    assert untouched(start, raw(prod, "seeded"), {"_rev"})


def test_a_stale_delete_is_refused_and_nothing_is_written(
    couch: Couch, contacts: tuple[LocalGateway, CouchServer, CouchServer]
) -> None:
    gw, prod, _ = contacts
    assert check_endpoint(gw, "contacts-copy").passed
    job_id = prepare(gw, change(resource="contacts", id="seeded", delete=True))
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token is not None
    edited: list[bytes] = []

    def edit() -> None:
        put_doc(prod, "seeded", {"email": "s@example.com", "name": "Sam B.", "status": "lead"})
        edited.append(raw(prod, "seeded"))

    couch.proxy.arm("outside_edit", edit)
    done = gw.confirm(OWNER, job_id, preview.token, acknowledge_irreversible=True).job
    assert couch.proxy.writes()[-1].method == "DELETE"
    assert done.state is JobState.PREPARED
    assert [(a.status, a.response_status) for a in done.actions] == [(ActionStatus.REFUSED, 409)]
    assert raw(prod, "seeded") == edited[0]  # the other client's edit, still there


# -- the kit's contract ----------------------------------------------------------------

_edits = itertools.count()


class TestPouchdbRecordContract(KindContract):
    """The kit (docs/kinds.md) against a record whose version is its ``_rev``: the same
    contract as every kind's, through the kit's own proxy and a served gateway."""

    @pytest.fixture
    def kind_case(self, pouchdb: CouchServer) -> KindCase:
        db = CouchServer(pouchdb.base_url, f"kit-{uuid.uuid4().hex[:8]}")
        assert db.request("PUT", "").status_code == 201
        for doc in ("acct", "acct-copy"):
            put_doc(db, doc, START)

        def state() -> bytes:  # the document as the server holds it, its version aside
            document = db.request("GET", "acct").json()
            return json.dumps({k: v for k, v in document.items() if k != "_rev"}).encode()

        return KindCase(
            kind="json_record",
            url=db.url("acct"),
            test_copy_url=db.url("acct-copy"),
            change={"set": {"status": "customer"}},
            other_change={"set": {"status": "vip"}},
            outside_edit=lambda: put_doc(db, "acct", {**START, "status": f"other {next(_edits)}"}),
            state=state,
            settings={
                "fields": ["status", "owner"],
                "write": "put",
                "version": {"pointer": "/_rev"},
                "stale_status": [409],
            },
        )
