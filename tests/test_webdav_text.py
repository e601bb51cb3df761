"""webdav_text end to end against the real contract server, mixed jobs, and the line diff."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.adapters import WebDavTextAdapter, adapter_for
from undogate.adapters.webdav_text import is_text_media_type
from undogate.contract_server import ContractServer
from undogate.diffs import NO_NEWLINE_MARK, diff_hunks, diff_stats, split_lines, unified_diff
from undogate.errors import InvalidRequest, RemoteContractBreach
from undogate.jobs import (
    ActionStatus,
    ChangeRequest,
    ChangeState,
    JobState,
    Operation,
    PrepareRequest,
)

from .davservers import HookedHTTP, dav_gateway, last_action, prepare_text, run
from .worlds import AGENT, OWNER, LocalGateway, resource

NOTES = "/docs/notes.md"
PLAIN = "/docs/plain.txt"
NEW_NOTES = "# Account notes\n\n- Ada prefers email before noon.\n- Renewal moved to **April**.\n"


def text_res(server: ContractServer, rid: str, path: str) -> dict[str, Any]:
    return resource(server, rid, path, kind="webdav_text")


@pytest.fixture
def gw(server: ContractServer, data_dir: Path) -> Iterator[tuple[LocalGateway, HookedHTTP]]:
    with dav_gateway(
        data_dir,
        text_res(server, "notes", NOTES),
        text_res(server, "plain", PLAIN),
        resource(server, "customer", "/records/customer-123"),
    ) as pair:
        yield pair


# -- media types ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("text/plain", True),
        ("text/markdown", True),
        ("TEXT/Markdown", True),
        ("text/plain; charset=utf-8", True),
        ("text/plain;charset=UTF-8", True),
        ("text/plain; CHARSET=utf-8", True),
        ('text/plain; charset="utf-8"', True),
        ("text/plain; charset=utf8", False),
        ("text/plain; charset=iso-8859-1", False),
        ("text/plain; charset=utf-8; charset=utf-8", False),
        ("text/plain; charset=utf-8; format=flowed", False),
        ("text/plain; charset", False),
        ("text/html", False),
        ("application/json", False),
        ("", False),
    ],
)
def test_text_media_types(value: str, ok: bool) -> None:
    assert is_text_media_type(value) is ok


# -- prepare -------------------------------------------------------------------------


def test_prepare_records_both_texts_and_the_exact_media_type(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    job = prepare_text(gateway, "notes", NEW_NOTES)
    change = job.changes[0]
    assert change.kind == WebDavTextAdapter.kind
    assert change.fields == ()
    assert change.before == {"text": server.get_text(NOTES), "media_type": "text/markdown"}
    assert change.after == {"text": NEW_NOTES, "media_type": "text/markdown"}
    assert change.media_type == server.media_type(NOTES) == "text/markdown"
    assert change.prepared_etag == server.etag(NOTES)
    assert server.write_count(NOTES) == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (ChangeRequest(resource_id="notes", set={"status": "x"}), "whole new text"),
        (ChangeRequest(resource_id="notes", remove=("status",)), "whole new text"),
        (ChangeRequest(resource_id="notes"), "needs the whole new text"),
        (ChangeRequest(resource_id="notes", text="x" * (64 * 1024 + 1)), "limit"),
        (ChangeRequest(resource_id="customer", text="hello"), "use set/remove"),
    ],
)
def test_prepare_refuses_bad_text_changes(
    gw: tuple[LocalGateway, HookedHTTP], change: ChangeRequest, message: str
) -> None:
    gateway, _ = gw
    with pytest.raises(InvalidRequest, match=message):
        gateway.prepare(AGENT, "account-assistant", PrepareRequest("s", (change,)))


def test_plan_refuses_lone_surrogates(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    res = gateway.config.resource("notes")
    assert res is not None
    adapter = adapter_for(res.kind)
    snap = gateway.wire.read(res)
    request = ChangeRequest(resource_id="notes", text="bad \ud800")
    with pytest.raises(InvalidRequest, match="not valid Unicode"):
        adapter.plan(res, request, snap, gateway.config.limits)


def test_prepare_refuses_a_no_op(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    with pytest.raises(InvalidRequest, match="no-op"):
        prepare_text(gateway, "plain", server.get_text(PLAIN))


def test_exactly_the_limit_is_accepted(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    text = "é" * (32 * 1024)  # 64 KiB of UTF-8 exactly
    after = prepare_text(gateway, "plain", text).changes[0].after
    assert isinstance(after, dict) and after["text"] == text


@pytest.mark.parametrize(
    ("body", "media_type", "reason"),
    [
        (b"caf\xe9\n", "text/plain", "not valid UTF-8"),
        (b"<p>hi</p>", "text/html", "media type"),
        (b"hi", "text/plain; charset=iso-8859-1", "media type"),
        (b"x" * (64 * 1024 + 1), "text/plain", "limit"),
    ],
)
def test_prepare_refuses_documents_that_break_the_contract(
    gw: tuple[LocalGateway, HookedHTTP],
    server: ContractServer,
    body: bytes,
    media_type: str,
    reason: str,
) -> None:
    gateway, _ = gw
    server.set_text(PLAIN, body, media_type=media_type)
    with pytest.raises(RemoteContractBreach, match=reason):
        prepare_text(gateway, "plain", "anything\n")


@pytest.mark.parametrize("fault", ["weak_etag", "no_etag"])
def test_prepare_refuses_weak_or_missing_etags(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer, fault: str
) -> None:
    gateway, _ = gw
    server.arm(fault, PLAIN)
    with pytest.raises(RemoteContractBreach, match="ETag"):
        prepare_text(gateway, "plain", "anything\n")


def test_charset_utf8_is_accepted_and_sent_back_verbatim(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, http = gw
    server.set_text(PLAIN, "before\n", media_type="text/plain;Charset=UTF-8")
    job = prepare_text(gateway, "plain", "after\n")
    assert job.changes[0].media_type == "text/plain;Charset=UTF-8"
    assert run(gateway, job.id, Operation.APPLY).state is JobState.APPLIED
    method, _, headers, body = http.sent[-1]
    assert (method, headers["Content-Type"], body) == (
        "PUT",
        "text/plain;Charset=UTF-8",
        b"after\n",
    )
    assert server.media_type(PLAIN) == "text/plain;Charset=UTF-8"


# -- apply, read-back, undo -----------------------------------------------------------


def test_apply_then_undo_restores_the_exact_bytes(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, http = gw
    start = server.raw_bytes(NOTES)
    start_etag = server.etag(NOTES)
    job = prepare_text(gateway, "notes", NEW_NOTES)
    applied = run(gateway, job.id, Operation.APPLY)
    assert applied.state is JobState.APPLIED
    method, url, headers, body = http.sent[-1]
    assert (method, url, body) == ("PUT", server.url(NOTES), NEW_NOTES.encode())
    assert headers["If-Match"] == start_etag
    assert headers["Content-Type"] == "text/markdown"
    assert server.raw_bytes(NOTES) == NEW_NOTES.encode()
    assert applied.changes[0].applied_etag == server.etag(NOTES) != start_etag
    assert last_action(applied).status is ActionStatus.DONE
    undone = run(gateway, job.id, Operation.UNDO)
    assert undone.state is JobState.UNDONE
    assert http.sent[-1][2]["If-Match"] == applied.changes[0].applied_etag
    assert server.raw_bytes(NOTES) == start
    assert server.media_type(NOTES) == "text/markdown"
    assert server.write_count(NOTES) == 2


def test_bytes_survive_exactly_crlf_bom_and_no_final_newline(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    start = "\ufeffline one\r\nline two\r\nno newline at the end"
    server.set_text(PLAIN, start)
    job = prepare_text(gateway, "plain", start.replace("two", "2") + "\n")
    run(gateway, job.id, Operation.APPLY)
    assert server.raw_bytes(PLAIN) == (start.replace("two", "2") + "\n").encode()
    run(gateway, job.id, Operation.UNDO)
    assert server.raw_bytes(PLAIN) == start.encode()


def test_outside_edit_after_apply_blocks_undo_as_conflict(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    job = prepare_text(gateway, "notes", NEW_NOTES)
    run(gateway, job.id, Operation.APPLY)
    token = gateway.preview(OWNER, job.id, Operation.UNDO).token
    assert token
    server.set_text(NOTES, NEW_NOTES + "- a colleague's line\n", media_type="text/markdown")
    writes = server.write_count(NOTES)
    preview = gateway.preview(OWNER, job.id, Operation.UNDO)
    assert preview.token is None
    assert [b["code"] for b in preview.blockers] == ["conflict"]
    assert preview.changes[0].reversible is False
    # The older token fails too, before anything is sent.
    with pytest.raises(Exception, match="changed since the preview"):
        gateway.confirm(OWNER, job.id, token)
    assert server.write_count(NOTES) == writes
    assert server.get_text(NOTES).endswith("- a colleague's line\n")


def test_identical_bytes_under_a_new_etag_is_a_conflict(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    job = prepare_text(gateway, "notes", NEW_NOTES)
    run(gateway, job.id, Operation.APPLY)
    server.touch(NOTES)  # someone rewrote the same bytes
    preview = gateway.preview(OWNER, job.id, Operation.UNDO)
    assert preview.token is None
    assert preview.blockers[0]["code"] == "conflict"
    assert server.get_text(NOTES) == NEW_NOTES


def test_media_type_change_after_apply_is_a_conflict(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    job = prepare_text(gateway, "plain", "new plain\n")
    run(gateway, job.id, Operation.APPLY)
    server.set_text(PLAIN, "new plain\n", media_type="text/markdown")
    assert gateway.preview(OWNER, job.id, Operation.UNDO).blockers[0]["code"] == "conflict"


def test_outside_edit_between_last_read_and_put_is_refused_by_if_match(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, http = gw
    job = prepare_text(gateway, "notes", NEW_NOTES)
    outside = "# Someone else's notes\n"
    http.before_write.append(lambda: server.set_text(NOTES, outside, "text/markdown"))
    done = run(gateway, job.id, Operation.APPLY)
    assert done.state is JobState.PREPARED
    action = last_action(done)
    assert (action.status, action.response_status) == (ActionStatus.REFUSED, 412)
    assert server.get_text(NOTES) == outside
    assert server.write_count(NOTES) == 0


def test_undo_guard_rechecked_at_confirm(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    job = prepare_text(gateway, "plain", "v2\n")
    run(gateway, job.id, Operation.APPLY)
    preview = gateway.preview(OWNER, job.id, Operation.UNDO)
    assert preview.token
    # A preview then confirm against a document that changed: nothing written.
    server.set_text(PLAIN, "v3\n")
    with pytest.raises(Exception, match="changed since the preview"):
        gateway.confirm(OWNER, job.id, preview.token)
    assert server.get_text(PLAIN) == "v3\n"


@pytest.mark.parametrize(
    ("fault", "detail"),
    [
        ("ok_without_apply", "old version"),
        ("apply_then_500", "HTTP 500"),
        ("status:201", "old version"),  # a success for a PUT: the read-back decides
        ("status:202", "HTTP 202"),  # not a PUT's
    ],
)
def test_uncertain_write_outcomes(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer, fault: str, detail: str
) -> None:
    gateway, _ = gw
    job = prepare_text(gateway, "plain", "changed\n")
    server.arm(fault, PLAIN)
    done = run(gateway, job.id, Operation.APPLY)
    assert done.state is JobState.NEEDS_REVIEW
    assert done.changes[0].state is ChangeState.UNCERTAIN
    action = last_action(done)
    assert action.status is ActionStatus.UNCERTAIN
    assert detail in (action.detail or "")


def test_weak_etag_on_read_back_is_uncertain(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, http = gw
    job = prepare_text(gateway, "plain", "changed\n")
    http.before_write.append(lambda: server.arm("weak_etag", PLAIN))
    done = run(gateway, job.id, Operation.APPLY)
    assert done.state is JobState.NEEDS_REVIEW
    assert "weak ETag" in (last_action(done).detail or "")
    # The reviewer reads again and accepts what is there.
    accepted = run(gateway, job.id, Operation.ACCEPT_OBSERVED)
    assert accepted.state is JobState.APPLIED
    assert accepted.changes[0].applied_etag == server.etag(PLAIN)


def test_read_back_with_a_different_media_type_is_uncertain(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, http = gw
    job = prepare_text(gateway, "plain", "changed\n")
    http.after_write.append(
        lambda: server.set_text(PLAIN, "changed\n", "text/plain; charset=utf-8")
    )
    done = run(gateway, job.id, Operation.APPLY)
    assert done.state is JobState.NEEDS_REVIEW
    assert "read-back" in (last_action(done).detail or "")


def test_identical_bytes_written_by_someone_else_before_the_read_back_are_not_ours(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, http = gw
    job = prepare_text(gateway, "plain", "changed\n")
    # Between our PUT and our read-back, another writer puts the very same bytes: the
    # read-back would look right, but its version is theirs, not ours.
    http.after_write.append(lambda: server.set_text(PLAIN, "changed\n", "text/plain"))
    done = run(gateway, job.id, Operation.APPLY)
    assert done.state is JobState.NEEDS_REVIEW
    assert "different version than the write answered" in (last_action(done).detail or "")
    assert done.changes[0].applied_etag is None


def test_a_text_document_is_quarantined_whole(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    first = prepare_text(gateway, "plain", "one\n")
    server.arm("apply_then_drop", PLAIN)
    assert run(gateway, first.id, Operation.APPLY).state is JobState.NEEDS_REVIEW
    second = prepare_text(gateway, "plain", "two\n")
    with pytest.raises(Exception, match="quarantined"):
        gateway.preview(OWNER, second.id, Operation.APPLY)


def test_dry_run_shows_the_exact_put(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    job = prepare_text(gateway, "plain", "dry\n")
    token = gateway.preview(OWNER, job.id, Operation.APPLY).token
    assert token
    dry = gateway.confirm(OWNER, job.id, token, dry_run=True)
    assert dry.requests == (
        {
            "method": "PUT",
            "url": server.url(PLAIN),
            "headers": {"Content-Type": "text/plain", "If-Match": server.etag(PLAIN)},
            "body": "dry\n",
            "authentication": None,  # the resource has no credential
        },
    )
    assert server.write_count(PLAIN) == 0


def test_later_job_must_be_undone_first_and_then_the_earlier_one_conflicts(
    gw: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = gw
    first = prepare_text(gateway, "plain", "first\n")
    run(gateway, first.id, Operation.APPLY)
    second = prepare_text(gateway, "plain", "second\n")
    run(gateway, second.id, Operation.APPLY)
    with pytest.raises(Exception, match="undo it first"):
        gateway.preview(OWNER, first.id, Operation.UNDO)
    run(gateway, second.id, Operation.UNDO)
    # The bytes are first's after-text again, but under a new ETag: text is strict, so
    # the first job's undo is a conflict and needs a new reviewed change.
    assert server.get_text(PLAIN) == "first\n"
    preview = gateway.preview(OWNER, first.id, Operation.UNDO)
    assert [b["code"] for b in preview.blockers] == ["conflict"]


# -- mixed jobs -----------------------------------------------------------------------

MIXED = [
    ("customer", "/records/customer-123", "record"),
    ("notes", NOTES, "text"),
    ("wrapped", "/records/wrapped-7", "record"),
    ("plain", PLAIN, "text"),
    ("extra-a", "/records/extra-a", "record"),
    ("guide", "/docs/guide.md", "text"),
    ("extra-b", "/records/extra-b", "record"),
    ("todo", "/docs/todo.txt", "text"),
]


@pytest.fixture
def mixed(server: ContractServer, data_dir: Path) -> Iterator[tuple[LocalGateway, HookedHTTP]]:
    server.set_record("/records/extra-a", {"status": "new", "owner": "lee"})
    server.set_record("/records/extra-b", {"status": "new", "owner": "max"})
    server.set_text("/docs/guide.md", "# Guide\n\nStep one.\n", media_type="text/markdown")
    server.set_text("/docs/todo.txt", "- call Ada\n")
    entries = []
    for rid, path, kind in MIXED:
        if kind == "text":
            entries.append(text_res(server, rid, path))
        else:
            extra = {"record_pointer": "/data"} if rid == "wrapped" else {}
            entries.append(resource(server, rid, path, **extra))
    with dav_gateway(data_dir, *entries) as pair:
        yield pair


def mixed_request() -> PrepareRequest:
    changes = []
    for rid, _, kind in MIXED:
        if kind == "text":
            changes.append(ChangeRequest(resource_id=rid, text=f"rewritten {rid}\n"))
        else:
            changes.append(ChangeRequest(resource_id=rid, set={"status": f"done-{rid}"}))
    return PrepareRequest(summary="Close out the account", changes=tuple(changes))


def snapshot(server: ContractServer) -> dict[str, bytes]:
    return {path: server.raw_bytes(path) for _, path, _ in MIXED}


def test_mixed_job_of_eight_applies_in_order_and_undoes_in_reverse(
    mixed: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, http = mixed
    start = snapshot(server)
    job = gateway.prepare(AGENT, "account-assistant", mixed_request()).job
    assert len(job.changes) == 8
    applied = run(gateway, job.id, Operation.APPLY)
    assert applied.state is JobState.APPLIED
    apply_order = [(a.operation, a.change_index) for a in applied.actions]
    assert apply_order == [(Operation.APPLY, i) for i in range(8)]
    assert [m for m, *_ in http.sent] == ["PATCH", "PUT"] * 4
    assert server.get_text("/docs/todo.txt") == "rewritten todo\n"
    wrapped = server.get_record("/records/wrapped-7")["data"]
    assert isinstance(wrapped, dict) and wrapped["status"] == "done-wrapped"
    undone = run(gateway, job.id, Operation.UNDO)
    assert undone.state is JobState.UNDONE
    undo_order = [a.change_index for a in undone.actions if a.operation is Operation.UNDO]
    assert undo_order == list(range(7, -1, -1))
    assert snapshot(server) == start


def test_mixed_job_refusal_in_the_middle_stops_the_rest(
    mixed: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = mixed
    start = snapshot(server)
    job = gateway.prepare(AGENT, "account-assistant", mixed_request()).job
    server.arm("status:409", "/records/extra-a")  # change 4
    done = run(gateway, job.id, Operation.APPLY)
    assert done.state is JobState.PARTIALLY_APPLIED
    assert [(a.change_index, a.status) for a in done.actions] == [
        (0, ActionStatus.DONE),
        (1, ActionStatus.DONE),
        (2, ActionStatus.DONE),
        (3, ActionStatus.DONE),
        (4, ActionStatus.REFUSED),
    ]
    assert [c.state for c in done.changes] == [ChangeState.APPLIED] * 4 + [ChangeState.PENDING] * 4
    after = snapshot(server)
    for _, path, _ in MIXED[4:]:
        assert after[path] == start[path], path
    # A fresh preview resumes the pending steps only.
    resumed = run(gateway, job.id, Operation.APPLY)
    assert resumed.state is JobState.APPLIED
    assert [a.change_index for a in resumed.actions[5:]] == [4, 5, 6, 7]


def test_mixed_job_uncertain_in_the_middle_stops_the_rest(
    mixed: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = mixed
    start = snapshot(server)
    job = gateway.prepare(AGENT, "account-assistant", mixed_request()).job
    server.arm("apply_then_500", PLAIN)  # change 3, a document
    done = run(gateway, job.id, Operation.APPLY)
    assert done.state is JobState.NEEDS_REVIEW
    assert [(a.change_index, a.status) for a in done.actions] == [
        (0, ActionStatus.DONE),
        (1, ActionStatus.DONE),
        (2, ActionStatus.DONE),
        (3, ActionStatus.UNCERTAIN),
    ]
    after = snapshot(server)
    assert after[PLAIN] == b"rewritten plain\n"  # it did land; the gateway cannot know
    for _, path, _ in MIXED[4:]:
        assert after[path] == start[path], path


def test_mixed_undo_refused_in_the_middle_stops_the_rest(
    mixed: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = mixed
    start = snapshot(server)
    job = gateway.prepare(AGENT, "account-assistant", mixed_request()).job
    run(gateway, job.id, Operation.APPLY)
    server.arm("status:412", "/docs/guide.md")  # change 5: undone after 7 and 6
    done = run(gateway, job.id, Operation.UNDO)
    assert done.state is JobState.PARTIALLY_UNDONE
    undo = [(a.change_index, a.status) for a in done.actions if a.operation is Operation.UNDO]
    assert undo == [(7, ActionStatus.DONE), (6, ActionStatus.DONE), (5, ActionStatus.REFUSED)]
    after = snapshot(server)
    assert after["/docs/todo.txt"] == start["/docs/todo.txt"]
    assert after["/docs/guide.md"] == b"rewritten guide\n"
    assert after[NOTES] == b"rewritten notes\n"
    finished = run(gateway, job.id, Operation.UNDO)
    assert finished.state is JobState.UNDONE
    assert snapshot(server) == start


def test_mixed_undo_conflict_on_one_document_writes_nothing(
    mixed: tuple[LocalGateway, HookedHTTP], server: ContractServer
) -> None:
    gateway, _ = mixed
    job = gateway.prepare(AGENT, "account-assistant", mixed_request()).job
    run(gateway, job.id, Operation.APPLY)
    token = gateway.preview(OWNER, job.id, Operation.UNDO).token
    assert token
    server.touch("/docs/guide.md")  # same bytes, new ETag: text treats it as a conflict
    counts = server.write_counts()
    with pytest.raises(Exception, match="changed since the preview"):
        gateway.confirm(OWNER, job.id, token)
    preview = gateway.preview(OWNER, job.id, Operation.UNDO)
    assert preview.token is None
    assert [(b["code"], b["change"]) for b in preview.blockers] == [("conflict", 5)]
    assert server.write_counts() == counts
    assert gateway.get_job(OWNER.owner_id, job.id).state is JobState.APPLIED


# -- diffs ----------------------------------------------------------------------------


def test_unified_diff_of_the_seed_notes() -> None:
    before = "# Account notes\n\n- Ada prefers email before noon.\n- Renewal is due in **March**.\n"
    assert unified_diff(before, NEW_NOTES, "notes.md") == (
        "--- a/notes.md\n"
        "+++ b/notes.md\n"
        "@@ -1,4 +1,4 @@\n"
        " # Account notes\n"
        " \n"
        " - Ada prefers email before noon.\n"
        "-- Renewal is due in **March**.\n"
        "+- Renewal moved to **April**.\n"
    )


def test_unified_diff_identical_is_empty() -> None:
    assert unified_diff("same\n", "same\n") == ""
    assert diff_hunks("", "") == []


def test_unified_diff_marks_a_missing_final_newline() -> None:
    out = unified_diff("a\nb", "a\nb\n", "f")
    assert out == f"--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n{NO_NEWLINE_MARK}\n+b\n"


def test_unified_diff_from_and_to_empty() -> None:
    assert unified_diff("", "x\n", "f") == "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+x\n"
    assert unified_diff("x\n", "", "f") == "--- a/f\n+++ b/f\n@@ -1 +0,0 @@\n-x\n"


def test_unified_diff_keeps_context_to_three_lines_and_splits_hunks() -> None:
    before = "".join(f"{i}\n" for i in range(1, 21))
    after = before.replace("2\n", "two\n", 1).replace("18\n", "eighteen\n")
    hunks = diff_hunks(before, after)
    assert [h.header for h in hunks] == ["@@ -1,5 +1,5 @@", "@@ -15,6 +15,6 @@"]
    assert [(ln.op, ln.text, ln.old_number, ln.new_number) for ln in hunks[0].lines[:3]] == [
        (" ", "1", 1, 1),
        ("-", "2", 2, None),
        ("+", "two", None, 2),
    ]
    assert diff_stats(before, after) == (2, 2)


def test_crlf_change_is_visible_and_lines_split_on_newline_only() -> None:
    assert split_lines("a\r\nb\u2028c\n") == ["a\r\n", "b\u2028c\n"]
    out = unified_diff("a\r\nb\n", "a\nb\n", "f")
    assert "-a\r\n+a\n" in out


def test_diff_matches_difflib_for_random_texts() -> None:
    import difflib
    import random

    rng = random.Random(7)
    for _ in range(200):
        before = "".join(rng.choice("abc\n") for _ in range(rng.randrange(0, 30))) + "\n"
        after = "".join(rng.choice("abd\n") for _ in range(rng.randrange(0, 30))) + "\n"
        ours = unified_diff(before, after, "f")
        theirs = "".join(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                "a/f",
                "b/f",
            )
        )
        assert ours == theirs
