"""The review of a contact change and an event move in real Chromium, at 1280 and at 390
px, against real Radicale (basic auth): a property table (before → after per property,
times with their zone), and in the exact requests the PUT body as a line diff against
the document as read, then its exact bytes. Writes the docs' screenshots
(docs/screenshots/contact-change*.png, event-move*.png) when run with
UNDOGATE_UPDATE_SCREENSHOTS=1:

    UNDOGATE_UPDATE_SCREENSHOTS=1 .venv/bin/python -m pytest tests/test_dav_web_browser.py

The terminal shows the same table and the same diff (``undogate`` review verbs).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from undogate import views
from undogate.auth import Keyring
from undogate.cli.review import _render_preview, _render_requests, render_job
from undogate.jobs import Actor, Operation
from undogate.service import Service

from .browser import ServedApp, chromium_missing, save_shot, served
from .caldav_servers import DavCollections
from .dav_world import CONTACT, EVENT, dav_gateway, dav_resource, held, seed
from .test_web_browser import open_page, sign_in
from .test_web_preview_browser import assert_fits, dry_run
from .worlds import LocalGateway, prepare_via_api, review_app

_missing = chromium_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")

CONTACT_CHANGE = {
    "resource": "ada",
    "set": {
        "EMAIL": [
            {"value": "ada@analytical.example", "params": {"TYPE": "work"}},
            {"value": "ada@home.example", "params": {"TYPE": "home"}},
        ],
        "NOTE": "Met at the fair; prefers email before noon, then calls after three.",
    },
    "assertion_kind": "supplied",
}
EVENT_MOVE = {
    "resource": "review",
    "set": {
        "DTSTART": {"value": "20261205T150000", "params": {"TZID": "Europe/Paris"}},
        "DTEND": {"value": "20261205T163000", "params": {"TZID": "Europe/Paris"}},
    },
}


@dataclass
class DavSite:
    site: ServedApp
    gw: LocalGateway
    dav: DavCollections
    operator: str
    owner: Actor
    agent: str
    contact: str
    event: str

    def prepare(self, summary: str, change: dict[str, Any]) -> str:
        with httpx.Client(base_url=self.site.url, timeout=30, trust_env=False) as client:
            return prepare_via_api(client, self.agent, {"summary": summary, "changes": [change]})


@pytest.fixture
def dav_site(radicale: DavCollections, data_dir: Path) -> Iterator[DavSite]:
    contact, _ = seed(radicale, radicale.addressbook, CONTACT, ".vcf")
    event, _ = seed(radicale, radicale.calendar, EVENT, ".ics")
    with dav_gateway(
        data_dir,
        dav_resource(radicale, "ada", "vcard", contact, ["FN", "EMAIL", "TEL", "NOTE"]),
        dav_resource(radicale, "review", "icalendar", event, ["SUMMARY", "DTSTART", "DTEND"]),
    ) as gw:
        keyring = Keyring(gw.ledger, known_agents=lambda: {"account-assistant"})
        alice = keyring.create_operator(label="alice")
        agent = keyring.create_agent_token(
            owner_id=alice.credential.id, agent_id="account-assistant", label="assistant"
        )
        app = review_app(Service(gw, keyring))
        with served(app) as site:
            owner = Actor(alice.credential.id, alice.credential.id, "operator", "test")
            yield DavSite(site, gw, radicale, alice.key, owner, agent.key, contact, event)


def _preview(browser: Any, world: DavSite, job_id: str, width: int = 1280) -> Any:
    w = open_page(browser, width=width, height=900 if width > 400 else 844)
    sign_in(w.page, world.site, world.operator)
    w.page.goto(f"{world.site.url}/jobs/{job_id}")
    w.page.get_by_role("button", name="Preview apply").click()
    w.page.wait_for_url(f"{world.site.url}/jobs/{job_id}/previews/**")
    return w


def _rows(page: Any) -> dict[str, list[str]]:
    """The property table: property → its cells' text."""
    found: dict[str, list[str]] = {}
    for row in page.locator("table.fields tbody tr").all():
        name = row.locator("th").inner_text().split()[0]
        found[name] = [cell.inner_text() for cell in row.locator("td").all()]
    return found


def _check_requests(page: Any, planned: list[dict[str, Any]]) -> list[str]:
    """The request on the page is exactly the dry run's (its body CRLF line by line);
    the lines its diff adds and removes, returned."""
    (request,) = planned
    shown = page.locator(".requests .request")
    assert shown.count() == 1
    assert shown.locator(".request-line").inner_text() == f"PUT {request['url']}"
    assert "each ending CRLF" in shown.locator("details.body summary").inner_text()
    lines = shown.locator(".body-line").all_text_contents()
    assert "\r\n".join(lines) + "\r\n" == request["body"]
    changed = shown.locator(".body-diff .line.add, .body-diff .line.del").all()
    return [
        f"{c.locator('.op [aria-hidden]').inner_text()} {c.locator('.text').inner_text()}"
        for c in changed
    ]


def test_a_contact_change_reads_as_a_property_table_and_a_body_diff(
    browser: Any, dav_site: DavSite
) -> None:
    start = held(dav_site.dav, dav_site.contact)
    job_id = dav_site.prepare("Ada's new work email and a note from the fair", CONTACT_CHANGE)
    w = _preview(browser, dav_site, job_id)
    page = w.page
    rows = _rows(page)
    assert set(rows) == {"EMAIL", "NOTE"}
    head = page.locator("table.fields thead th").all_inner_texts()
    assert head == ["Property", "Current", "Planned"]  # a contact has properties, not fields
    assert "ada@old.example (TYPE=work)" in rows["EMAIL"][0]
    assert "ada@analytical.example (TYPE=work)" in rows["EMAIL"][1]
    token = page.locator("input[name=preview_token]").get_attribute("value")
    planned = dry_run(dav_site.site, _Keys(dav_site.operator), job_id, token)  # type: ignore[arg-type]
    changed = _check_requests(page, planned)
    assert any(c.startswith("- EMAIL;TYPE=work:ada@old.example") for c in changed), changed
    assert any(c.startswith("+ EMAIL;TYPE=work:ada@analytical.example") for c in changed)
    assert not any("FN:" in c or "TEL" in c for c in changed)  # untouched lines: context
    assert held(dav_site.dav, dav_site.contact) == start  # a preview writes nothing
    save_shot(page, "contact-change", docs=True)
    phone = open_page(browser, width=390, height=844)
    phone.page.context.add_cookies(page.context.cookies())
    phone.page.goto(page.url)
    assert_fits(phone.page)
    save_shot(phone.page, "contact-change-phone", docs=True)
    page.get_by_role("button", name="Confirm apply").click()
    page.wait_for_url(f"{dav_site.site.url}/jobs/{job_id}**")
    assert "applied" in page.locator("main").inner_text()
    w.assert_inert()
    phone.assert_inert()


def test_an_event_move_shows_its_times_with_their_zone(browser: Any, dav_site: DavSite) -> None:
    job_id = dav_site.prepare("Move the design review to Saturday", EVENT_MOVE)
    w = _preview(browser, dav_site, job_id)
    page = w.page
    rows = _rows(page)
    assert "2026-12-04 15:00 Europe/Paris" in rows["DTSTART"][0]
    assert "2026-12-05 15:00 Europe/Paris" in rows["DTSTART"][1]
    assert "2026-12-05 16:30 Europe/Paris" in rows["DTEND"][1]
    token = page.locator("input[name=preview_token]").get_attribute("value")
    planned = dry_run(dav_site.site, _Keys(dav_site.operator), job_id, token)  # type: ignore[arg-type]
    changed = _check_requests(page, planned)
    assert "+ DTSTART;TZID=Europe/Paris:20261205T150000" in changed
    assert not any("TZOFFSET" in c or "RRULE" in c for c in changed)  # VTIMEZONE untouched
    save_shot(page, "event-move", docs=True)
    phone = open_page(browser, width=390, height=844)
    phone.page.context.add_cookies(page.context.cookies())
    phone.page.goto(page.url)
    assert_fits(phone.page)
    save_shot(phone.page, "event-move-phone", docs=True)
    w.assert_inert()
    phone.assert_inert()


def test_the_terminal_shows_the_same_table_and_diff(dav_site: DavSite) -> None:
    job_id = dav_site.prepare("Move the design review to Saturday", EVENT_MOVE)
    job = dav_site.gw.ledger.load_job(job_id)
    assert job is not None
    console = Console(record=True, width=200)
    render_job(console, views.job_receipt(job))
    preview = dav_site.gw.preview(dav_site.owner, job_id, Operation.APPLY)
    _render_preview(console, views.preview_view(preview, job, 0.0))
    assert preview.token is not None
    dry = dav_site.gw.confirm(dav_site.owner, job_id, preview.token, dry_run=True)
    _render_requests(console, [views.request_view(r) for r in dry.requests])
    text = console.export_text()
    assert "2026-12-05 15:00 Europe/Paris" in text and "2026-12-04 15:00 Europe/Paris" in text
    assert "+ DTSTART;TZID=Europe/Paris:20261205T150000" in text
    assert "- DTSTART;TZID=Europe/Paris:20261204T150000" in text


class _Keys:
    """What ``dry_run`` needs of a world: the operator's key under ``alice``."""

    def __init__(self, key: str) -> None:
        self.keys = {"alice": key}
