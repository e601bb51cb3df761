"""The review UI in real headless Chromium (Debian's package, driven by Playwright).

One browser per module; every test gets a fresh world (contract server, ledger, app
served by uvicorn on 127.0.0.1) and a fresh browser context (no shared cookies).
Screenshots of each main page land in test-artifacts/web/ (and, with
UNDOGATE_UPDATE_SCREENSHOTS=1, the README's copies in docs/screenshots/).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.config import Config
from undogate.contract_server import ContractServer

from .browser import ServedApp, chromium_missing, save_shot, served, tab_to
from .worlds import (
    DOCUMENT,
    RECORD,
    LocalGateway,
    WebWorld,
    prepare_body,
    prepare_via_api,
    web_world,
)

_missing = chromium_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")

sync_api = pytest.importorskip("playwright.sync_api")

# Counts CSP violations in the page's own world; Playwright injects it over the
# DevTools protocol, so it is not itself subject to the page's CSP.
VIOLATION_PROBE = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__violations.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""
NASTY = "<script>alert('s')</script> <img src=x onerror=alert('i')> javascript:alert('j')"
TIMEOUT_MS = 15_000


@pytest.fixture
def world(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> WebWorld:
    return web_world(server, data_dir, open_gateway)


@pytest.fixture
def site(world: WebWorld) -> Iterator[ServedApp]:
    with served(world.app) as running:
        yield running


class Watched:
    """A page with everything a script injection would leave behind recorded."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.csp_console: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", self._console)
        page.add_init_script(VIOLATION_PROBE)
        page.set_default_timeout(TIMEOUT_MS)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _console(self, message: Any) -> None:
        if "Content Security Policy" in message.text:
            self.csp_console.append(message.text)

    def violations(self) -> list[str]:
        found = self.page.evaluate("window.__violations || []")
        assert isinstance(found, list)
        return [str(v) for v in found]

    def assert_inert(self) -> None:
        assert self.dialogs == []
        assert self.violations() == []
        assert self.csp_console == []


def open_page(browser: Any, *, width: int = 1280, height: int = 900) -> Watched:
    context = browser.new_context(viewport={"width": width, "height": height})
    return Watched(context.new_page())


def sign_in(page: Any, site: ServedApp, key: str) -> None:
    page.goto(f"{site.url}/agents")
    assert page.url.endswith("/signin")
    page.get_by_label("Operator key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{site.url}/inbox")


def api(site: ServedApp) -> httpx.Client:
    return httpx.Client(base_url=site.url, timeout=30, trust_env=False)


def prepare(site: ServedApp, world: WebWorld, body: Any = None, agent: str = "agent") -> str:
    with api(site) as client:
        return prepare_via_api(client, world.keys[agent], body or prepare_body())


def test_review_apply_and_undo_by_clicking(browser: Any, world: WebWorld, site: ServedApp) -> None:
    body = prepare_body(
        summary="Promote Ada to customer, hand the account to Lee, and note the renewal.",
    )
    body["changes"].append(
        {
            "resource": "notes",
            "text": "# Account notes\n\n- Ada prefers email before noon.\n"
            "- Renewal is due in **March**; Lee owns it now.\n",
            "assertion_kind": "inferred",
        }
    )
    job_id = prepare(site, world, body)
    before = world.server.get_record(RECORD)
    w = open_page(browser)
    page = w.page
    page.goto(f"{site.url}/signin")
    save_shot(page, "signin")
    sign_in(page, site, world.keys["alice"])
    page.goto(f"{site.url}/agents")
    save_shot(page, "agents")
    page.get_by_role("link", name="account-assistant").click()
    page.wait_for_url(f"{site.url}/agents/account-assistant")
    save_shot(page, "jobs")
    page.get_by_role("link", name=job_id).click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}")
    assert "written by the agent" in page.inner_text("#summary-h")
    assert "ticket CRM-4521" in page.inner_text("main")
    assert "caller-supplied" in page.inner_text("main")
    save_shot(page, "job-clicked")

    page.get_by_role("button", name="Preview apply").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/previews/**")
    assert "preview_token" not in page.url
    assert page.locator("#countdown").get_attribute("data-state") == "running"
    page.wait_for_function(
        "document.getElementById('countdown').textContent.includes(':')"
    )  # the script took over from the server-rendered text
    assert page.locator("input[name=preview_token]").get_attribute("type") == "hidden"
    assert "Nothing moved since the job was prepared" in page.inner_text("main")
    assert world.server.write_count(RECORD) == 0
    save_shot(page, "preview-clicked")
    narrow = open_page(browser, width=390, height=844)
    narrow.page.context.add_cookies(page.context.cookies())
    narrow.page.goto(page.url)
    save_shot(narrow.page, "preview-clicked-phone")
    narrow.page.goto(f"{site.url}/jobs/{job_id}")
    save_shot(narrow.page, "job-phone")
    narrow.page.context.close()

    page.get_by_role("button", name="Confirm apply").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/receipt")
    assert "Confirmed" in page.inner_text("[role=status]")
    assert "applied" in page.inner_text("h1")
    save_shot(page, "receipt-clicked")
    after = world.server.get_record(RECORD)
    assert after["status"] == "customer" and after["owner"] == "lee"
    assert after["balance"] == before["balance"]  # untouched, digits and all
    assert "Lee owns it now" in world.server.get_text(DOCUMENT)

    page.go_back()  # the used preview: confirmed, with the receipt, never "expired"
    page.wait_for_url(f"{site.url}/jobs/{job_id}/previews/**")
    assert "This preview was already confirmed" in page.inner_text("h1")
    assert "expired" not in page.inner_text("main")
    page.get_by_role("link", name="The receipt of what ran").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/receipt")
    assert world.server.write_count(RECORD) == 1

    page.get_by_role("link", name="Back to the job").click()
    page.get_by_role("button", name="Preview undo").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/previews/**")
    assert "Preview: Undo" in page.inner_text("h1")
    page.get_by_role("button", name="Confirm undo").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/receipt")
    assert "undone" in page.inner_text("h1")
    assert world.server.get_record(RECORD) == before
    page.goto(f"{site.url}/jobs/{job_id}")
    history = page.inner_text("#history-h + .table-box")
    for step in (
        "Prepared the job",
        "Previewed the apply",
        "Previewed the undo",
        "The undo of customer landed",
    ):
        assert step in history
    assert "preview_apply" not in history  # sentences, not internal event names
    w.assert_inert()
    page.context.close()


def test_an_expired_preview_refuses_to_confirm(
    browser: Any,
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
) -> None:
    world = web_world(server, data_dir, open_gateway, preview_ttl_s=1.5)
    with served(world.app) as site:
        job_id = prepare(site, world)
        w = open_page(browser)
        page = w.page
        sign_in(page, site, world.keys["alice"])
        page.goto(f"{site.url}/jobs/{job_id}")
        page.get_by_role("button", name="Preview apply").click()
        page.wait_for_selector("#countdown[data-state=expired]", timeout=TIMEOUT_MS)
        assert "expired" in page.inner_text("#countdown")
        confirm = page.get_by_role("button", name="Confirm apply")
        assert confirm.is_disabled()  # the countdown disables it at zero
        again = page.get_by_role("button", name="Preview again")
        assert again.is_visible()  # and offers the way on, without a reload
        # The server stays the authority: the form sent anyway (say, scripts off) is refused.
        with page.expect_navigation():
            confirm.evaluate("button => button.form.submit()")
        assert "This preview expired" in page.inner_text("h1")
        assert "preview_expired" in page.inner_text("main")
        save_shot(page, "refusal-expired")
        assert world.server.write_count(RECORD) == 0
        assert world.gateway.get_job(world.ids["alice"], job_id).state.value == "prepared"
        page.go_back()
        page.wait_for_selector("#countdown[data-state=expired]", timeout=TIMEOUT_MS)
        tab_to(page, "Preview again")  # by keyboard, from the expired page
        page.keyboard.press("Enter")
        page.wait_for_selector("#countdown[data-state=running]", timeout=TIMEOUT_MS)
        assert page.get_by_role("button", name="Confirm apply").is_enabled()
        w.assert_inert()
        page.context.close()


def test_an_outside_edit_after_preview_is_refused_and_writes_nothing(
    browser: Any, world: WebWorld, site: ServedApp
) -> None:
    job_id = prepare(site, world)
    w = open_page(browser)
    page = w.page
    sign_in(page, site, world.keys["alice"])
    page.goto(f"{site.url}/jobs/{job_id}")
    page.get_by_role("button", name="Preview apply").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/previews/**")
    world.server.set_field(RECORD, "/tier", "gold")  # someone else edits the record
    edited = world.server.get_record(RECORD)
    page.get_by_role("button", name="Confirm apply").click()
    assert "Something changed since you previewed this" in page.inner_text("h1")
    assert "changed_since_preview" in page.inner_text("main")
    save_shot(page, "refusal-changed")
    assert world.server.write_count(RECORD) == 0  # no PATCH reached the server
    assert world.server.get_record(RECORD) == edited
    page.get_by_role("button", name="Preview again").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/previews/**")
    assert page.get_by_role("button", name="Confirm apply").is_visible()
    w.assert_inert()
    page.context.close()


def test_script_payloads_render_as_inert_text(
    browser: Any, world: WebWorld, site: ServedApp
) -> None:
    body = {
        "summary": NASTY,
        "attribution_label": NASTY,
        "changes": [
            {"resource": "customer", "set": {"owner": NASTY, "status": "javascript:alert(4)"}},
            {
                "resource": "notes",
                "text": f'# Notes\n\n{NASTY}\n<a href="javascript:alert(5)">x</a>\n',
            },
        ],
    }
    job_id = prepare(site, world, body)
    w = open_page(browser)
    page = w.page
    sign_in(page, site, world.keys["alice"])
    for path in ("/agents/account-assistant", f"/jobs/{job_id}"):
        page.goto(site.url + path)
        main = page.locator("main")
        assert main.locator("img").count() == 0
        assert page.locator("script").count() == 0
        assert main.locator("a[href^='javascript']").count() == 0
        assert NASTY in main.inner_text() or NASTY[:60] in main.inner_text()
    assert page.get_by_text("javascript:alert(4)", exact=False).count() >= 1
    save_shot(page, "job-payloads")
    page.get_by_role("button", name="Preview apply").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/previews/**")
    assert page.locator("script").count() == 1  # countdown.js, from our origin
    assert page.locator("script").get_attribute("src") == "/static/countdown.js"
    assert page.locator("main img").count() == 0
    assert NASTY in page.locator("main").inner_text()
    w.assert_inert()
    # the probe itself works: an injected inline script is blocked and reported
    page.evaluate(
        "() => { const s = document.createElement('script');"
        " s.textContent = 'window.__ran = 1'; document.body.appendChild(s); }"
    )
    page.wait_for_function("window.__violations.length > 0")
    assert page.evaluate("window.__ran === undefined")
    page.context.close()


class _Attacker(BaseHTTPRequestHandler):
    """Serves a page on another origin with a form aimed at the review UI."""

    target = ""
    csrf = ""

    def do_GET(self) -> None:
        body = (
            "<!doctype html><title>win a prize</title>"
            f'<form method="post" action="{self.target}">'
            f'<input type="hidden" name="csrf" value="{self.csrf}">'
            "<button>Claim</button></form>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_form_from_another_origin_is_refused(
    browser: Any, world: WebWorld, site: ServedApp
) -> None:
    job_id = prepare(site, world)
    w = open_page(browser)
    page = w.page
    sign_in(page, site, world.keys["alice"])
    page.goto(f"{site.url}/jobs/{job_id}")
    # even a leaked CSRF token does not help another origin
    _Attacker.csrf = page.locator("input[name=csrf]").first.get_attribute("value") or ""
    _Attacker.target = f"{site.url}/jobs/{job_id}/reject"
    evil = ThreadingHTTPServer(("127.0.0.1", 0), _Attacker)
    thread = threading.Thread(target=evil.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    try:
        page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
        page.get_by_role("button", name="Claim").click()
        page.wait_for_url(_Attacker.target)
        assert "sent from another site" in page.inner_text("h1")
        save_shot(page, "refusal-cross-site")
    finally:
        evil.shutdown()
        evil.server_close()
        thread.join(timeout=5)
    assert world.gateway.get_job(world.ids["alice"], job_id).state.value == "prepared"
    page.context.close()


def test_another_owners_job_is_not_reachable(
    browser: Any, world: WebWorld, site: ServedApp
) -> None:
    bobs = prepare(site, world, prepare_body(summary="bobs private job"), agent="bob_agent")
    w = open_page(browser)
    page = w.page
    sign_in(page, site, world.keys["alice"])
    response = page.goto(f"{site.url}/jobs/{bobs}")
    assert response is not None and response.status == 404
    assert "There is nothing here" in page.inner_text("h1")
    assert "bobs private job" not in page.content()
    page.goto(f"{site.url}/agents/account-assistant")
    page.get_by_label("Open a job by id").fill(bobs)
    page.get_by_role("button", name="Open").click()
    assert "There is nothing here" in page.inner_text("h1")
    page.context.close()
