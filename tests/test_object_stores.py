"""``webdav_text`` documents on object stores: S3 (moto, every request signed with AWS
SigV4 and checked) and Azure Blob (Azurite, Shared Key, ``x-ms-blob-type: BlockBlob`` as
a static header), through the gateway's own signing (adapters/credentials.py).

Each store: apply and undo of a text document with its exact bytes; a stale write
refused by the store with nothing written; the endpoint check on a test copy, with the
create probes (S3 refuses a second create with 412, Azure with 409: each counted a
refusal because the check saw nothing change); a create and its undo. On S3: a wrong
secret is refused with 403, the object unchanged, the job ``refused``; the payload hash
the store checked is the SHA-256 of exactly the bytes that arrived.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.auth import Keyring
from undogate.config import parse_config
from undogate.jobs import (
    ActionStatus,
    Actor,
    ChangeRequest,
    Job,
    JobState,
    Operation,
    PrepareRequest,
)
from undogate.ledger import Ledger
from undogate.net import RemoteResponse
from undogate.operations.context import Context
from undogate.operations.endpoint_check import check_endpoint
from undogate.operations.undo_offer import accept_verified_undo
from undogate.service import Service
from undogate.testing import FaultProxy

from .browser import layout_problems, served
from .davservers import HookedHTTP, prepare_text, run
from .object_stores import BLOCK_BLOB, S3_SECRET_ENV, BlobServer, S3Server
from .test_web_browser import open_page, sign_in
from .worlds import OWNER, LocalGateway, review_app

# Bytes a store must keep exactly: CRLF, a BOM, no final newline, non-ASCII.
ORIGINAL = "\ufeff# Notes\r\n\r\nCall Ann about the café.\r\nNo newline at the end"
CHANGED = "# Notes\n\nAnn called back; the café is booked.\n"
OUTSIDE = "# Notes\n\nEdited by someone else.\n"
WRONG_SECRET = "not-the-secret-0123456789abcdefghijklmnopq"
Store = S3Server | BlobServer


class ReadHookedHTTP(HookedHTTP):
    """``HookedHTTP``, and callbacks just after the next GET is answered (between a
    confirm's read and its write, before the write is signed)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.after_get: list[Callable[[], object]] = []

    def send(
        self, method: str, url: str, *, headers: dict[str, str], **kwargs: Any
    ) -> RemoteResponse:
        response = super().send(method, url, headers=headers, **kwargs)
        if method == "GET":
            while self.after_get:
                self.after_get.pop(0)()
        return response


def document(store: Store, rid: str, name: str, **extra: Any) -> dict[str, Any]:
    """A ``webdav_text`` resource for the object ``name`` on ``store``, signed as the
    store requires (Azure Blob: with its blob type as a static header)."""
    entry: dict[str, Any] = {
        "id": rid,
        "agent_id": "account-assistant",
        "name": rid,
        "kind": "webdav_text",
        "url": store.url(name),
        "conditional_writes": True,
        "allow_loopback_http": True,
        "auth": store.auth,
    }
    if isinstance(store, BlobServer):
        entry["headers"] = dict(BLOCK_BLOB)
    return {**entry, **extra}


@contextlib.contextmanager
def store_gateway(
    data_dir: Path, store: Store, *resources: dict[str, Any]
) -> Iterator[tuple[LocalGateway, ReadHookedHTTP, dict[str, str]]]:
    """A gateway over ``resources``, its hooked client, and the environment it reads its
    credentials from (change it to rotate one)."""
    config = parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": list(resources),
            "agents": [{"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}],
        }
    )
    environ = dict(store.environ)
    ledger = Ledger.open(config.server.data_dir)
    http = ReadHookedHTTP(request_timeout_s=config.server.request_timeout_s)
    try:
        gw = LocalGateway(config=config, ledger=ledger, http=http, environ=environ)
        gw.recover()
        yield gw, http, environ
    finally:
        http.close()
        ledger.close()


def fresh(suffix: str = ".md") -> str:
    return f"notes/{uuid.uuid4().hex[:10]}{suffix}"


def outcomes(job: Job) -> list[tuple[ActionStatus, int | None]]:
    return [(a.status, a.response_status) for a in job.actions]


def stored(store: Store, name: str) -> tuple[int, bytes, str]:
    """The object as the store holds it: status, exact bytes, media type."""
    read = store.get(name)
    return read.status_code, read.content, read.headers.get("content-type", "")


@pytest.fixture(params=["s3", "azure"])
def store(request: pytest.FixtureRequest) -> Store:
    """Each store, started once per module (the fixtures are module-scoped)."""
    name = "moto_s3" if request.param == "s3" else "azurite"
    server: Store = request.getfixturevalue(name)
    return server


# -- every store ---------------------------------------------------------------------------


def test_apply_and_undo_keep_the_exact_bytes(store: Store, data_dir: Path) -> None:
    name = fresh()
    store.put(name, ORIGINAL.encode(), "text/markdown")
    before = stored(store, name)
    with store_gateway(data_dir, store, document(store, "notes", name)) as (gw, http, _):
        job = prepare_text(gw, "notes", CHANGED)
        applied = run(gw, job.id, Operation.APPLY)
        assert applied.state is JobState.APPLIED, applied.actions
        assert stored(store, name) == (200, CHANGED.encode(), before[2])
        undone = run(gw, job.id, Operation.UNDO)
        assert undone.state is JobState.UNDONE, undone.actions
    assert stored(store, name) == before  # byte for byte, media type too
    # The gateway sent the blob type with every write, and never an If-Match: *.
    for _, _, headers, _ in http.sent:
        assert headers.get("If-Match") != "*"
        if isinstance(store, BlobServer):
            assert headers["x-ms-blob-type"] == "BlockBlob"


def test_a_stale_write_is_refused_and_nothing_is_written(store: Store, data_dir: Path) -> None:
    name = fresh()
    store.put(name, ORIGINAL.encode(), "text/markdown")
    with store_gateway(data_dir, store, document(store, "notes", name)) as (gw, http, _):
        job = prepare_text(gw, "notes", CHANGED)
        preview = gw.preview(OWNER, job.id, Operation.APPLY)
        assert preview.token
        # Another client writes after the confirm's read, before its PUT leaves.
        http.before_write.append(lambda: store.put(name, OUTSIDE.encode(), "text/markdown"))
        done = gw.confirm(OWNER, job.id, preview.token).job
        assert outcomes(done) == [(ActionStatus.REFUSED, 412)]
        assert done.state is JobState.PREPARED
    assert stored(store, name)[:2] == (200, OUTSIDE.encode())  # only theirs


def test_the_check_verifies_the_store_and_a_create_and_its_undo(
    store: Store, data_dir: Path
) -> None:
    copy, new = fresh(), fresh(".txt")
    store.put(copy, b"The test copy.\n", "text/plain")
    resources = (
        document(store, "notes", new, create=True),
        document(store, "notes-copy", copy, create=True, test_copy_of="notes"),
    )
    with store_gateway(data_dir, store, *resources) as (gw, _, _):
        wire = Context(gw.config, gw.ledger, gw.http, environ={**store.environ})
        result = check_endpoint(wire, "notes-copy")
        steps = {s.name: s for s in result.steps}
        assert result.passed and result.undos == ("undo_of_create",), result.steps
        assert all(s.passed for s in result.steps), result.steps
        # A second create where the probe exists: S3 says 412, Azure 409, and the check
        # saw nothing change either way.
        refusal = 409 if isinstance(store, BlobServer) else 412
        assert steps["existing_not_overwritten"].evidence == {
            "status": refusal,
            "unchanged": True,
        }
        assert steps["stale_delete_refused"].evidence == {"status": 412, "unchanged": True}
        success = 202 if isinstance(store, BlobServer) else 204
        assert steps["good_delete"].evidence == {"status": success, "absent_after": True}
        assert "remove_probe_document" not in steps  # nothing left behind
        assert stored(store, copy)[:2] == (200, b"The test copy.\n")

        accept_verified_undo(gw, OWNER, "notes")
        job = prepare_text(gw, "notes", "Created by the agent.\n")
        done = run(gw, job.id, Operation.APPLY)
        assert done.state is JobState.APPLIED and done.actions[-1].method == "PUT"
        assert stored(store, new) == (200, b"Created by the agent.\n", "text/plain")
        undone = run(gw, job.id, Operation.UNDO)
        assert undone.state is JobState.UNDONE and undone.actions[-1].method == "DELETE"
    assert stored(store, new)[0] == 404


# -- S3 --------------------------------------------------------------------------------


def test_a_wrong_secret_is_refused_with_403_and_the_job_is_refused(
    moto_s3: S3Server, data_dir: Path
) -> None:
    name = fresh()
    etag = moto_s3.put(name, ORIGINAL.encode(), "text/markdown")
    with store_gateway(data_dir, moto_s3, document(moto_s3, "notes", name)) as (gw, http, env):
        job = prepare_text(gw, "notes", CHANGED)
        preview = gw.preview(OWNER, job.id, Operation.APPLY)
        assert preview.token

        def rotate_wrongly() -> None:  # after the confirm's read, before its PUT is signed
            env[S3_SECRET_ENV] = WRONG_SECRET

        http.after_get.append(rotate_wrongly)
        done: Job = gw.confirm(OWNER, job.id, preview.token).job
        assert outcomes(done) == [(ActionStatus.REFUSED, 403)]
        assert done.state is JobState.PREPARED
        assert len(http.sent) == 1 and http.responses[0].status == 403
        assert b"SignatureDoesNotMatch" in http.responses[0].body
    after = moto_s3.get(name)
    assert (after.content, after.headers["etag"]) == (ORIGINAL.encode(), etag)


def test_the_signed_payload_hash_is_the_sha256_of_exactly_the_bytes_sent(
    moto_s3: S3Server, data_dir: Path
) -> None:
    """moto checks the signature (over a canonical request carrying the header's hash)
    but not the hash against the body, so the second half is shown on the wire: what
    arrived at the proxy in front of moto hashes to exactly the signed value."""
    name = fresh()
    moto_s3.put(name, ORIGINAL.encode(), "text/markdown")
    proxy = FaultProxy(moto_s3.base_url).start()
    try:
        resource = {**document(moto_s3, "notes", name), "url": proxy.url(moto_s3.url(name))}
        with store_gateway(data_dir, moto_s3, resource) as (gw, _, _):
            job = prepare_text(gw, "notes", CHANGED)
            assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
    finally:
        proxy.stop()
    (put,) = proxy.writes()
    headers = {k.lower(): v for k, v in put.headers.items()}
    assert put.body == CHANGED.encode()
    assert headers["x-amz-content-sha256"] == hashlib.sha256(put.body).hexdigest()
    signed = headers["authorization"].partition("SignedHeaders=")[2].split(",")[0].split(";")
    assert {"host", "x-amz-content-sha256", "x-amz-date", "content-type", "if-match"} <= set(signed)
    assert moto_s3.get(name).content == CHANGED.encode()  # moto accepted the signature


def test_an_s3_preview_fits_a_phone_with_its_etag_exact(
    browser: Any, moto_s3: S3Server, data_dir: Path
) -> None:
    """S3's entity tag is an MD5's 32 hex digits, one unbroken run: in the preview's
    stacked header table at 390 px it ran past its box. It may wrap every 16 digits
    now, and reads exactly as sent."""
    name = fresh()
    moto_s3.put(name, ORIGINAL.encode(), "text/markdown")
    etag = moto_s3.get(name).headers["etag"]
    assert re.fullmatch(r'"[0-9a-f]{32}"', etag)
    with store_gateway(data_dir, moto_s3, document(moto_s3, "notes", name)) as (gw, _, _):
        keyring = Keyring(gw.ledger, known_agents=lambda: {"account-assistant"})
        alice = keyring.create_operator(label="alice")
        agent = Actor("account-assistant", alice.credential.id, "agent", "test")
        change = ChangeRequest("notes", text=CHANGED)
        job = gw.prepare(agent, agent.id, PrepareRequest("Notes", (change,))).job
        with served(review_app(Service(gw, keyring))) as site:
            phone = open_page(browser, width=390, height=844)
            sign_in(phone.page, site, alice.key)
            phone.page.goto(f"{site.url}/jobs/{job.id}")
            phone.page.get_by_role("button", name="Preview apply").click()
            phone.page.wait_for_url(f"{site.url}/jobs/{job.id}/previews/**")
            sent = phone.page.locator("table.headers tr", has_text="If-Match").locator("td")
            assert sent.inner_text() == etag
            assert layout_problems(phone.page) == {}
            phone.assert_inert()
    assert moto_s3.get(name).content == ORIGINAL.encode()  # a preview writes nothing


# -- Azure Blob ------------------------------------------------------------------------


def test_a_static_header_is_signed_whatever_its_case(azurite: BlobServer, data_dir: Path) -> None:
    """Azure compares x-ms-* names in lower case; the header is sent as written."""
    name = fresh()
    azurite.put(name, ORIGINAL.encode(), "text/markdown")
    resource = document(azurite, "notes", name, headers={"X-MS-Blob-Type": "BlockBlob"})
    with store_gateway(data_dir, azurite, resource) as (gw, http, _):
        job = prepare_text(gw, "notes", CHANGED)
        assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
        assert "X-MS-Blob-Type" in http.sent[0][2]
    assert stored(azurite, name)[1] == CHANGED.encode()
