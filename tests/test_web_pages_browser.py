"""Every page of the README's walkthrough in real Chromium, read as a reviewer reads it.

One world holds every state a page can show: a prepared job with a record and a document
(a long line, a real invisible character and an agent's literal marker text), its
preview and receipt, a stale job that undogate's own applied job overtook, a collection
create (irreversible until its undo is verified and accepted) and the preview of its
undo, a rejected job, webhook messages, passkeys at an IP address, and refusal pages.

Each page is measured at 390 and at 1280 px (``browser.LAYOUT_PROBE``: nothing runs off
the screen, spills out of or is cut by its box, no URL or date breaks inside a word),
checked with axe-core for WCAG 2.1 AA (no serious or critical violation) and
photographed; ``UNDOGATE_UPDATE_SCREENSHOTS=1`` writes the pictures to docs/screenshots/:

    UNDOGATE_UPDATE_SCREENSHOTS=1 .venv/bin/python -m pytest tests/test_web_pages_browser.py

Each sentence the review UI once got wrong has its own test here, reading the page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.auth import Keyring
from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.jobs import JobState
from undogate.service import Service

from .browser import (
    ARTIFACTS,
    ServedApp,
    accessibility_problems,
    chromium_missing,
    layout_problems,
    save_shot,
    served,
    tab_to,
)
from .collections_world import CONTACTS, contacts, record_passing_check
from .test_web_browser import TIMEOUT_MS, Watched
from .worlds import DOCUMENT, RECORD, LocalGateway, prepare_via_api, resource, review_app

_missing = chromium_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")
sync_api = pytest.importorskip("playwright.sync_api")

WIDTHS = {"": 1280, "-phone": 390}
#: Every page of the walkthrough, as its screenshot is named (docs/screenshots/NAME.png).
PAGES = (
    "signin", "inbox", "agents", "jobs", "job", "preview", "receipt", "preview-stale",
    "reject", "job-rejected", "inbox-reject", "preview-irreversible", "undo-acceptance",
    "preview-undo-create", "webhooks", "passkeys-ip", "refusal-not-found", "refusal-expired",
)  # fmt: skip
SECRET_ENV = "UNDOGATE_TEST_WEBHOOK_SECRET"
# A line no space breaks: the diff must scroll it, with a scrollbar, never cut it.
LONG_TOKEN = "sha256:" + "0123456789abcdef" * 10
LONG_TIER = "platinum with priority support, a named account manager and quarterly reviews"
LITERAL = "lead\u27e8U+200B\u27e9"  # what an agent can type: the marker's look, as text
REAL = "lead\u200b"  # the character itself


@dataclass
class Tour:
    site: ServedApp
    gateway: LocalGateway
    server: ContractServer
    keys: dict[str, str]
    owner: str

    def prepare(self, summary: str, *changes: dict[str, Any]) -> str:
        with httpx.Client(base_url=self.site.url, timeout=30, trust_env=False) as client:
            return prepare_via_api(
                client, self.keys["agent"], {"summary": summary, "changes": list(changes)}
            )

    def state(self, job_id: str) -> JobState:
        return self.gateway.get_job(self.owner, job_id).state


@pytest.fixture
def tour(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> Iterator[Tour]:
    fields = ["status", "owner", "tier", "balance", "website"]
    config: Config = parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": [
                resource(server, "customer", RECORD, fields=fields),
                resource(server, "notes", DOCUMENT, kind="webdav_text"),
                contacts(server),
                contacts(
                    server,
                    "contacts-copy",
                    path="/collections/contacts-copy",
                    test_copy_of="contacts",
                ),
            ],
            "agents": [{"id": "account-assistant", "tools": ["prepare_changes"]}],
            "webhooks": {
                "endpoints": [
                    {
                        "id": "ops-chat",
                        "url": "http://127.0.0.1:9/hooks/undogate",
                        "secret_env": SECRET_ENV,
                        "allow_loopback_http": True,
                    }
                ]
            },
        }
    )
    gw = open_gateway(config, environ={SECRET_ENV: "whsec_" + "QUJD" * 8})
    keyring = Keyring(gw.ledger, known_agents=lambda: {"account-assistant"})
    alice = keyring.create_operator(label="Alice Reviewer")
    agent = keyring.create_agent_token(
        owner_id=alice.credential.id, agent_id="account-assistant", label="assistant"
    )
    with served(review_app(Service(gw, keyring))) as site:
        yield Tour(site, gw, server, {"alice": alice.key, "agent": agent.key}, alice.credential.id)


def reviewer(browser: Any, tour: Tour, *, width: int = 1280, host: str = "127.0.0.1") -> Watched:
    """A browser tab signed in as alice, ``width`` px wide."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    w = Watched(context.new_page())
    base = tour.site.url.replace("127.0.0.1", host)
    w.page.goto(f"{base}/signin")
    w.page.get_by_label("Operator key").fill(tour.keys["alice"])
    w.page.get_by_role("button", name="Sign in").click()
    w.page.wait_for_url(f"{base}/inbox")
    return w


def preview(page: Any, tour: Tour, job_id: str, verb: str = "apply") -> str:
    page.goto(f"{tour.site.url}/jobs/{job_id}")
    page.get_by_role("button", name=f"Preview {verb}").click()
    page.wait_for_url(f"{tour.site.url}/jobs/{job_id}/previews/**")
    return str(page.url)


def confirm(page: Any, tour: Tour, job_id: str) -> None:
    if page.locator("#acknowledge").count():
        page.locator("#acknowledge").check()
    page.locator("#confirm").click()
    page.wait_for_url(f"{tour.site.url}/jobs/{job_id}/receipt")


def record_job(tour: Tour) -> str:
    """A job on the record and the document, with text that tests every wrap rule."""
    return tour.prepare(
        "Promote Ada to customer, hand her to Lee, note the renewal.",
        {
            "resource": "customer",
            "set": {
                "status": "customer",
                "owner": "lee",
                "tier": LONG_TIER,
                "website": "https://accounts.example.com/customers/records/customer-123",
            },
            "assertion_kind": "observed",
        },
        {
            "resource": "notes",
            "text": "# Account notes\n\n- Ada prefers email before noon.\n"
            f"- Renewal is due in **March**; Lee owns it now.\n- Contract digest {LONG_TOKEN}\n",
        },
    )


def measure(
    context_pages: dict[str, Any], name: str, url: str, seen: dict[str, Any], status: int = 200
) -> None:
    """Open ``url`` at each width: lay it out, check it, photograph it (the inbox's
    pictures in the docs come from tests/test_web_inbox_browser.py, with 104 jobs)."""
    for suffix, page in context_pages.items():
        response = page.goto(url)
        assert response is not None and response.status == status, (name, url)
        for details in page.locator("details.long").all():
            details.evaluate("d => d.open = true")  # every exact value shown, then measured
        seen[f"{name}{suffix}"] = {
            "layout": layout_problems(page),
            "axe": accessibility_problems(page),
        }
        save_shot(page, f"{name}{suffix}", docs=name != "inbox")


def test_every_walkthrough_page_fits_390_and_1280_and_passes_axe(browser: Any, tour: Tour) -> None:
    wide = reviewer(browser, tour)
    narrow = Watched(browser.new_context(viewport={"width": 390, "height": 844}).new_page())
    narrow.page.context.add_cookies(wide.page.context.cookies())  # one session: its previews
    pages = {"": wide.page, "-phone": narrow.page}
    url = tour.site.url
    seen: dict[str, Any] = {}

    anonymous = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    anonymous_phone = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    measure({"": anonymous, "-phone": anonymous_phone}, "signin", f"{url}/signin", seen)

    job = record_job(tour)
    stale = tour.prepare(
        "Mark Ada as churned.", {"resource": "customer", "set": {"status": "churned"}}
    )
    rejected = tour.prepare(
        "Hand Ada to Sam.", {"resource": "customer", "set": {"owner": "sam-the-second"}}
    )
    created = tour.prepare(
        "Add Ann as a contact.",
        {
            "resource": "contacts",
            "create": {"email": "ann@example.com", "name": "Ann"},
            "id": "ann",
        },
    )
    measure(pages, "inbox", f"{url}/inbox", seen)
    measure(pages, "agents", f"{url}/agents", seen)
    measure(pages, "jobs", f"{url}/agents/account-assistant", seen)
    measure(pages, "job", f"{url}/jobs/{job}", seen)
    measure(pages, "preview", preview(wide.page, tour, job), seen)
    preview(wide.page, tour, job)
    confirm(wide.page, tour, job)
    measure(pages, "receipt", f"{url}/jobs/{job}/receipt", seen)
    measure(pages, "preview-stale", preview(wide.page, tour, stale), seen)
    measure(pages, "reject", f"{url}/jobs/{rejected}/reject", seen)
    wide.page.goto(f"{url}/jobs/{rejected}/reject")
    wide.page.get_by_label("Reason").fill("Sam is away until March; ask again then.")
    wide.page.get_by_role("button", name="Reject this job").click()
    wide.page.wait_for_url(f"{url}/jobs/{rejected}")
    measure(pages, "job-rejected", f"{url}/jobs/{rejected}", seen)
    measure(pages, "inbox-reject", f"{url}/inbox/reject?view=waiting", seen)

    measure(pages, "preview-irreversible", preview(wide.page, tour, created), seen)
    preview(wide.page, tour, created)
    confirm(wide.page, tour, created)
    record_passing_check(tour.gateway, tour.gateway.config)
    measure(pages, "undo-acceptance", f"{url}/resources/contacts/undo", seen)
    wide.page.goto(f"{url}/resources/contacts/undo")
    wide.page.get_by_role("button", name="Accept the verified undo").click()
    wide.page.wait_for_url(f"{url}/resources/contacts/undo")
    measure(pages, "preview-undo-create", preview(wide.page, tour, created, "undo"), seen)

    measure(pages, "webhooks", f"{url}/webhooks", seen)
    measure(pages, "passkeys-ip", f"{url}/passkeys", seen)
    measure(pages, "refusal-not-found", f"{url}/jobs/job_nothing_here", seen, 404)
    measure(pages, "refusal-expired", f"{url}/jobs/{job}/previews/gone", seen, 404)

    problems = {name: found for name, found in seen.items() if found["layout"] or found["axe"]}
    assert problems == {}, json.dumps(problems, indent=1)
    assert set(seen) == {f"{name}{suffix}" for name in PAGES for suffix in WIDTHS}
    for w in (wide, narrow):
        w.assert_inert()


def _main(page: Any) -> str:
    return str(page.inner_text("main"))


def test_the_undo_of_a_collection_create_previews_deleting_the_record(
    browser: Any, tour: Tour
) -> None:
    job = tour.prepare(
        "Add Ann.", {"resource": "contacts", "create": {"email": "ann@example.com"}, "id": "ann"}
    )
    page = reviewer(browser, tour).page
    preview(page, tour, job)
    confirm(page, tour, job)
    record_passing_check(tour.gateway, tour.gateway.config)
    page.goto(f"{tour.site.url}/resources/contacts/undo")
    page.get_by_role("button", name="Accept the verified undo").click()
    page.wait_for_url(f"{tour.site.url}/resources/contacts/undo")
    preview(page, tour, job, "undo")
    main = _main(page)
    assert "Deletes record ann, which this job created" in main
    assert "it exists now" in main
    for untrue in ("(new record)", "every value is new", "does not exist", "null"):
        assert untrue not in main, untrue
    removed = page.locator(".record-op.delete table.fields")
    assert "Value removed" in removed.inner_text()
    assert '"ann@example.com"' in removed.inner_text()  # what will be removed, shown
    assert set(tour.server.collection_records(CONTACTS)) == {"ann"}  # nothing sent yet


def test_after_an_undo_finished_the_receipt_says_undone_not_started(
    browser: Any, tour: Tour
) -> None:
    job = tour.prepare("Promote Ada.", {"resource": "customer", "set": {"status": "customer"}})
    page = reviewer(browser, tour).page
    preview(page, tour, job)
    confirm(page, tour, job)
    preview(page, tour, job, "undo")
    confirm(page, tour, job)
    assert tour.state(job) is JobState.UNDONE
    for path in ("/receipt", ""):
        page.goto(f"{tour.site.url}/jobs/{job}{path}")
        main = _main(page)
        assert "This job was undone: its undo finished" in main
        assert "has started" not in main
        assert "Reversible: undo patches back" not in main  # undone, nothing left to undo
        assert "Undone: the undo of this change landed" in main


def test_nothing_ran_no_receipt_link_and_a_rejected_job_says_why(browser: Any, tour: Tour) -> None:
    job = tour.prepare("Promote Ada.", {"resource": "customer", "set": {"status": "customer"}})
    page = reviewer(browser, tour).page
    page.goto(f"{tour.site.url}/jobs/{job}")
    assert page.get_by_role("link", name="The receipt of what ran").count() == 0  # prepared
    page.get_by_role("link", name="Reject job…").click()
    page.wait_for_url(f"{tour.site.url}/jobs/{job}/reject")
    assert "Reject job" in page.inner_text("h1")  # it asks first
    assert tour.state(job) is JobState.PREPARED
    page.get_by_label("Reason").fill("Ada asked to wait.")
    page.get_by_role("button", name="Reject this job").click()
    page.wait_for_url(f"{tour.site.url}/jobs/{job}")
    main = _main(page)
    assert "The reviewer's reason: Ada asked to wait." in main
    assert "Never applied: the job was rejected, so there is nothing to undo." in main
    assert "Now: never written" in main and "not written yet" not in main
    assert "Reversible" not in main
    assert page.get_by_role("link", name="The receipt of what ran").count() == 0  # rejected


def test_a_stale_preview_says_it_once_and_names_undogates_own_job(browser: Any, tour: Tour) -> None:
    stale = tour.prepare("Churn Ada.", {"resource": "customer", "set": {"status": "churned"}})
    ours = tour.prepare("Promote Ada.", {"resource": "customer", "set": {"status": "customer"}})
    page = reviewer(browser, tour).page
    preview(page, tour, ours)
    confirm(page, tour, ours)
    preview(page, tour, stale)
    box = page.locator(".blockers")
    said = box.inner_text()
    assert "This apply cannot be confirmed" in said
    sentence = "The values this job would replace have changed since it was prepared."
    assert _main(page).count("changed since it was prepared") == 1  # the point, once
    assert sentence in said
    for line in box.locator("p").all_inner_texts():  # every sentence starts with a capital
        assert line.strip()[0].isupper(), line
    assert "someone else" not in _main(page).lower()
    link = box.get_by_role("link", name=ours)
    assert link.get_attribute("href") == f"/jobs/{ours}"
    assert "undogate's own job" in said
    expected = box.locator("table.expected").inner_text()
    assert '"lead"' in expected and '"customer"' in expected  # what it expected, and now
    assert page.get_by_role("button", name=re.compile("Preview again")).count() == 0
    assert page.locator("#confirm").count() == 0
    actions = page.locator(".decide .actions").inner_text()
    assert actions.index("Reject job") < actions.index("Back to the job")


def test_an_outside_edit_is_not_blamed_on_a_job(browser: Any, tour: Tour) -> None:
    stale = tour.prepare("Churn Ada.", {"resource": "customer", "set": {"status": "churned"}})
    ours = tour.prepare("Promote Ada.", {"resource": "customer", "set": {"status": "customer"}})
    page = reviewer(browser, tour).page
    preview(page, tour, ours)
    confirm(page, tour, ours)
    tour.server.set_field(RECORD, "/status", "prospect")  # after it: an outside edit
    preview(page, tour, stale)
    said = page.locator(".blockers").inner_text()
    assert ours not in said and "undogate's own job" not in said
    assert '"prospect"' in page.locator(".blockers table.expected").inner_text()


def test_at_an_ip_address_the_passkeys_page_gives_the_address_that_works(
    browser: Any, tour: Tour
) -> None:
    page = reviewer(browser, tour).page
    page.goto(f"{tour.site.url}/passkeys")
    said = page.locator("#passkey-site").inner_text()
    assert "127.0.0.1 is an IP address, and an IP address cannot be a passkey's site" in said
    working = f"http://localhost:{tour.site.port}/passkeys"
    assert page.locator("#passkey-site-link").get_attribute("href") == working
    assert page.get_by_role("button", name="Register a passkey").count() == 0  # no dead click
    assert "preview again" not in _main(page).lower()  # this page has no preview
    there = reviewer(browser, tour, host="localhost").page
    there.goto(working)
    assert there.locator("#passkey-site").count() == 0
    # the browser's refusal, as at an address it will not use: the page says what to do here
    there.evaluate(
        "() => { navigator.credentials.create = () => Promise.reject("
        "new DOMException('refused', 'SecurityError')); }"
    )
    there.get_by_label("Enrolment code").fill("ABCD-EFGH")
    there.get_by_role("button", name="Register a passkey").click()
    there.wait_for_selector("#passkey-status[data-state=refused]")
    status = there.inner_text("#passkey-status")
    assert "nothing was sent. Try again." in status and "preview" not in status.lower()


def test_a_real_invisible_character_cannot_be_faked_by_text(browser: Any, tour: Tour) -> None:
    job = tour.prepare(
        "Two leads.",
        {"resource": "customer", "set": {"status": LITERAL, "owner": REAL}},
    )
    page = reviewer(browser, tour).page
    page.goto(f"{tour.site.url}/jobs/{job}")
    rows = page.locator("#change-1 ~ .values table.fields tbody tr")
    literal = rows.filter(has=page.locator("th", has_text="status")).locator("td").nth(1)
    real = rows.filter(has=page.locator("th", has_text="owner")).locator("td").nth(1)
    assert literal.locator(".inv").count() == 0
    assert "\u27e8U+200B\u27e9" in literal.inner_text()
    marker = real.locator(".inv")
    assert marker.count() == 1 and "U+200B" in marker.inner_text()
    assert "\u200b" not in real.inner_text()
    assert marker.locator(".sr").inner_text().strip() == "invisible character"
    looks = marker.evaluate(
        "el => [getComputedStyle(el).backgroundColor, getComputedStyle(el).color]"
    )
    plain = literal.locator("code").evaluate("el => getComputedStyle(el).backgroundColor")
    assert looks[0] != plain and looks[0] != "rgba(0, 0, 0, 0)"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#change-1 ~ .values").screenshot(path=str(ARTIFACTS / "marker.png"))


def test_every_review_action_works_from_the_keyboard(browser: Any, tour: Tour) -> None:
    job = tour.prepare("Promote Ada.", {"resource": "customer", "set": {"status": "customer"}})
    other = tour.prepare("Hand Ada to Kim.", {"resource": "customer", "set": {"owner": "kim"}})
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{tour.site.url}/signin")
    tab_to(page, "")  # the key field has no text of its own
    page.keyboard.type(tour.keys["alice"])
    page.keyboard.press("Enter")
    page.wait_for_url(f"{tour.site.url}/inbox")
    page.goto(f"{tour.site.url}/jobs/{job}")
    tab_to(page, "Preview apply")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{tour.site.url}/jobs/{job}/previews/**")
    tab_to(page, "Confirm apply")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{tour.site.url}/jobs/{job}/receipt")
    assert tour.state(job) is JobState.APPLIED
    page.goto(f"{tour.site.url}/jobs/{job}")
    tab_to(page, "Preview undo")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{tour.site.url}/jobs/{job}/previews/**")
    tab_to(page, "Confirm undo")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{tour.site.url}/jobs/{job}/receipt")
    assert tour.state(job) is JobState.UNDONE
    page.goto(f"{tour.site.url}/jobs/{other}")
    tab_to(page, "Reject job…")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{tour.site.url}/jobs/{other}/reject")
    tab_to(page, "")  # the reason field
    page.keyboard.type("Not now.")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{tour.site.url}/jobs/{other}")
    assert tour.state(other) is JobState.REJECTED
    tab_to(page, "Sign out")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{tour.site.url}/signin?signed_out=1")
    context.close()


def test_a_stopped_agents_waiting_job_says_it_is_held_before_the_click(
    browser: Any, tour: Tour
) -> None:
    job = tour.prepare("Promote Ada.", {"resource": "customer", "set": {"status": "customer"}})
    page = reviewer(browser, tour).page
    url = tour.site.url
    page.goto(f"{url}/agents/account-assistant/rewind")
    page.get_by_role("button", name="Stop the agent").click()
    page.wait_for_selector("text=Resume the agent")
    page.goto(f"{url}/agents")
    assert "Stopped since" in page.locator(".cards .stopped").inner_text()
    page.goto(f"{url}/agents/account-assistant")
    assert "waiting jobs are held from confirmation" in page.locator(".stopped").inner_text()
    page.goto(f"{url}/jobs/{job}")
    assert "this job is held from confirmation" in page.locator(".held").inner_text()
    preview(page, tour, job)
    held = page.locator("#held").inner_text()
    assert "Its agent account-assistant was stopped" in held and "cannot be confirmed now" in held
    assert page.locator("#confirm").count() == 0  # no button that would only be refused
    assert page.locator("#countdown").count() == 0  # nor a time to confirm it by
    assert page.get_by_role("link", name="Back to the job").count() == 1
    assert tour.state(job) is JobState.PREPARED


def test_an_accepted_uncertain_write_says_what_was_seen_in_words(browser: Any, tour: Tour) -> None:
    job = tour.prepare("Gold tier.", {"resource": "customer", "set": {"tier": "gold"}})
    page = reviewer(browser, tour).page
    tour.server.arm("apply_then_drop", RECORD)
    preview(page, tour, job)
    confirm(page, tour, job)
    assert tour.state(job) is JobState.NEEDS_REVIEW
    receipt = _main(page)
    assert "The job now needs review: an outcome is uncertain." in receipt
    page.goto(f"{tour.site.url}/jobs/{job}")
    page.get_by_role("button", name="Preview: accept observed state").click()
    page.wait_for_url(f"{tour.site.url}/jobs/{job}/previews/**")
    assert "The job needs review: an outcome is uncertain." in _main(page)
    assert "is needs review" not in _main(page)
    confirm(page, tour, job)
    seen = page.locator("table.actions td[data-label='Outcome'] .observed").inner_text()
    assert seen == "Accepted as observed: the after-values were in place (it looked applied)."
    assert "looks_applied" not in _main(page)


def test_a_record_that_does_not_exist_has_no_version_and_says_so(browser: Any, tour: Tour) -> None:
    job = tour.prepare("Add Ann.", {"resource": "contacts", "create": {"email": "ann@example.com"}})
    page = reviewer(browser, tour).page
    page.goto(f"{tour.site.url}/jobs/{job}")
    versions = page.locator(".change .versions").inner_text()
    assert versions == "Version when prepared (none: it did not exist)"
    preview(page, tour, job)
    meta = page.locator(".change .meta").first.inner_text()
    assert meta.endswith("current version (none: it does not exist now)"), meta
    assert "absent" not in meta


def test_nothing_found_says_where_to_look_whatever_was_asked_for(browser: Any, tour: Tour) -> None:
    page = reviewer(browser, tour).page
    for path in ("/jobs/job_nothing", "/rewinds/rw_nothing", "/agents/nobody"):
        response = page.goto(f"{tour.site.url}{path}")
        assert response is not None and response.status == 404
        said = _main(page)
        assert "Check the address, or find what you were looking for from the inbox" in said
        assert "open the job from its list" not in said


def test_an_uncertain_change_says_no_undo_until_its_outcome_is_accepted(
    browser: Any, tour: Tour
) -> None:
    job = tour.prepare("Gold tier.", {"resource": "customer", "set": {"tier": "gold"}})
    page = reviewer(browser, tour).page
    tour.server.arm("apply_then_drop", RECORD)
    preview(page, tour, job)
    confirm(page, tour, job)
    page.goto(f"{tour.site.url}/jobs/{job}")
    rev = page.locator(".change .rev").inner_text()
    assert rev.startswith("Its outcome is uncertain: nothing can be undone until a reviewer")
    assert page.get_by_role("button", name="Preview undo").count() == 0  # as it says


def test_accepting_an_uncertain_write_shows_before_wrote_and_now(browser: Any, tour: Tour) -> None:
    page = reviewer(browser, tour).page

    def accept_preview(change: dict[str, Any], path: str) -> str:
        job = tour.prepare("Uncertain.", change)
        tour.server.arm("apply_then_drop", path)
        preview(page, tour, job)
        confirm(page, tour, job)
        assert tour.state(job) is JobState.NEEDS_REVIEW
        return job

    record = accept_preview({"resource": "customer", "set": {"tier": "gold"}}, RECORD)
    document = accept_preview({"resource": "notes", "text": "# Gold\n"}, DOCUMENT)
    tour.server.set_field(RECORD, "/tier", "silver")  # neither side now
    for job in (record, document):
        page.goto(f"{tour.site.url}/jobs/{job}")
        page.get_by_role("button", name="Preview: accept observed state").click()
        page.wait_for_url(f"{tour.site.url}/jobs/{job}/previews/**")
        assert "Current against" not in _main(page)
        if job == record:
            table = page.locator("table.observed")
            heads = table.locator("thead th").all_inner_texts()
            assert heads == ["Field", "Before the job", "The job wrote", "Now"]
            assert table.locator("tbody tr td").all_inner_texts() == ["null", '"gold"', '"silver"']
        else:  # the job's text against what is there: it looks applied, so identical
            assert "It currently looks applied" in _main(page)
            assert "The texts are identical." in _main(page)
