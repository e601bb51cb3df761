"""The web preview shows every byte a confirm sends (issue 17): the exact requests, as
the CLI shows them, long values folded behind their length, an object field diffed
member by member, a history in sentences and tables, and a favicon. Over HTTP, no
browser (tests/test_web_preview_browser.py looks at it in Chromium)."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from undogate.contract_server import ContractServer
from undogate.net import PinnedClient, RemoteResponse
from undogate.views import request_view

from .test_web import csrf_of, signed_in
from .worlds import DOCUMENT, RECORD, WebWorld, prepare_body, prepare_via_api, web_world

LONG_TIER = " ".join(["platinum-with-priority-support"] * 8)  # 255 characters of words
TAGS = re.compile(r"<[^>]+>")


@pytest.fixture
def world(server: ContractServer, data_dir: Path, open_gateway: Any) -> WebWorld:
    return web_world(server, data_dir, open_gateway)


def text_of(fragment: str) -> str:
    """What a reader sees of an HTML fragment: tags (``<wbr>`` too) gone, entities read."""
    return html.unescape(TAGS.sub("", fragment))


def rich_job(client: TestClient, world: WebWorld) -> str:
    body = prepare_body()
    body["changes"][0]["set"].update(
        {"tier": LONG_TIER, "notes": {"source": "web", "renewal": "March"}}
    )
    body["changes"].append(
        {"resource": "notes", "text": "# Account notes\n\n- Lee owns it\u200b now.\n"}
    )
    return prepare_via_api(client, world.keys["agent"], body)


def open_preview(client: TestClient, job_id: str) -> tuple[str, str]:
    """The preview page's HTML and its token."""
    csrf = csrf_of(client.get(f"/jobs/{job_id}").text)
    shown = client.post(f"/jobs/{job_id}/previews", data={"csrf": csrf, "operation": "apply"})
    assert shown.status_code == 200, shown.text
    token = re.search(r'name="preview_token" value="([^"]+)"', shown.text)
    assert token is not None
    return shown.text, token.group(1)


def requests_section(page: str) -> str:
    found = re.search(r'<section class="card requests".*?</section>', page, re.S)
    assert found is not None, "the preview shows no requests"
    return found.group(0)


def test_the_preview_shows_exactly_the_requests_the_cli_shows(world: WebWorld) -> None:
    with signed_in(world) as client:
        job_id = rich_job(client, world)
        page, token = open_preview(client, job_id)
        dry = client.post(
            f"/api/v1/jobs/{job_id}/confirm",
            json={"preview_token": token, "dry_run": True},
            headers={"Authorization": f"Bearer {world.keys['alice']}"},
        )
        assert dry.status_code == 200, dry.text
        planned = dry.json()["requests"]
    assert [r["method"] for r in planned] == ["PATCH", "PUT"]
    section = requests_section(page)
    items = re.findall(
        r'<li class="request">(.*?)</li>\s*(?=<li class="request">|</ol>)', section, re.S
    )
    assert len(items) == 2
    for item, request in zip(items, planned, strict=True):
        view = request_view(request)  # the API's dry run serves the shared view already
        assert {**view, "body_bytes": int(view["body_bytes"].text)} == request  # type: ignore[union-attr]
        line = re.search(r'<p class="request-line">(.*?)</p>', item, re.S)
        assert line is not None
        assert text_of(line.group(1)) == f"{request['method']} {request['url']}"
        headers = dict(
            (text_of(n), text_of(v))
            for n, v in re.findall(r"<tr><th scope=\"row\">(.*?)</th><td>(.*?)</td></tr>", item)
        )
        assert headers == request["headers"]
        assert headers["If-Match"].startswith('"')
        lines = [text_of(x) for x in re.findall(r'<div class="body-line">(.*?)</div>', item, re.S)]
        shown_lines = [ln.replace("invisible character U+200B", "\u200b") for ln in lines]
        assert shown_lines == view["body_lines"]
        assert "\n".join(shown_lines) + "\n" == request["body"] or (
            "\n".join(shown_lines) == request["body"]
        )
        assert f"Body: {request['body_bytes']} bytes" in text_of(item)
    patch, put = planned
    assert patch["headers"]["Content-Type"] == "application/json-patch+json"
    assert LONG_TIER in patch["body"]  # the exact body carries the whole value
    assert put["body"] == "# Account notes\n\n- Lee owns it\u200b now.\n"
    marker = '<span class="inv"><span class="sr">invisible character </span>U+200B</span>'
    assert marker in section and "\u200b" not in section  # invisibles marked
    assert section.count("No credential is added.") == len(planned)  # none configured
    assert "Authorization" not in section


def test_long_values_fold_behind_their_length_and_objects_diff_member_by_member(
    world: WebWorld,
) -> None:
    with signed_in(world) as client:
        job_id = rich_job(client, world)
        page, _ = open_preview(client, job_id)
        job_page = client.get(f"/jobs/{job_id}").text
    for shown in (page, job_page):
        folded = re.search(r'<details class="long">(.*?)</details>', shown, re.S)
        assert folded is not None
        shown_summary = re.search(r"<summary>(.*?)</summary>", folded.group(1), re.S)
        assert shown_summary is not None
        summary = text_of(shown_summary[1])
        assert f"{len(LONG_TIER) + 2} characters: show all" in summary  # + its quotes
        assert LONG_TIER not in summary
        assert f'"{LONG_TIER}"' in text_of(folded.group(1))  # all of it, when opened
        members = re.search(r'<table class="members stack">(.*?)</table>', shown, re.S)
        assert members is not None
        rows = re.findall(r'<tr class="(changed|same)">(.*?)</tr>', members.group(1), re.S)
        assert [(kind, text_of(row).split()[0]) for kind, row in rows] == [
            ("same", "source"),
            ("changed", "renewal"),
        ]
        assert "(absent)" in text_of(rows[1][1])
    # Values wrap only after punctuation: the markup offers no break inside a word.
    assert "plat<wbr>" not in page and "123456789<wbr>" not in page


def test_the_history_reads_as_sentences_and_tables(world: WebWorld) -> None:
    with signed_in(world) as client:
        job_id = rich_job(client, world)
        page, token = open_preview(client, job_id)
        csrf = csrf_of(page)
        done = client.post(f"/jobs/{job_id}/confirm", data={"csrf": csrf, "preview_token": token})
        assert done.status_code == 200
        shown = client.get(f"/jobs/{job_id}").text
    history = re.search(r'<table class="list history stack">(.*?)</table>\s*</div>', shown, re.S)
    assert history is not None
    words = text_of(history.group(1))
    for sentence in (
        "Prepared the job: nothing was written.",
        "Previewed the apply: every resource was read again.",
        "Confirmed the apply; the writes started.",
        "The write to customer landed and reads back as planned.",
        "The apply finished.",
    ):
        assert sentence in words
    for internal in ("finish_apply", "confirm_apply", "apply_done", '{"changes"', '"fields"'):
        assert internal not in words
    assert "HTTP status" in words and "Version after" in words
    recorded = re.findall(
        r'<table class="fields recorded stack">(.*?)</table>', history.group(1), re.S
    )
    assert recorded, "the recorded values are not shown as tables"
    assert '"lee"' in text_of(recorded[0]) and '"sam"' in text_of(recorded[0])
    assert "the document goes from" in words


def test_pages_carry_a_favicon(world: WebWorld) -> None:
    with TestClient(world.app) as client:
        page = client.get("/signin").text
        assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
        icon = client.get("/static/favicon.svg")
        assert icon.status_code == 200
        assert icon.headers["content-type"].startswith("image/svg+xml")
        assert icon.text.startswith("<svg")
        asked = client.get("/favicon.ico", follow_redirects=False)
        assert asked.status_code == 301 and asked.headers["location"] == "/static/favicon.svg"


def test_a_document_put_reads_as_its_lines(
    server: ContractServer, data_dir: Path, open_gateway: Any
) -> None:
    world = web_world(server, data_dir, open_gateway)
    text = "line one\n\nline three, no newline at the end"
    with signed_in(world) as client:
        job_id = prepare_via_api(
            client,
            world.keys["agent"],
            {"summary": "doc", "changes": [{"resource": "notes", "text": text}]},
        )
        page, _ = open_preview(client, job_id)
    section = requests_section(page)
    lines = [text_of(x) for x in re.findall(r'<div class="body-line">(.*?)</div>', section, re.S)]
    assert lines == ["line one", "", "line three, no newline at the end"]
    assert "(no newline at the end)" in section
    assert f"PUT {server.url(DOCUMENT)}" in text_of(section)
    assert "\\n" not in text_of(section) and "\\x0a" not in section
    assert RECORD not in section  # only the document is written


def test_confirming_still_needs_the_preview_the_requests_came_from(world: WebWorld) -> None:
    # Computing the exact requests is a dry run: it sends nothing and spends no token.
    with signed_in(world) as client:
        job_id = prepare_via_api(client, world.keys["agent"], prepare_body())
        page, token = open_preview(client, job_id)
        assert world.server.write_count(RECORD) == 0
        done = client.post(
            f"/jobs/{job_id}/confirm", data={"csrf": csrf_of(page), "preview_token": token}
        )
        assert done.status_code == 200
        assert world.server.write_count(RECORD) == 1


def test_the_page_shows_the_writes_its_preview_planned_from_one_read_each(
    world: WebWorld,
) -> None:
    """The requests on the page are the preview's own (``Preview.requests``): making a
    preview reads each resource once, and nothing reads it again to show them."""
    reads: list[tuple[str, str]] = []

    class CountingHTTP(PinnedClient):  # the real client, counting what it sends
        def send(self, method: str, url: str, **options: Any) -> RemoteResponse:
            reads.append((method, url))
            return super().send(method, url, **options)

    counting = CountingHTTP()
    world.gateway.wire.http = counting
    try:
        with signed_in(world) as client:
            job_id = rich_job(client, world)
            reads.clear()  # what preparing read is not the preview's
            page, _ = open_preview(client, job_id)
    finally:
        counting.close()
    assert len(re.findall(r'<li class="request">', requests_section(page))) == 2
    assert sorted(reads) == sorted(
        [("GET", world.server.url(RECORD)), ("GET", world.server.url(DOCUMENT))]
    )
