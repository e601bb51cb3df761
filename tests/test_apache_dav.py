"""webdav_text against a real Apache httpd with mod_dav/mod_dav_fs (Debian ``apache2``).

Started from a config these tests write (tests/davservers.py), once with Apache's
default ETags and once with ``FileETag Digest``. What Apache 2.4 does (each point a
test below):

- GET answers ``text/plain`` / ``text/markdown`` (from ``AddType``), no charset; PUT
  ignores the request's ``Content-Type``; a PUT answers 204 **without** an ETag.
- Default ETags are ``"<size>-<mtime µs>"`` and **weak** (``W/``) for a second after
  each change. The gateway's read-back right after its own write therefore sees a weak
  ETag and records ``uncertain``; a reviewer reconciles a second later.
- ``FileETag Digest`` gives a strong content digest at once, so apply and undo complete;
  but an identical-bytes rewrite keeps the same ETag and is invisible.
- A stale (or weak) ``If-Match`` is refused with 412 and no effect in both modes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from undogate.errors import RemoteContractBreach
from undogate.jobs import ActionStatus, ChangeState, Job, JobState, Operation

from .davservers import (
    DavServer,
    apache_binary,
    apache_server,
    dav_gateway,
    last_action,
    prepare_text,
    run,
    text_resource,
)
from .worlds import OWNER, LocalGateway

pytestmark = pytest.mark.skipif(
    apache_binary() is None,
    reason="apache2 with mod_dav is not installed: run `bash scripts/system-deps.sh` (as root)",
)

START = "First line.\nSecond line.\n"
AFTER = "Rewritten by the agent.\nWith a second, longer line.\n"


@pytest.fixture(scope="module", params=["default", "digest"])
def apache(request: pytest.FixtureRequest) -> Iterator[DavServer]:
    with apache_server("Digest" if request.param == "digest" else None) as srv:
        yield srv


@pytest.fixture(scope="module")
def apache_default() -> Iterator[DavServer]:
    with apache_server() as srv:
        yield srv


@pytest.fixture(scope="module")
def apache_digest() -> Iterator[DavServer]:
    with apache_server("Digest") as srv:
        yield srv


def fresh_doc(srv: DavServer, request: pytest.FixtureRequest, suffix: str = ".txt") -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name) + suffix
    srv.seed(name, START.encode())
    return name


def settle(gateway: LocalGateway, srv: DavServer, name: str, job: Job, want: JobState) -> Job:
    """Apache's default ETags are weak for a second after a write, so the gateway's
    read-back records ``uncertain``; a reviewer reconciles once the ETag is strong."""
    if job.state is want:
        return job
    assert job.state is JobState.NEEDS_REVIEW
    assert srv.mode == "default", f"{srv.mode} should have completed: {last_action(job).detail}"
    srv.wait_strong_etag(name)
    settled = run(gateway, job.id, Operation.ACCEPT_OBSERVED)
    assert settled.state is want
    return settled


# -- both modes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("suffix", "media_type"), [(".txt", "text/plain"), (".md", "text/markdown")]
)
def test_apache_apply_read_back_undo(
    apache: DavServer,
    data_dir: Path,
    request: pytest.FixtureRequest,
    suffix: str,
    media_type: str,
) -> None:
    name = fresh_doc(apache, request, suffix)
    with dav_gateway(data_dir, text_resource("doc", apache.url(name))) as (gateway, http):
        job = prepare_text(gateway, "doc", AFTER)
        assert job.changes[0].media_type == media_type
        applied = run(gateway, job.id, Operation.APPLY)
        assert http.sent[-1][2]["Content-Type"] == media_type
        assert apache.disk(name) == AFTER.encode()
        applied = settle(gateway, apache, name, applied, JobState.APPLIED)
        assert applied.changes[0].applied_etag == apache.get(name).headers["etag"]
        undone = run(gateway, job.id, Operation.UNDO)
        assert apache.disk(name) == START.encode()
        undone = settle(gateway, apache, name, undone, JobState.UNDONE)
        assert [c.state for c in undone.changes] == [ChangeState.UNDONE]


def test_apache_outside_edit_between_apply_and_undo_is_conflict(
    apache: DavServer, data_dir: Path, request: pytest.FixtureRequest
) -> None:
    name = fresh_doc(apache, request)
    with dav_gateway(data_dir, text_resource("doc", apache.url(name))) as (gateway, _):
        job = prepare_text(gateway, "doc", AFTER)
        settle(gateway, apache, name, run(gateway, job.id, Operation.APPLY), JobState.APPLIED)
        outside = b"A colleague rewrote this meanwhile.\n"
        assert apache.put(name, outside).status_code == 204
        apache.wait_strong_etag(name)
        preview = gateway.preview(OWNER, job.id, Operation.UNDO)
        assert preview.token is None
        assert [b["code"] for b in preview.blockers] == ["conflict"]
        assert apache.disk(name) == outside


def test_apache_stale_if_match_is_refused_with_nothing_changed(
    apache: DavServer, data_dir: Path, request: pytest.FixtureRequest
) -> None:
    name = fresh_doc(apache, request)
    outside = b"An outside edit between the last read and the PUT.\n"
    with dav_gateway(data_dir, text_resource("doc", apache.url(name))) as (gateway, http):
        job = prepare_text(gateway, "doc", AFTER)
        http.before_write.append(lambda: apache.put(name, outside).raise_for_status())
        done = run(gateway, job.id, Operation.APPLY)
        assert done.state is JobState.PREPARED
        action = last_action(done)
        assert (action.status, action.response_status) == (ActionStatus.REFUSED, 412)
        assert apache.disk(name) == outside


def test_apache_put_answers_204_without_an_etag(
    apache: DavServer, request: pytest.FixtureRequest
) -> None:
    name = fresh_doc(apache, request)
    etag = apache.get(name).headers["etag"]
    response = httpx.put(
        apache.url(name),
        content=AFTER.encode(),
        headers={"Content-Type": "text/plain", "If-Match": etag},
        trust_env=False,
    )
    assert response.status_code == 204
    assert "etag" not in response.headers
    assert apache.disk(name) == AFTER.encode()


def test_apache_weak_if_match_is_refused(apache: DavServer, request: pytest.FixtureRequest) -> None:
    name = fresh_doc(apache, request)
    etag = apache.get(name).headers["etag"]
    response = httpx.put(
        apache.url(name),
        content=b"x\n",
        headers={"Content-Type": "text/plain", "If-Match": "W/" + etag},
        trust_env=False,
    )
    assert response.status_code == 412
    assert apache.disk(name) == START.encode()


# -- default ETags ---------------------------------------------------------------------------


def test_apache_default_write_is_uncertain_until_a_reviewer_reconciles(
    apache_default: DavServer, data_dir: Path, request: pytest.FixtureRequest
) -> None:
    name = fresh_doc(apache_default, request)
    with dav_gateway(data_dir, text_resource("doc", apache_default.url(name))) as (gateway, _):
        job = prepare_text(gateway, "doc", AFTER)
        done = run(gateway, job.id, Operation.APPLY)
        assert done.state is JobState.NEEDS_REVIEW
        action = last_action(done)
        assert action.status is ActionStatus.UNCERTAIN
        assert "weak ETag" in (action.detail or "")
        assert apache_default.get(name).headers["etag"].startswith("W/")
        apache_default.wait_strong_etag(name)
        # Until a reviewer decides, the document is quarantined against other jobs.
        other = prepare_text(gateway, "doc", "another job\n")
        with pytest.raises(Exception, match="quarantined"):
            gateway.preview(OWNER, other.id, Operation.APPLY)
        preview = gateway.preview(OWNER, job.id, Operation.ACCEPT_OBSERVED)
        assert preview.changes[0].observation is not None
        assert preview.changes[0].observation.value == "looks_applied"


def test_apache_default_refuses_to_read_a_document_changed_within_a_second(
    apache_default: DavServer, data_dir: Path, request: pytest.FixtureRequest
) -> None:
    name = fresh_doc(apache_default, request)
    assert apache_default.put(name, b"just written\n").status_code == 204
    with (
        dav_gateway(data_dir, text_resource("doc", apache_default.url(name))) as (gateway, _),
        pytest.raises(RemoteContractBreach, match="weak ETag"),
    ):
        prepare_text(gateway, "doc", AFTER)


def test_apache_default_identical_bytes_rewrite_is_a_conflict(
    apache_default: DavServer, data_dir: Path, request: pytest.FixtureRequest
) -> None:
    name = fresh_doc(apache_default, request)
    with dav_gateway(data_dir, text_resource("doc", apache_default.url(name))) as (gateway, _):
        job = prepare_text(gateway, "doc", AFTER)
        run(gateway, job.id, Operation.APPLY)
        settle(gateway, apache_default, name, gateway.get_job(OWNER.owner_id, job.id),
               JobState.APPLIED)  # fmt: skip
        assert apache_default.put(name, AFTER.encode()).status_code == 204
        apache_default.wait_strong_etag(name)
        preview = gateway.preview(OWNER, job.id, Operation.UNDO)
        assert [b["code"] for b in preview.blockers] == ["conflict"]


# -- FileETag Digest ----------------------------------------------------------------------------


def test_apache_digest_completes_without_review(
    apache_digest: DavServer, data_dir: Path, request: pytest.FixtureRequest
) -> None:
    name = fresh_doc(apache_digest, request)
    with dav_gateway(data_dir, text_resource("doc", apache_digest.url(name))) as (gateway, _):
        job = prepare_text(gateway, "doc", AFTER)
        assert run(gateway, job.id, Operation.APPLY).state is JobState.APPLIED
        assert run(gateway, job.id, Operation.UNDO).state is JobState.UNDONE
        assert apache_digest.disk(name) == START.encode()


def test_apache_digest_identical_bytes_rewrite_is_invisible(
    apache_digest: DavServer, data_dir: Path, request: pytest.FixtureRequest
) -> None:
    """A content digest cannot tell an identical rewrite from nothing: the text rule
    "same bytes, new ETag is a conflict" cannot fire, and the undo goes ahead (it loses
    nothing: the bytes it replaces are exactly the ones the apply wrote)."""
    name = fresh_doc(apache_digest, request)
    with dav_gateway(data_dir, text_resource("doc", apache_digest.url(name))) as (gateway, _):
        job = prepare_text(gateway, "doc", AFTER)
        applied = run(gateway, job.id, Operation.APPLY)
        etag = applied.changes[0].applied_etag
        assert apache_digest.put(name, AFTER.encode()).status_code == 204
        assert apache_digest.get(name).headers["etag"] == etag
        assert run(gateway, job.id, Operation.UNDO).state is JobState.UNDONE
        assert apache_digest.disk(name) == START.encode()


# -- media type configuration ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("charset", "accepted"),
    [("UTF-8", True), ("ISO-8859-1", False)],
)
def test_apache_add_default_charset(
    data_dir: Path, request: pytest.FixtureRequest, charset: str, accepted: bool
) -> None:
    with apache_server("Digest", extra=f"AddDefaultCharset {charset}") as srv:
        name = fresh_doc(srv, request)
        assert srv.get(name).headers["content-type"] == f"text/plain; charset={charset}"
        with dav_gateway(data_dir, text_resource("doc", srv.url(name))) as (gateway, http):
            if not accepted:
                with pytest.raises(RemoteContractBreach, match="media type"):
                    prepare_text(gateway, "doc", AFTER)
                return
            job = prepare_text(gateway, "doc", AFTER)
            assert run(gateway, job.id, Operation.APPLY).state is JobState.APPLIED
            assert http.sent[-1][2]["Content-Type"] == f"text/plain; charset={charset}"
