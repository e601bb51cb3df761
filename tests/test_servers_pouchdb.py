"""What a real CouchDB-compatible server does, pinned as plain HTTP: the ground the
``version: {pointer: /_rev, delete_query: rev}`` mode stands on (docs/compatibility.md will
cite these).

pouchdb-server 4.2 in memory (tests/pouchdb_server.py). Each test writes documents of its
own ids.
"""

from __future__ import annotations

import re
import uuid

from .pouchdb_server import CouchServer

STRONG_REV_TAG = re.compile(r'"\d+-[0-9a-f]{32}"')


def fresh() -> str:
    return f"acct-{uuid.uuid4().hex[:10]}"


def written(pouchdb: CouchServer, doc_id: str, body: dict[str, object]) -> str:
    """``PUT`` the document (a create, or an update when ``body`` has ``_rev``); its new rev."""
    answer = pouchdb.request("PUT", doc_id, json=body)
    assert answer.status_code == 201, answer.text
    rev = str(answer.json()["rev"])
    assert answer.headers["etag"] == f'"{rev}"'  # a write's ETag is the new rev, strong
    return rev


def test_a_read_has_a_weak_etag_the_version_is_rev_and_json_only_when_asked(
    pouchdb: CouchServer,
) -> None:
    doc_id = fresh()
    rev = written(pouchdb, doc_id, {"status": "lead", "owner": "sam"})
    read = pouchdb.request("GET", doc_id)
    assert read.headers["content-type"].startswith("application/json")
    assert read.headers["etag"].startswith('W/"')  # Express's hash of the body, weak
    assert read.json() == {"status": "lead", "owner": "sam", "_id": doc_id, "_rev": rev}
    plain = pouchdb.request("GET", doc_id, headers={"Accept": "*/*"})
    assert plain.headers["content-type"] == "text/plain; charset=utf-8"
    assert plain.json() == read.json()


def test_an_update_with_the_current_rev_answers_201_and_a_new_rev(pouchdb: CouchServer) -> None:
    doc_id = fresh()
    first = written(pouchdb, doc_id, {"status": "lead"})
    second = written(pouchdb, doc_id, {"_rev": first, "status": "customer"})
    assert second.startswith("2-")
    assert STRONG_REV_TAG.fullmatch(f'"{second}"')
    assert pouchdb.request("GET", doc_id).json()["status"] == "customer"


def test_a_stale_or_missing_rev_is_refused_with_409_and_nothing_changed(
    pouchdb: CouchServer,
) -> None:
    doc_id = fresh()
    first = written(pouchdb, doc_id, {"status": "lead"})
    current = written(pouchdb, doc_id, {"_rev": first, "status": "customer"})
    before = pouchdb.request("GET", doc_id).json()
    attempts = (
        {"_rev": first, "status": "churned"},  # stale
        {"status": "churned"},  # no version: a create, over an existing document
    )
    for body in attempts:
        refused = pouchdb.request("PUT", doc_id, json=body)
        assert refused.status_code == 409
        assert refused.json() == {"error": "conflict", "reason": "Document update conflict"}
    assert pouchdb.request("GET", doc_id).json() == before
    assert before["_rev"] == current


def test_if_match_and_if_none_match_are_not_what_guards_a_put(pouchdb: CouchServer) -> None:
    """The header is ignored: the current rev in ``If-Match`` without ``_rev`` in the body
    is still a conflict, and ``If-None-Match: *`` adds nothing to a create."""
    doc_id = fresh()
    rev = written(pouchdb, doc_id, {"status": "lead"})
    refused = pouchdb.request("PUT", doc_id, json={"status": "x"}, headers={"If-Match": f'"{rev}"'})
    assert refused.status_code == 409
    other = fresh()
    made = pouchdb.request("PUT", other, json={"a": 1}, headers={"If-None-Match": "*"})
    assert made.status_code == 201
    assert pouchdb.request("GET", doc_id).json()["_rev"] == rev


def test_a_rev_for_a_missing_document_creates_nothing(pouchdb: CouchServer) -> None:
    doc_id = fresh()
    refused = pouchdb.request("PUT", doc_id, json={"_rev": "1-0123456789abcdef0123456789abcdef"})
    assert refused.status_code == 409
    assert pouchdb.request("GET", doc_id).status_code == 404


def test_a_delete_is_guarded_by_the_rev_query_only(pouchdb: CouchServer) -> None:
    doc_id = fresh()
    first = written(pouchdb, doc_id, {"status": "lead"})
    current = written(pouchdb, doc_id, {"_rev": first, "status": "customer"})
    stale = pouchdb.request("DELETE", doc_id, params={"rev": first})
    assert stale.status_code == 409
    assert pouchdb.request("GET", doc_id).json()["_rev"] == current
    deleted = pouchdb.request("DELETE", doc_id, params={"rev": current})
    assert deleted.status_code == 200
    assert deleted.json()["ok"] is True
    assert pouchdb.request("GET", doc_id).status_code == 404


def test_a_delete_without_rev_deletes_whatever_is_there(pouchdb: CouchServer) -> None:
    """A hazard to know (CouchDB itself answers 409): pouchdb-server deletes the current
    revision when no ``?rev=`` is given, and ignores ``If-Match``, even a stale one."""
    for headers in ({}, {"If-Match": '"1-0123456789abcdef0123456789abcdef"'}):
        doc_id = fresh()
        first = written(pouchdb, doc_id, {"status": "lead"})
        written(pouchdb, doc_id, {"_rev": first, "status": "customer"})
        deleted = pouchdb.request("DELETE", doc_id, headers=headers)
        assert deleted.status_code == 200
        assert pouchdb.request("GET", doc_id).status_code == 404


def test_the_database_url_lists_no_records_all_docs_lists_them_under_rows_doc(
    pouchdb: CouchServer,
) -> None:
    doc_id = fresh()
    rev = written(pouchdb, doc_id, {"status": "lead"})
    database = pouchdb.request("GET", "").json()
    assert "rows" not in database
    assert database["db_name"] == pouchdb.database
    listing = pouchdb.request("GET", "_all_docs", params={"include_docs": "true"}).json()
    docs = {row["id"]: row["doc"] for row in listing["rows"]}
    assert docs[doc_id] == {"status": "lead", "_id": doc_id, "_rev": rev}
