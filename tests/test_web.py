"""The review UI over HTTP (no browser): sessions, CSRF, origins, headers, isolation.

The browser tests (tests/test_web_browser.py) drive the same pages in Chromium.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from markupsafe import escape
from starlette.testclient import TestClient

from undogate.api import STATUS_BY_CODE
from undogate.auth import Keyring
from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.service import Service
from undogate.web import CSP, SESSION_COOKIE, WebSettings
from undogate.web.refusals import known_codes, refusal_for_code

from .browser import served
from .worlds import (
    RECORD,
    LocalGateway,
    WebWorld,
    prepare_body,
    prepare_via_api,
    review_app,
    web_world,
)

CSRF_RE = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture
def world(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> WebWorld:
    return web_world(server, data_dir, open_gateway)


def csrf_of(html: str) -> str:
    found = CSRF_RE.search(html)
    assert found, "no CSRF field on the page"
    return found.group(1)


def sign_in(client: httpx.Client | TestClient, key: str) -> Any:
    form = client.get("/signin")
    assert form.status_code == 200
    return client.post("/signin", data={"key": key, "csrf": csrf_of(form.text)})


def signed_in(world: WebWorld, who: str = "alice", **kwargs: Any) -> TestClient:
    client = TestClient(world.app, **kwargs)
    done = sign_in(client, world.keys[who])
    assert done.status_code == 200, done.text  # followed the redirect to the inbox
    assert done.url.path == "/inbox"
    return client


def new_job(client: TestClient, world: WebWorld, agent: str = "agent", **body: Any) -> str:
    return prepare_via_api(client, world.keys[agent], prepare_body(**body))


def test_sign_in_sets_an_opaque_strict_http_only_session_cookie(world: WebWorld) -> None:
    with TestClient(world.app) as client:
        form = client.get("/signin")
        assert form.headers["content-security-policy"] == CSP
        done = client.post(
            "/signin",
            data={"key": world.keys["alice"], "csrf": csrf_of(form.text)},
            follow_redirects=False,
        )
        assert done.status_code == 303
        cookie = next(
            h for h in done.headers.get_list("set-cookie") if h.startswith(SESSION_COOKIE)
        )
        attrs = [a.strip().lower() for a in cookie.split(";")]
        assert "httponly" in attrs
        assert "samesite=strict" in attrs
        assert "path=/" in attrs
        assert "secure" not in attrs  # plain http on loopback
        value = cookie.split(";")[0].split("=", 1)[1]
        assert len(value) >= 40
        assert world.keys["alice"] not in cookie
        assert world.keys["alice"].split("_")[1] not in cookie  # not even its public id
        assert client.get("/agents").status_code == 200


def test_pages_say_who_is_signed_in_by_the_keys_label(world: WebWorld) -> None:
    """The label comes with the re-checked credential on each request, not a second read."""
    with signed_in(world, "reader") as client:
        who = re.search(r'<span class="who">(.*?)</span></span>', client.get("/agents").text)
        assert who, "no 'Signed in as' on the page"
        assert "Signed in as <strong>carol (read only)</strong>" in who.group(1)


def test_cookies_are_secure_over_https(world: WebWorld) -> None:
    with TestClient(world.app, base_url="https://review.example") as client:
        form = client.get("/signin")
        assert "secure" in form.headers["set-cookie"].lower()
        done = client.post(
            "/signin",
            data={"key": world.keys["alice"], "csrf": csrf_of(form.text)},
            headers={"Origin": "https://review.example"},
            follow_redirects=False,
        )
        assert done.status_code == 303
        assert "secure" in done.headers["set-cookie"].lower()


def test_only_operator_keys_sign_in_and_the_form_needs_its_token(world: WebWorld) -> None:
    with TestClient(world.app) as client:
        for key in (world.keys["agent"], "ugo_000000000000_nope", "not a key"):
            refused = sign_in(client, key)
            assert refused.status_code == 401
            assert SESSION_COOKIE not in client.cookies
        assert "Only operator keys" in sign_in(client, world.keys["agent"]).text
        assert "unknown or has been revoked" in sign_in(client, "ugo_x").text
        client.get("/signin")
        for csrf in ("a.1.b", "a.1.é", "a.١.b"):  # forged, non-ASCII, a non-ASCII digit
            forged = client.post("/signin", data={"key": world.keys["alice"], "csrf": csrf})
            assert forged.status_code == 401
            assert "out of date" in forged.text
            assert SESSION_COOKIE not in client.cookies


def test_pages_need_a_session_and_carry_the_safety_headers(world: WebWorld) -> None:
    with TestClient(world.app) as anonymous:
        for path in ("/agents", "/agents/account-assistant", "/jobs/job_x", "/"):
            r = anonymous.get(path, follow_redirects=False)
            assert r.status_code == 303 and r.headers["location"] == "/signin", path
    with signed_in(world) as client:
        job_id = new_job(client, world)
        for path in ("/agents", "/agents/account-assistant", f"/jobs/{job_id}"):
            r = client.get(path)
            assert r.status_code == 200, path
            assert r.headers["content-security-policy"] == CSP
            assert r.headers["cache-control"] == "no-store"
            assert r.headers["x-frame-options"] == "DENY"
            assert r.headers["x-content-type-options"] == "nosniff"
            assert "<script" not in r.text  # only the preview page loads a script
        assert client.get("/static/countdown.js").status_code == 200


def test_every_post_needs_the_session_csrf_token(world: WebWorld) -> None:
    with signed_in(world) as client:
        job_id = new_job(client, world)
        for data in ({}, {"csrf": "wrong"}, {"csrf": ""}):
            r = client.post(f"/jobs/{job_id}/reject", data=data)
            assert r.status_code == 403
            assert "out of date for your session" in r.text
        assert world.gateway.get_job(world.ids["alice"], job_id).state.value == "prepared"
        # a token from another session is no good either
        with signed_in(world) as other:
            theirs = csrf_of(other.get(f"/jobs/{job_id}").text)
        assert client.post(f"/jobs/{job_id}/reject", data={"csrf": theirs}).status_code == 403
        mine = csrf_of(client.get(f"/jobs/{job_id}").text)
        ok = client.post(f"/jobs/{job_id}/reject", data={"csrf": mine})
        assert ok.status_code == 200 and "Rejected" in ok.text
        assert world.gateway.get_job(world.ids["alice"], job_id).state.value == "rejected"


def test_a_post_from_another_origin_is_refused_even_with_cookie_and_token(
    world: WebWorld,
) -> None:
    with signed_in(world) as client:
        job_id = new_job(client, world)
        csrf = csrf_of(client.get(f"/jobs/{job_id}").text)
        for headers in (
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Origin": "http://testserver:8080"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site", "Origin": "http://testserver"},
        ):
            r = client.post(f"/jobs/{job_id}/reject", data={"csrf": csrf}, headers=headers)
            assert r.status_code == 403, headers
            assert "sent from another site" in r.text
            assert r.headers["content-security-policy"] == CSP
        assert world.gateway.get_job(world.ids["alice"], job_id).state.value == "prepared"
        with TestClient(world.app) as fresh:
            form = fresh.get("/signin")
            evil = fresh.post(
                "/signin",
                data={"key": world.keys["alice"], "csrf": csrf_of(form.text)},
                headers={"Origin": "http://evil.example"},
            )
            assert evil.status_code == 403 and SESSION_COOKIE not in fresh.cookies
        same = client.post(
            f"/jobs/{job_id}/reject",
            data={"csrf": csrf},
            headers={"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"},
        )
        assert same.status_code == 200
        assert world.gateway.get_job(world.ids["alice"], job_id).state.value == "rejected"


def test_another_owners_job_is_not_reachable_by_url(world: WebWorld) -> None:
    with signed_in(world, "bob") as bob:
        bobs_job = new_job(bob, world, agent="bob_agent", summary="bobs own job")
        assert bob.get(f"/jobs/{bobs_job}").status_code == 200
    with signed_in(world) as alice:
        mine = new_job(alice, world)
        for path in (f"/jobs/{bobs_job}", f"/jobs/{bobs_job}/receipt", f"/jobs?id={bobs_job}"):
            r = alice.get(path)
            assert r.status_code == 404, path
            assert "bobs own job" not in r.text
        csrf = csrf_of(alice.get(f"/jobs/{mine}").text)
        for action, data in (("previews", {"operation": "apply"}), ("reject", {})):
            r = alice.post(f"/jobs/{bobs_job}/{action}", data={"csrf": csrf, **data})
            assert r.status_code == 404
        assert bobs_job not in alice.get("/agents/account-assistant").text
        assert world.gateway.get_job(world.ids["bob"], bobs_job).state.value == "prepared"
        assert alice.get("/jobs/" + "x" * 300).status_code == 404
        assert alice.get("/agents/no-such-agent").status_code == 404


def test_a_refusal_on_a_page_is_logged_with_its_code(
    world: WebWorld, caplog: pytest.LogCaptureFixture
) -> None:
    """Every surface tells the operator what it refused (issue 17, item 4): one line
    with the code, never the value."""
    with signed_in(world) as alice:
        job = new_job(alice, world)
        csrf = csrf_of(alice.get(f"/jobs/{job}").text)
        with caplog.at_level("WARNING", logger="undogate.refusals"):
            r = alice.post(f"/jobs/{job}/previews", data={"csrf": csrf, "operation": "undo"})
        assert r.status_code == 409
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "undogate.refusals"]
    assert lines == [
        f"refused [transition_not_allowed] on POST /jobs/{job}/previews: "
        "Can't start undo when in prepared"
    ], lines


def test_open_an_older_job_by_id(world: WebWorld) -> None:
    with signed_in(world) as client:
        job_id = new_job(client, world)
        r = client.get("/jobs", params={"id": f"  {job_id} "}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == f"/jobs/{job_id}"
        assert client.get("/jobs", params={"id": "job_nope"}).status_code == 404


def test_sessions_end_on_sign_out_revocation_and_idle_expiry(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    now = [1_000_000.0]
    settings = WebSettings(session_idle_s=60, session_absolute_s=3600, clock=lambda: now[0])
    world = web_world(server, data_dir, open_gateway, settings=settings)
    with signed_in(world) as client:
        now[0] += 59
        assert client.get("/agents").status_code == 200
        now[0] += 59  # still within the idle window: each page resets it
        assert client.get("/agents").status_code == 200
        now[0] += 61
        r = client.get("/agents", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/signin"
    with signed_in(world) as client:
        for _ in range(4):
            now[0] += 59
            assert client.get("/agents").status_code == 200
        now[0] += 3600  # the absolute lifetime, however busy
        assert client.get("/agents", follow_redirects=False).status_code == 303
    with signed_in(world) as client:
        stolen = client.cookies[SESSION_COOKIE]
        csrf = csrf_of(client.get("/agents").text)
        out = client.post("/signout", data={"csrf": csrf})
        assert out.status_code == 200 and "You are signed out" in out.text
        with TestClient(world.app, cookies={SESSION_COOKIE: stolen}) as replay:
            assert replay.get("/agents", follow_redirects=False).status_code == 303
    with signed_in(world) as client:
        world.keyring.revoke(world.ids["alice"], force=True)
        r = client.get("/agents", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/signin"
        assert "unknown or has been revoked" in sign_in(client, world.keys["alice"]).text


def test_a_read_only_key_sees_jobs_but_cannot_act(world: WebWorld) -> None:
    token = world.keyring.create_agent_token(
        owner_id=world.ids["reader"], agent_id="account-assistant", label="carol's assistant"
    )
    world.keys["reader_agent"] = token.key
    with signed_in(world, "reader") as carol:
        job_id = new_job(carol, world, agent="reader_agent")
        page = carol.get(f"/jobs/{job_id}")
        assert page.status_code == 200
        assert "can read jobs but not act on them" in page.text
        assert "Preview apply" not in page.text
        csrf = csrf_of(page.text)
        for action, data in (("previews", {"operation": "apply"}), ("reject", {})):
            r = carol.post(f"/jobs/{job_id}/{action}", data={"csrf": csrf, **data})
            assert r.status_code == 403
            assert "not allowed to do this" in r.text
    assert world.gateway.get_job(world.ids["reader"], job_id).state.value == "prepared"


def preview_and_confirm(client: TestClient, job_id: str, operation: str) -> Any:
    csrf = csrf_of(client.get(f"/jobs/{job_id}").text)
    shown = client.post(f"/jobs/{job_id}/previews", data={"csrf": csrf, "operation": operation})
    token = re.search(r'name="preview_token" value="([^"]+)"', shown.text)
    assert token, shown.text
    return shown, client.post(
        f"/jobs/{job_id}/confirm", data={"csrf": csrf, "preview_token": token.group(1)}
    )


def test_an_uncertain_write_is_reconciled_and_quarantines_others(world: WebWorld) -> None:
    with signed_in(world) as client:
        first = new_job(client, world)
        world.server.arm("apply_then_500", RECORD)
        _, done = preview_and_confirm(client, first, "apply")
        assert "needs review" in done.text and "uncertain" in done.text
        second = prepare_via_api(
            client,
            world.keys["agent"],
            {
                "summary": "same field",
                "changes": [{"resource": "customer", "set": {"owner": "kim"}}],
            },
        )
        csrf = csrf_of(client.get(f"/jobs/{second}").text)
        held = client.post(f"/jobs/{second}/previews", data={"csrf": csrf, "operation": "apply"})
        assert held.status_code == 409
        assert "outcome on the same resource is uncertain" in held.text
        assert first in held.text  # the engine's sentence names the blocking job
        assert f'class="blocking-job" href="/jobs/{first}"' in held.text  # and links it
        assert f'href="/jobs/{second}/reject"' in held.text  # a held job can be rejected
        assert "What this apply would have written" in held.text
        page = client.get(f"/jobs/{first}")
        assert "Preview: accept observed state" in page.text
        shown, accepted = preview_and_confirm(client, first, "accept_observed")
        assert "It currently looks applied" in shown.text
        assert "writes nothing to any external system" in shown.text
        assert accepted.status_code == 200
        assert world.gateway.get_job(world.ids["alice"], first).state.value == "applied"
        assert world.server.write_count(RECORD) == 1


def test_undo_refuses_to_pass_a_later_job(world: WebWorld) -> None:
    with signed_in(world) as client:
        before = world.server.get_record(RECORD)
        first = new_job(client, world)
        preview_and_confirm(client, first, "apply")
        later = prepare_via_api(
            client,
            world.keys["agent"],
            {"summary": "later", "changes": [{"resource": "customer", "set": {"owner": "kim"}}]},
        )
        preview_and_confirm(client, later, "apply")
        csrf = csrf_of(client.get(f"/jobs/{first}").text)
        r = client.post(f"/jobs/{first}/previews", data={"csrf": csrf, "operation": "undo"})
        assert r.status_code == 409
        assert "Undo the later job first" in r.text
        assert f'class="blocking-job" href="/jobs/{later}"' in r.text
        assert "What this undo would have written" in r.text
        assert f'<code class="value">&#34;{before["owner"]}&#34;</code>' in r.text
        assert "/reject" not in r.text  # an applied job is not rejected
        assert world.server.get_record(RECORD)["owner"] == "kim"


def test_values_and_summaries_are_escaped_text(world: WebWorld) -> None:
    payload = "<script>alert(1)</script><img src=x onerror=alert(2)>javascript:alert(3)"
    with signed_in(world) as client:
        job_id = prepare_via_api(
            client,
            world.keys["agent"],
            {
                "summary": payload,
                "attribution_label": payload,
                "changes": [{"resource": "customer", "set": {"owner": payload}}],
            },
        )
        for path in (f"/jobs/{job_id}", "/agents/account-assistant"):
            html = client.get(path).text
            assert "<script>alert" not in html
            assert "<img src=x" not in html
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
            assert 'href="javascript' not in html


def test_refusals_have_words_for_every_review_code() -> None:
    review_codes = {
        "changed_since_preview",
        "preview_expired",
        "preview_used",
        "conflict",
        "quarantined",
        "later_job_overlaps",
        "reconciliation_blocked",
        "transition_not_allowed",
        "limit_reached",
        "forbidden",
        "not_found",
        "rewind_blocked",
        "passkey_refused",
        "ledger_busy",
        "ledger_error",
        "ledger_tampered",
        "internal_error",
    }
    assert review_codes <= known_codes()
    assert review_codes <= set(STATUS_BY_CODE)
    for code in review_codes:
        words = refusal_for_code(code)
        assert words.sentence.endswith(".") and words.next_step.endswith(".")
    assert refusal_for_code("something_new").sentence  # a fallback, never a blank page


def test_the_record_is_untouched_until_confirm(world: WebWorld) -> None:
    with signed_in(world) as client:
        job_id = new_job(client, world)
        csrf = csrf_of(client.get(f"/jobs/{job_id}").text)
        shown = client.post(f"/jobs/{job_id}/previews", data={"csrf": csrf, "operation": "apply"})
        assert shown.status_code == 200 and "/previews/" in shown.url.path
        assert 'name="preview_token"' in shown.text
        assert "preview_token" not in str(shown.url)
        assert world.server.write_count(RECORD) == 0
        token = re.search(r'name="preview_token" value="([^"]+)"', shown.text)
        assert token
        done = client.post(
            f"/jobs/{job_id}/confirm", data={"csrf": csrf, "preview_token": token.group(1)}
        )
        assert done.status_code == 200 and done.url.path == f"/jobs/{job_id}/receipt"
        assert world.server.get_record(RECORD)["owner"] == "lee"
        again = client.post(
            f"/jobs/{job_id}/confirm", data={"csrf": csrf, "preview_token": token.group(1)}
        )
        assert "already confirmed; nothing was sent again" in again.text
        assert world.server.write_count(RECORD) == 1


def test_bidi_overrides_and_control_characters_are_shown_not_obeyed(world: WebWorld) -> None:
    # "txt.exe" that a right-to-left override would display as "exe.txt", plus a C1 CSI.
    trick = "invoice\u202etxt.exe\u200b\u009b2J"
    with signed_in(world) as client:
        job_id = prepare_via_api(
            client,
            world.keys["agent"],
            {"summary": trick, "changes": [{"resource": "customer", "set": {"owner": trick}}]},
        )
        for path in (f"/jobs/{job_id}", "/agents/account-assistant"):
            html = client.get(path).text
            for hidden in ("\u202e", "\u200b", "\u009b"):
                assert hidden not in html, (path, hidden)
            assert marker("202E") in html


def marker(code: str) -> str:
    """A real invisible character as a page shows it: an element no text can fake."""
    return f'<span class="inv"><span class="sr">invisible character </span>U+{code}</span>'


# Printable to str.isprintable() yet drawn as nothing, or as a space: Hangul fillers,
# the Braille blank, the combining grapheme joiner, a variation selector, a tag letter.
BLANKS = "\u3164\u115f\u1160\uffa0\u2800\u034f\ufe0f\U000e0041"


def test_invisible_and_blank_looking_characters_are_marked_on_every_page(
    world: WebWorld,
) -> None:
    body = prepare_body(summary=f"Hand to lee{BLANKS}", attribution_label=f"crm{BLANKS}")
    body["changes"][0]["set"]["owner"] = f"lee{BLANKS}"
    body["changes"].append({"resource": "notes", "text": f"# Notes\n\nowner: lee{BLANKS}\n"})
    with (
        served(world.app) as site,
        httpx.Client(base_url=site.url, follow_redirects=True) as client,
    ):
        assert sign_in(client, world.keys["alice"]).status_code == 200
        job_id = prepare_via_api(client, world.keys["agent"], body)
        csrf = csrf_of(client.get(f"/jobs/{job_id}").text)
        preview = client.post(f"/jobs/{job_id}/previews", data={"csrf": csrf, "operation": "apply"})
        assert preview.status_code == 200 and "/previews/" in preview.url.path
        pages = {
            "job": client.get(f"/jobs/{job_id}").text,
            "jobs": client.get("/agents/account-assistant").text,
            "preview": preview.text,
        }
    for name, html in pages.items():
        for ch in BLANKS:
            assert ch not in html, (name, f"U+{ord(ch):04X}")
        shown = "".join(marker(f"{ord(ch):04X}") for ch in BLANKS)
        assert f"lee{shown}" in html, name
    # the job page shows the agent's words, the record value and the document line
    assert pages["job"].count(marker("3164")) >= 4


def test_the_cli_shows_control_characters_in_values_as_escapes() -> None:
    from undogate.cli.terminal_values import value_text

    shown = value_text("a\u202eb\u009b2J\x1b[31m").plain
    assert all(ch.isprintable() for ch in shown), shown


def test_reopening_a_confirmed_preview_says_it_was_confirmed_and_links_the_receipt(
    world: WebWorld,
) -> None:
    with signed_in(world) as client:
        job_id = new_job(client, world)
        shown, done = preview_and_confirm(client, job_id, "apply")
        assert done.url.path == f"/jobs/{job_id}/receipt"
        assert world.server.write_count(RECORD) == 1
        back = client.get(shown.url.path)  # the back button re-reads the preview page
        assert back.status_code == 200
        assert "expired" not in back.text
        assert "This preview was already confirmed" in back.text
        assert "Apply" in back.text and "applied" in back.text
        assert f'href="/jobs/{job_id}/receipt"' in back.text
        assert 'name="preview_token"' not in back.text  # nothing to confirm again
        assert world.server.write_count(RECORD) == 1


def test_an_expired_unused_preview_still_says_it_expired(world: WebWorld) -> None:
    with signed_in(world) as client:
        job_id = new_job(client, world)
        csrf = csrf_of(client.get(f"/jobs/{job_id}").text)
        shown = client.post(f"/jobs/{job_id}/previews", data={"csrf": csrf, "operation": "apply"})
        gone = client.get(f"/jobs/{job_id}/previews/not-a-held-handle")
        assert gone.status_code == 404
        assert "This preview expired before it was confirmed" in gone.text
        world.gateway.clock = lambda: 10.0**10
        late = client.get(shown.url.path)
        assert "This preview has expired" in late.text
        assert "already confirmed" not in late.text
        assert 'name="preview_token"' not in late.text


STALE = "The values this job would replace have changed since it was prepared."


def test_a_stale_job_says_why_once_and_can_be_rejected_from_its_preview(
    world: WebWorld,
) -> None:
    with signed_in(world) as client:
        job_id = new_job(client, world)
        world.server.set_record(RECORD, {**world.server.get_record(RECORD), "owner": "zed"})
        csrf = csrf_of(client.get(f"/jobs/{job_id}").text)
        shown = client.post(f"/jobs/{job_id}/previews", data={"csrf": csrf, "operation": "apply"})
        assert shown.status_code == 200
        assert "This apply cannot be confirmed" in shown.text
        assert shown.text.count(STALE) == 1  # once: not again as a note or "moved"
        assert "changed since it was prepared" not in shown.text.replace(STALE, "")
        assert "Moved since it was prepared" not in shown.text
        assert "Nothing moved" not in shown.text
        assert "someone else" not in shown.text.lower()  # an outside edit: no guess at who
        assert 'name="preview_token"' not in shown.text
        assert "Preview again" not in shown.text  # the values will not come back by waiting
        expected = shown.text.split('class="fields stack expected"', 1)[1].split("</table>")[0]
        assert "&#34;sam&#34;" in expected and "&#34;zed&#34;" in expected
        ask = re.search(
            r'<a class="button danger" id="reject" href="(/jobs/[^"]+/reject)"', shown.text
        )
        assert ask and ask.group(1) == f"/jobs/{job_id}/reject"
        confirm = client.get(ask.group(1))  # rejecting asks first, and writes nothing yet
        assert "Reject job" in confirm.text and "can never be applied" in confirm.text
        assert world.gateway.get_job(world.ids["alice"], job_id).state.value == "prepared"
        done = client.post(ask.group(1), data={"csrf": csrf_of(confirm.text), "reason": "stale"})
        assert done.status_code == 200 and done.url.path == f"/jobs/{job_id}"
        assert "Rejected. This job can never be applied." in done.text
        assert "The reviewer's reason:" in done.text and ">stale</span>" in done.text
        assert world.gateway.get_job(world.ids["alice"], job_id).state.value == "rejected"
        assert world.server.write_count(RECORD) == 0


def test_a_blocked_undo_says_why_once_and_shows_what_it_would_have_written(
    world: WebWorld,
) -> None:
    with signed_in(world) as client:
        before = world.server.get_record(RECORD)
        job_id = new_job(client, world)
        preview_and_confirm(client, job_id, "apply")
        world.server.set_record(RECORD, {**world.server.get_record(RECORD), "owner": "yan"})
        csrf = csrf_of(client.get(f"/jobs/{job_id}").text)
        shown = client.post(f"/jobs/{job_id}/previews", data={"csrf": csrf, "operation": "undo"})
        assert shown.status_code == 200
        assert shown.text.count("Undoing it would overwrite the newer values") == 1
        assert 'id="irrev-h"' not in shown.text  # the blocker says it once
        assert "Moved since it was prepared" not in shown.text
        table = shown.text.split('id="changes-h"', 1)[1]
        assert f"&#34;{before['owner']}&#34;" in table  # the value undo would have written
        assert "&#34;yan&#34;" in table  # against what is there now
        expected = shown.text.split('class="fields stack expected"', 1)[1].split("</table>")[0]
        assert "This job wrote" in expected and "&#34;lee&#34;" in expected
        assert "/reject" not in shown.text  # an applied job is not rejected
        assert world.server.get_record(RECORD)["owner"] == "yan"


def test_a_session_and_its_previews_survive_a_restart(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    """Sessions live in the ledger: a gateway restarted on the same ledger (a new
    process would hold nothing else) still knows the reviewer and the preview they
    opened, and the preview's token is not stored in the clear."""
    world = web_world(server, data_dir, open_gateway)
    with signed_in(world) as client:
        job_id = new_job(client, world)
        csrf = csrf_of(client.get(f"/jobs/{job_id}").text)
        shown = client.post(f"/jobs/{job_id}/previews", data={"csrf": csrf, "operation": "apply"})
        token = re.search(r'name="preview_token" value="([^"]+)"', shown.text)
        assert token, shown.text
        cookies = dict(client.cookies)
        preview_path = str(shown.url.path)
    world.gateway.http.close()
    world.gateway.ledger.close()
    files = list(data_dir.glob("ledger.sqlite3*"))
    assert files and not any(token.group(1).encode() in f.read_bytes() for f in files)
    again = open_gateway(world.gateway.config)
    keyring = Keyring(again.ledger, known_agents=lambda: {"account-assistant"})
    app = review_app(Service(again, keyring))
    with TestClient(app, cookies=cookies) as client:
        page = client.get(preview_path)
        assert page.status_code == 200
        assert f'value="{token.group(1)}"' in page.text
        done = client.post(
            f"/jobs/{job_id}/confirm", data={"csrf": csrf, "preview_token": token.group(1)}
        )
        assert done.status_code == 200 and "Confirmed." in done.text


def test_pages_answer_a_refusal_when_the_ledger_holding_sessions_is_gone(
    world: WebWorld, caplog: pytest.LogCaptureFixture
) -> None:
    """Sessions live in the ledger: with it gone, every page (signed in or not) says so
    with the ledger's refusal and status, never a bare error."""
    with signed_in(world) as client:
        world.gateway.ledger.close()
        for method, path in (("GET", "/agents"), ("GET", "/"), ("GET", "/signin")):
            page = client.request(method, path, follow_redirects=False)
            assert page.status_code == STATUS_BY_CODE["ledger_error"], (path, page.text[:300])
            assert page.headers["content-security-policy"] == CSP
            assert str(escape(refusal_for_code("ledger_error").next_step)) in page.text
    assert "refused [ledger_error] on GET /agents" in caplog.text
