"""The three built-in kinds pass the contract of the kit (``undogate.testing``), exactly
as a kind from outside does (tests/test_kind_from_outside.py): each against the
reference endpoint, through a real served gateway and the kit's fault proxy. The JSON
kinds' other dialects run it too: a record written with JSON Merge Patch, a collection
written with whole-record PUTs (here), and a record whose version is CouchDB's ``_rev``,
against a real pouchdb-server (tests/test_pouchdb.py); and ``webdav_text`` against the
object stores, with their signing schemes (moto's S3 with AWS SigV4, Azurite with Azure
Shared Key and a static header)."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator, Mapping

import pytest

from undogate.contract_server import ContractServer
from undogate.testing import KindCase, KindContract

from .object_stores import BLOCK_BLOB, BlobServer, S3Server

pytestmark = pytest.mark.slow

TOKEN = "contract-token"
_edits = itertools.count()


@pytest.fixture
def endpoint() -> Iterator[ContractServer]:
    with ContractServer(None, token=TOKEN) as srv:
        yield srv


class TestJsonRecordContract(KindContract):
    @pytest.fixture
    def kind_case(self, endpoint: ContractServer) -> KindCase:
        path, copy = "/records/kit-customer", "/records/kit-customer-copy"
        for where in (path, copy):
            endpoint.set_record(where, {"data": {"status": "lead", "owner": "ann"}, "n": 1})
        return KindCase(
            kind="json_record",
            url=endpoint.url(path),
            test_copy_url=endpoint.url(copy),
            change={"set": {"status": "customer"}, "remove": ["owner"]},
            other_change={"set": {"status": "vip"}},
            outside_edit=lambda: endpoint.set_field(path, "/data/status", f"other {next(_edits)}"),
            state=lambda: endpoint.raw_bytes(path),
            settings={"fields": ["status", "owner"], "record_pointer": "/data"},
            token=TOKEN,
        )


class TestJsonRecordMergePatchContract(KindContract):
    @pytest.fixture
    def kind_case(self, endpoint: ContractServer) -> KindCase:
        path, copy = "/records/kit-merge", "/records/kit-merge-copy"
        for where in (path, copy):
            endpoint.set_record(where, {"data": {"status": "lead", "owner": "ann"}, "n": 1})
        return KindCase(
            kind="json_record",
            url=endpoint.url(path),
            test_copy_url=endpoint.url(copy),
            change={"set": {"status": "customer"}, "remove": ["owner"]},
            other_change={"set": {"status": "vip"}},
            outside_edit=lambda: endpoint.set_field(path, "/data/status", f"other {next(_edits)}"),
            state=lambda: endpoint.raw_bytes(path),
            settings={
                "fields": ["status", "owner"],
                "record_pointer": "/data",
                "write": "merge_patch",
            },
            token=TOKEN,
        )


class TestWebDavTextContract(KindContract):
    @pytest.fixture
    def kind_case(self, endpoint: ContractServer) -> KindCase:
        path, copy = "/docs/kit-notes.md", "/docs/kit-notes-copy.md"
        for where in (path, copy):
            endpoint.set_text(where, "# Notes\n\nCall Ann.\n", "text/markdown")
        return KindCase(
            kind="webdav_text",
            url=endpoint.url(path),
            test_copy_url=endpoint.url(copy),
            change={"text": "# Notes\n\nCall Ann on Monday.\n"},
            other_change={"text": "# Notes\n\nAnn called back.\n"},
            outside_edit=lambda: endpoint.set_text(
                path, f"# Notes\n\nEdited elsewhere {next(_edits)}.\n", "text/markdown"
            ),
            state=lambda: json.dumps([endpoint.get_text(path), endpoint.media_type(path)]).encode(),
            token=TOKEN,
        )


class TestJsonCollectionContract(KindContract):
    @pytest.fixture
    def kind_case(self, endpoint: ContractServer) -> KindCase:
        collection, copy = "/collections/kit-contacts", "/collections/kit-contacts-copy"
        for where in (collection, copy):
            endpoint.set_record(f"{where}/ann", {"id": "ann", "email": "ann@example.com"})
        record = f"{collection}/ann"
        return KindCase(
            kind="json_collection",
            url=endpoint.url(collection),
            test_copy_url=endpoint.url(copy),
            change={"id": "ann", "set": {"status": "customer"}},
            other_change={"id": "ann", "set": {"status": "vip"}},
            outside_edit=lambda: endpoint.set_field(record, "/status", f"other {next(_edits)}"),
            state=lambda: json.dumps(endpoint.collection_records(collection)).encode(),
            settings={
                "fields": ["email", "status"],
                "create": "put",
                "identity": [{"field": "email", "evidence": "email"}],
                "lookup": {"list": True},
            },
            token=TOKEN,
            create={"create": {"email": "kit-new@example.com", "status": "lead"}},
        )


class TestJsonCollectionPutContract(KindContract):
    @pytest.fixture
    def kind_case(self, endpoint: ContractServer) -> KindCase:
        collection, copy = "/collections/kit-put", "/collections/kit-put-copy"
        for where in (collection, copy):
            endpoint.set_record(f"{where}/ann", {"id": "ann", "email": "ann@example.com"})
        record = f"{collection}/ann"
        return KindCase(
            kind="json_collection",
            url=endpoint.url(collection),
            test_copy_url=endpoint.url(copy),
            change={"id": "ann", "set": {"status": "customer"}},
            other_change={"id": "ann", "set": {"status": "vip"}},
            outside_edit=lambda: endpoint.set_field(record, "/status", f"other {next(_edits)}"),
            # The record's bytes (a PUT's are kept as sent) and which records there are.
            state=lambda: (
                endpoint.raw_bytes(record)
                + json.dumps(sorted(endpoint.collection_records(collection))).encode()
            ),
            settings={"fields": ["email", "status"], "create": "put", "write": "put"},
            token=TOKEN,
        )


# -- webdav_text on object stores: a signed endpoint through the same kit ------------------


def _store_case(store: S3Server | BlobServer, headers: Mapping[str, str]) -> KindCase:
    """A text document and its test copy on ``store``, the gateway signing as it must."""
    name, copy = (f"kit/{uuid.uuid4().hex[:10]}{suffix}" for suffix in (".md", "-copy.md"))
    for where in (name, copy):
        store.put(where, b"# Notes\n\nCall Ann.\n", "text/markdown")

    def state() -> bytes:
        read = store.get(name)
        return json.dumps([read.content.decode(), read.headers["content-type"]]).encode()

    def outside_edit() -> None:
        store.put(name, f"# Notes\n\nEdited elsewhere {next(_edits)}.\n".encode(), "text/markdown")

    return KindCase(
        kind="webdav_text",
        url=store.url(name),
        test_copy_url=store.url(copy),
        change={"text": "# Notes\n\nCall Ann on Monday.\n"},
        other_change={"text": "# Notes\n\nAnn called back.\n"},
        outside_edit=outside_edit,
        state=state,
        auth=store.auth,
        environ=store.environ,
        headers=headers,
    )


class TestWebDavTextOnS3Contract(KindContract):
    """moto's S3, every request signed with AWS SigV4 and checked."""

    @pytest.fixture
    def kind_case(self, moto_s3: S3Server) -> KindCase:
        return _store_case(moto_s3, {})


class TestWebDavTextOnAzureBlobContract(KindContract):
    """Azurite's blob service, Shared Key, the blob type as a static header."""

    @pytest.fixture
    def kind_case(self, azurite: BlobServer) -> KindCase:
        return _store_case(azurite, BLOCK_BLOB)
