"""webdav_text with ``create: true`` (docs/collections.md) on real servers: a document that does
not exist yet is created with ``PUT`` + ``If-None-Match: *`` and its undo is a ``DELETE``
with ``If-Match``, offered only once the endpoint check verified it on a test copy and a
reviewer accepted it.

- Apache mod_dav with ``FileETag Digest``: the check verifies the undo of a create (a
  stale-tag ``DELETE`` is refused with 412); create and undo run end to end.
- Apache with its default ETags: a tag is weak for a second after a write, so the endpoint
  check fails before the create probes run: nothing is verified, creates stay
  irreversible.
- WsgiDAV 4.x: see the last but one test.
- Apache behind a proxy that drops ``If-None-Match``: a create replaces the document
  that exists, and the check fails (the gateway's creates rely on it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.errors import IrreversibleNotAcknowledged
from undogate.jobs import JobState, Operation
from undogate.operations.context import Context
from undogate.operations.endpoint_check import check_endpoint
from undogate.operations.undo_offer import accept_verified_undo
from undogate.testing import FaultProxy
from undogate.testing.proxy import Seen

from .davservers import (
    DavServer,
    apache_binary,
    apache_server,
    dav_gateway,
    prepare_text,
    run,
    text_resource,
    wsgidav_server,
)
from .worlds import OWNER

NEW = "Created by the agent.\n"


def _resources(dav: DavServer) -> list[dict[str, Any]]:
    dav.seed("copy.md", b"The test copy.\n")
    return [
        {**text_resource("notes", dav.url("new.md")), "create": True},
        {**text_resource("notes-copy", dav.url("copy.md")), "create": True,
         "test_copy_of": "notes"},
    ]  # fmt: skip


needs_apache = pytest.mark.skipif(
    apache_binary() is None,
    reason="apache2 with mod_dav is not installed: run `bash scripts/system-deps.sh` (as root)",
)


@pytest.fixture(scope="module")
def apache_digest() -> Iterator[DavServer]:
    with apache_server("Digest") as srv:
        yield srv


@needs_apache
def test_apache_digest_creates_and_undoes_only_once_verified(
    apache_digest: DavServer, data_dir: Path
) -> None:
    dav = apache_digest
    with dav_gateway(data_dir, *_resources(dav)) as (gw, _):
        job = prepare_text(gw, "notes", NEW)
        assert job.changes[0].before is not None and job.changes[0].target is None
        preview = gw.preview(OWNER, job.id, Operation.APPLY)
        assert preview.needs_acknowledgement and preview.token
        with pytest.raises(IrreversibleNotAcknowledged):
            gw.confirm(OWNER, job.id, preview.token)
        assert dav.get("new.md").status_code == 404  # nothing written
        result = check_endpoint(Context(gw.config, gw.ledger, gw.http, environ={}), "notes-copy")
        steps = {s.name: s for s in result.steps}
        assert result.passed and result.undos == ("undo_of_create",), result.steps
        assert steps["stale_delete_refused"].evidence == {"status": 412, "unchanged": True}
        assert sorted(p.name for p in dav.root.iterdir()) == ["copy.md"]  # no probe left
        accept_verified_undo(gw, OWNER, "notes")
        done = run(gw, job.id, Operation.APPLY)
        assert done.state is JobState.APPLIED
        assert done.actions[-1].method == "PUT" and dav.disk("new.md") == NEW.encode()
        undone = run(gw, job.id, Operation.UNDO)
        assert undone.state is JobState.UNDONE and undone.actions[-1].method == "DELETE"
        assert not (dav.root / "new.md").exists()


@needs_apache
def test_apache_digest_refuses_the_undo_of_a_create_edited_since(
    apache_digest: DavServer, data_dir: Path
) -> None:
    dav = apache_digest
    with dav_gateway(data_dir, *_resources(dav)) as (gw, _):
        assert check_endpoint(
            Context(gw.config, gw.ledger, gw.http, environ={}), "notes-copy"
        ).passed
        accept_verified_undo(gw, OWNER, "notes")
        job = prepare_text(gw, "notes", NEW)
        run(gw, job.id, Operation.APPLY)
        dav.put("new.md", b"Someone else's text.\n", "text/markdown")
        preview = gw.preview(OWNER, job.id, Operation.UNDO)
        assert preview.token is None and preview.blockers[0]["code"] == "conflict"
        assert dav.disk("new.md") == b"Someone else's text.\n"
        (dav.root / "new.md").unlink()


@needs_apache
def test_apache_default_etags_verify_no_create_undo(data_dir: Path) -> None:
    with apache_server() as dav, dav_gateway(data_dir, *_resources(dav)) as (gw, _):
        dav.wait_strong_etag("copy.md", timeout_s=3)
        result = check_endpoint(Context(gw.config, gw.ledger, gw.http, environ={}), "notes-copy")
        # The endpoint check fails already (a read-back right after a write sees a weak tag),
        # so the create probes never run: creates stay irreversible.
        assert not result.passed and result.undos == ()
        assert "probe_document_created" not in {s.name for s in result.steps}
        assert sorted(p.name for p in dav.root.iterdir()) == ["copy.md"]


def test_wsgidav_check_of_a_document_create(tmp_path: Path, data_dir: Path) -> None:
    """WsgiDAV 4.x fails the endpoint check already (a weak If-Match matches), so the create
    probes never run there and nothing is verified."""
    root = tmp_path / "dav"
    root.mkdir()
    with wsgidav_server(root) as dav, dav_gateway(data_dir, *_resources(dav)) as (gw, _):
        result = check_endpoint(Context(gw.config, gw.ledger, gw.http, environ={}), "notes-copy")
        assert not result.passed and result.undos == ()
        assert "probe_document_created" not in {s.name for s in result.steps}
        assert sorted(p.name for p in root.iterdir()) == ["copy.md"]


class DropsIfNoneMatch(FaultProxy):
    """In front of Apache, forwards every request without its ``If-None-Match``: an
    endpoint whose creates replace whatever exists."""

    def _forward(self, seen: Seen) -> Any:
        kept = {k: v for k, v in seen.headers.items() if k.lower() != "if-none-match"}
        return super()._forward(dataclasses.replace(seen, headers=kept))


@needs_apache
def test_an_endpoint_whose_create_replaces_what_exists_fails_the_check(
    apache_digest: DavServer, data_dir: Path
) -> None:
    dav = apache_digest
    proxy = DropsIfNoneMatch(dav.url("")).start()
    try:
        resources = [{**r, "url": proxy.url(r["url"])} for r in _resources(dav)]
        with dav_gateway(data_dir, *resources) as (gw, _):
            result = check_endpoint(
                Context(gw.config, gw.ledger, gw.http, environ={}), "notes-copy"
            )
    finally:
        proxy.stop()
    steps = {s.name: s for s in result.steps}
    assert not result.passed and result.undos == ()
    overwritten = steps["existing_not_overwritten"]
    assert not overwritten.passed and "REPLACED" in overwritten.summary
    assert overwritten.evidence == {"status": 204, "unchanged": False}
    assert steps["remove_probe_document"].passed  # the check's own probe, deleted again
    assert sorted(p.name for p in dav.root.iterdir()) == ["copy.md"]
