"""webdav_text against a real WsgiDAV (cheroot) serving a temporary folder.

What WsgiDAV 4.x does (observed here, each point a test below):

- GET answers a strong ETag ``"<inode>-<mtime seconds>-<size>"`` and the media type
  guessed from the file name *with* ``; charset=utf-8`` appended; a PUT's
  ``Content-Type`` is ignored.
- A conditional PUT answers 204 with the new ETag; a stale ``If-Match`` answers 412 and
  changes nothing.
- The ETag has one-second resolution: a same-size write within the same second keeps
  the old ETag. The gateway's read-back then sees "no new version" and records
  ``uncertain``; worse, an outside same-size edit in the same second slips past
  ``If-Match`` (a lost update the gateway cannot see).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from undogate.errors import RemoteContractBreach
from undogate.jobs import ActionStatus, JobState, Operation
from undogate.operations.context import Context
from undogate.operations.endpoint_check import check_endpoint

from .davservers import (
    DavServer,
    HookedHTTP,
    dav_gateway,
    last_action,
    prepare_text,
    run,
    text_resource,
    wsgidav_server,
)
from .worlds import OWNER, LocalGateway

START = "First line.\nSecond line.\n"


@pytest.fixture(scope="module")
def dav(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DavServer]:
    with wsgidav_server(tmp_path_factory.mktemp("wsgidav")) as srv:
        yield srv


@pytest.fixture
def doc(dav: DavServer, request: pytest.FixtureRequest) -> str:
    """A fresh document per test, dated a minute ago."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name) + ".txt"
    dav.seed(name, START.encode())
    return name


@pytest.fixture
def gw(dav: DavServer, doc: str, data_dir: Path) -> Iterator[tuple[LocalGateway, HookedHTTP]]:
    with dav_gateway(data_dir, text_resource("doc", dav.url(doc))) as pair:
        yield pair


def same_second_rewrite(dav: DavServer, name: str, data: bytes) -> None:
    """Rewrite a file in place and keep its mtime second: what a second write within the
    same second looks like to WsgiDAV (deterministic, no waiting for a clock tick)."""
    path = dav.root / name
    before = path.stat()
    with path.open("r+b") as fh:
        fh.write(data)
        fh.truncate()
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


# -- the contract, where it holds -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "media_type"),
    [("plain.txt", "text/plain; charset=utf-8"), ("notes.md", "text/markdown; charset=utf-8")],
)
def test_wsgidav_apply_read_back_undo(
    dav: DavServer, data_dir: Path, name: str, media_type: str
) -> None:
    dav.seed(name, START.encode())
    with dav_gateway(data_dir, text_resource("doc", dav.url(name))) as (gateway, http):
        job = prepare_text(gateway, "doc", START + "Third line, added.\n")
        assert job.changes[0].media_type == media_type
        applied = run(gateway, job.id, Operation.APPLY)
        assert applied.state is JobState.APPLIED, last_action(applied).detail
        assert http.sent[-1][2]["Content-Type"] == media_type
        assert dav.disk(name) == (START + "Third line, added.\n").encode()
        assert applied.changes[0].applied_etag == dav.get(name).headers["etag"]
        undone = run(gateway, job.id, Operation.UNDO)
        assert undone.state is JobState.UNDONE, last_action(undone).detail
        assert dav.disk(name) == START.encode()


def test_wsgidav_put_answers_204_with_the_new_etag(dav: DavServer, doc: str) -> None:
    etag = dav.get(doc).headers["etag"]
    response = httpx.put(
        dav.url(doc),
        content=b"longer text than before\n",
        headers={"Content-Type": "text/plain", "If-Match": etag},
        trust_env=False,
    )
    assert response.status_code == 204
    assert response.headers["etag"] == dav.get(doc).headers["etag"] != etag


def test_wsgidav_outside_edit_between_apply_and_undo_is_conflict(
    gw: tuple[LocalGateway, HookedHTTP], dav: DavServer, doc: str
) -> None:
    gateway, _ = gw
    job = prepare_text(gateway, "doc", "Rewritten by the agent.\n")
    assert run(gateway, job.id, Operation.APPLY).state is JobState.APPLIED
    outside = b"A colleague rewrote this meanwhile.\n"
    assert dav.put(doc, outside).status_code == 204
    preview = gateway.preview(OWNER, job.id, Operation.UNDO)
    assert preview.token is None
    assert [b["code"] for b in preview.blockers] == ["conflict"]
    assert dav.disk(doc) == outside


def test_wsgidav_stale_if_match_is_refused_with_nothing_changed(
    gw: tuple[LocalGateway, HookedHTTP], dav: DavServer, doc: str
) -> None:
    gateway, http = gw
    job = prepare_text(gateway, "doc", "Rewritten by the agent.\n")
    outside = b"An outside edit between the last read and the PUT.\n"
    http.before_write.append(lambda: dav.put(doc, outside).raise_for_status())
    done = run(gateway, job.id, Operation.APPLY)
    assert done.state is JobState.PREPARED
    action = last_action(done)
    assert (action.status, action.response_status) == (ActionStatus.REFUSED, 412)
    assert dav.disk(doc) == outside


def test_wsgidav_weak_or_missing_etag_is_never_read(dav: DavServer, doc: str) -> None:
    # WsgiDAV answers a strong ETag on every GET of a file.
    etag = dav.get(doc).headers["etag"]
    assert etag.startswith('"') and not etag.startswith("W/")


# -- where WsgiDAV breaks the contract ----------------------------------------------------------


def test_wsgidav_same_second_write_keeps_the_etag_so_the_gateway_records_uncertain(
    gw: tuple[LocalGateway, HookedHTTP], dav: DavServer, doc: str
) -> None:
    gateway, http = gw
    same_size = START.replace("First", "Frist")
    job = prepare_text(gateway, "doc", same_size)
    old = (dav.root / doc).stat()
    http.after_write.append(lambda: os.utime(dav.root / doc, ns=(old.st_atime_ns, old.st_mtime_ns)))
    done = run(gateway, job.id, Operation.APPLY)
    assert done.state is JobState.NEEDS_REVIEW
    assert "old version" in (last_action(done).detail or "")
    assert dav.disk(doc) == same_size.encode()
    # The reviewer's reconciliation sees the after-text and accepts it.
    accepted = run(gateway, job.id, Operation.ACCEPT_OBSERVED)
    assert accepted.state is JobState.APPLIED


def test_wsgidav_same_size_same_second_edit_is_invisible_to_if_match(
    dav: DavServer, doc: str
) -> None:
    """A lost update no client can prevent: the outside edit keeps the ETag."""
    seen = dav.get(doc).headers["etag"]
    outside = START.replace("Second", "SECOND").encode()
    same_second_rewrite(dav, doc, outside)
    assert dav.get(doc).headers["etag"] == seen
    response = httpx.put(
        dav.url(doc),
        content=b"the stale writer wins\n",
        headers={"Content-Type": "text/plain", "If-Match": seen},
        trust_env=False,
    )
    assert response.status_code == 204
    assert dav.disk(doc) == b"the stale writer wins\n"


def test_wsgidav_identical_bytes_rewritten_later_is_a_conflict(
    gw: tuple[LocalGateway, HookedHTTP], dav: DavServer, doc: str
) -> None:
    gateway, _ = gw
    after = "Rewritten by the agent.\n"
    job = prepare_text(gateway, "doc", after)
    run(gateway, job.id, Operation.APPLY)
    # Someone saves the same bytes a few seconds later: a new mtime, a new ETag.
    path = dav.root / doc
    path.write_bytes(after.encode())
    stamp = path.stat().st_mtime + 5
    os.utime(path, (stamp, stamp))
    preview = gateway.preview(OWNER, job.id, Operation.UNDO)
    assert [b["code"] for b in preview.blockers] == ["conflict"]
    assert dav.disk(doc) == after.encode()


def test_wsgidav_accepts_a_weak_if_match_and_creates_on_if_match(dav: DavServer, doc: str) -> None:
    """Two RFC 9110 departures the gateway never triggers (it sends only strong tags,
    only to existing documents), recorded so nobody relies on them; the endpoint check
    refuses WsgiDAV for them (below)."""
    etag = dav.get(doc).headers["etag"]
    weak = httpx.put(
        dav.url(doc),
        content=b"weak matched\n",
        headers={"Content-Type": "text/plain", "If-Match": "W/" + etag},
        trust_env=False,
    )
    assert weak.status_code == 204
    missing = httpx.put(
        dav.url(doc + ".missing.txt"),
        content=b"created\n",
        headers={"Content-Type": "text/plain", "If-Match": '"nothing"'},
        trust_env=False,
    )
    assert missing.status_code == 201


def test_the_endpoint_check_refuses_wsgidav(dav: DavServer, data_dir: Path) -> None:
    """The endpoint check (docs/remote-contract.md) catches both departures above, with a line each,
    puts the test copy back exactly and deletes the file its probe made."""
    dav.seed("prod-notes.txt", START.encode())
    dav.seed("copy-notes.txt", START.encode())
    files = sorted(p.name for p in dav.root.iterdir())
    copy = {**text_resource("notes-copy", dav.url("copy-notes.txt")), "test_copy_of": "notes"}
    with dav_gateway(data_dir, text_resource("notes", dav.url("prod-notes.txt")), copy) as (
        gateway,
        http,
    ):
        result = check_endpoint(
            Context(gateway.config, gateway.ledger, http, environ={}), "notes-copy"
        )

    assert not result.passed
    assert {s.name: s.passed for s in result.steps} == {
        "production_read": True,
        "strong_etag": True,
        "good_write": True,
        "stale_write_refused": True,
        "weak_if_match_refused": False,
        "missing_not_created": False,
        "undo_restores": True,
        "production_unchanged": True,
    }
    weak, missing = result.steps[4], result.steps[5]
    assert weak.evidence == {"status": 204, "unchanged": False}
    assert missing.evidence == {
        "status": 201,
        "absent_after": False,
        "created": True,
        "deleted": True,
    }
    assert missing.message is not None and "the check deleted it again" in missing.message
    assert dav.disk("copy-notes.txt") == START.encode()
    assert sorted(p.name for p in dav.root.iterdir()) == files


def test_wsgidav_html_or_other_media_types_are_refused(dav: DavServer, data_dir: Path) -> None:
    dav.seed("page.html", b"<p>hi</p>\n")
    with (
        dav_gateway(data_dir, text_resource("doc", dav.url("page.html"))) as (gateway, _),
        pytest.raises(RemoteContractBreach, match="media type"),
    ):
        prepare_text(gateway, "doc", "x\n")
