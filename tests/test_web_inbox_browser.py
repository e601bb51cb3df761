"""The review inbox in real headless Chromium: the views, the filters, search by id,
keyset pages past the newest 100, the counts in the navigation, bulk reject confirmed
once, at 1280 and at 390 px. With ``UNDOGATE_UPDATE_SCREENSHOTS=1`` it rewrites
docs/screenshots/inbox.png and inbox-phone.png (the README shows them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.auth import Keyring
from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.jobs import Actor, ChangeRequest, JobState, Operation, PrepareRequest
from undogate.service import Service

from .browser import ServedApp, chromium_missing, save_shot, served
from .test_web_browser import open_page
from .worlds import DOCUMENT, RECORD, LocalGateway, resource, review_app

_missing = chromium_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")

JOBS = 104


@pytest.fixture
def inbox_site(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> Iterator[tuple[ServedApp, str, list[str]]]:
    """A served review UI whose operator has more than 100 jobs across two resources:
    waiting, one rejected, one quarantined (its write's outcome unknown)."""
    gw = open_gateway(
        parse_config(
            {
                "server": {"data_dir": str(data_dir)},
                "resources": [
                    resource(server, "customer", RECORD),
                    resource(server, "notes", DOCUMENT, kind="webdav_text"),
                ],
                "agents": [
                    {"id": "account-assistant", "tools": ["prepare_changes"]},
                    {"id": "other-agent", "tools": ["prepare_changes"]},
                ],
                "limits": {
                    "max_prepares_per_minute": 1000,
                    "prepare_burst": 500,
                    "max_unresolved_jobs_per_agent": 500,
                },
            }
        )
    )
    keyring = Keyring(gw.ledger, known_agents=lambda: {a.id for a in gw.config.agents})
    alice = keyring.create_operator(label="alice")
    owner = alice.credential.id
    agent = Actor("account-assistant", owner, "agent", "test")
    ids = []
    for n in range(JOBS):
        change = (
            ChangeRequest(resource_id="notes", text=f"# Account notes\n\nround {n}\n")
            if n % 10 == 0
            else ChangeRequest(resource_id="customer", set={"status": f"tier-{n}"})
        )
        ids.append(gw.prepare(agent, agent.id, PrepareRequest(f"Job {n}", (change,))).job.id)
    reviewer = Actor(owner, owner, "operator", "test")
    gw.reject(reviewer, ids[1], "superseded")
    server.arm("apply_then_500", RECORD)
    token = gw.preview(reviewer, ids[2], Operation.APPLY).token
    assert token is not None
    assert gw.confirm(reviewer, ids[2], token).job.state is JobState.NEEDS_REVIEW
    app = review_app(Service(gw, keyring))
    with served(app) as site:
        yield site, alice.key, ids


def _sign_in(page: Any, site: ServedApp, key: str) -> None:
    page.goto(f"{site.url}/signin")
    page.get_by_label("Operator key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{site.url}/inbox")


def _rows(page: Any) -> list[str]:
    return [str(t) for t in page.locator("#inbox tbody tr td:first-child code").all_inner_texts()]


def test_the_inbox_filters_pages_and_bulk_rejects_in_chromium(
    browser: Any, inbox_site: tuple[ServedApp, str, list[str]]
) -> None:
    site, key, ids = inbox_site
    watched = open_page(browser)
    page = watched.page
    _sign_in(page, site, key)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Inbox").click()
    page.wait_for_url(f"{site.url}/inbox")
    nav = page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name=f"{JOBS - 2} waiting").is_visible()
    assert nav.get_by_role("link", name="1 quarantined").is_visible()
    first = _rows(page)
    assert first == ids[::-1][:100]  # newest first, 100 a page
    page.goto(f"{site.url}/inbox?limit=12")  # the README's picture: a short page
    save_shot(page, "inbox", docs=True)
    page.goto(f"{site.url}/inbox")
    page.get_by_role("link", name="Older jobs").click()
    assert _rows(page) == ids[3::-1]  # the rest, by keyset after the 100th
    assert page.locator("#older").count() == 0
    page.get_by_role("link", name="Newest").click()
    assert _rows(page)[0] == ids[-1]
    # Filters: resource and state, then a view tab, then search by id.
    page.get_by_label("Resource").select_option("notes")
    page.get_by_label("State").select_option("prepared")
    page.get_by_role("button", name="Filter").click()
    notes = [ids[n] for n in range(JOBS) if n % 10 == 0][::-1]
    assert _rows(page) == notes
    page.get_by_role("navigation", name="Views").get_by_role("link", name="Quarantined").click()
    assert _rows(page) == [] and page.locator("#no-jobs").is_visible()  # notes: none
    page.goto(f"{site.url}/inbox?view=quarantined")
    assert _rows(page) == [ids[2]]
    assert page.locator("#inbox .state-quarantined").count() == 1
    page.goto(f"{site.url}/inbox?view=recent")
    page.get_by_label("Job id starts with").fill(ids[50][:12])
    page.get_by_role("button", name="Filter").click()
    found = _rows(page)
    assert ids[50] in found and all(r.startswith(ids[50][:12]) for r in found)
    page.get_by_label("Job id starts with").fill(ids[50])
    page.get_by_role("button", name="Filter").click()
    assert _rows(page) == [ids[50]]
    # Bulk reject of the waiting notes jobs: one confirmation page, one reason.
    page.goto(f"{site.url}/inbox?view=waiting&resource=notes")
    page.get_by_role("link", name="Reject these waiting jobs…").click()
    confirm = page.get_by_role("button", name=f"Reject {len(notes)} jobs")
    assert all(page.get_by_text(i, exact=True).is_visible() for i in notes)
    page.get_by_label("Reason for all of them").fill("stale: the notes were rewritten")
    confirm.click()
    page.wait_for_url(f"{site.url}/inbox?view=waiting")
    assert page.get_by_text(f"Rejected {len(notes)} of {len(notes)} jobs.").is_visible()
    assert nav.get_by_role("link", name=f"{JOBS - 2 - len(notes)} waiting").is_visible()
    watched.assert_inert()


def test_the_inbox_fits_a_phone(browser: Any, inbox_site: tuple[ServedApp, str, list[str]]) -> None:
    site, key, ids = inbox_site
    watched = open_page(browser, width=390, height=844)
    page = watched.page
    _sign_in(page, site, key)
    page.goto(f"{site.url}/inbox?view=waiting&limit=8")
    assert _rows(page) == [i for i in ids[::-1] if i not in (ids[1], ids[2])][:8]
    # Nothing is cut off: the page never scrolls sideways, and each job is a card
    # whose cells all sit inside the screen.
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, width
    for cell in page.locator("#inbox tbody tr").first.locator("td").all():
        box = cell.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    assert page.get_by_role("button", name="Filter").is_visible()
    save_shot(page, "inbox-phone", docs=True)
    watched.assert_inert()
