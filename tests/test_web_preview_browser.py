"""The preview's exact requests in real Chromium, at 1280 and at 390 px: every byte the
confirm sends is on the page, and at 390 px nothing runs off the screen or hides inside
a box. Writes the README's screenshots of it (docs/screenshots/preview-requests*.png)
when run with UNDOGATE_UPDATE_SCREENSHOTS=1:

    UNDOGATE_UPDATE_SCREENSHOTS=1 .venv/bin/python -m pytest tests/test_web_preview_browser.py
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.contract_server import ContractServer

from .browser import ServedApp, chromium_missing, save_shot, served
from .test_web_browser import open_page, prepare, sign_in
from .worlds import WebWorld, prepare_body

_missing = chromium_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")

LONG_TIER = " ".join(["platinum-with-priority-support"] * 8)
# A real invisible character as a page's text reads (the marker element's words).
MARKED = re.compile(r"\s*invisible character\s*U\+([0-9A-F]{4,6})")


def unmarked(text: str) -> str:
    """Page text with each marker read back as the character it stands for."""
    return MARKED.sub(lambda m: chr(int(m.group(1), 16)), text)


# Elements in <main> whose right edge is past the viewport, unless a scrolling box
# inside the viewport holds them; and exact-text boxes that hide part of their text.
OVERFLOW_PROBE = """
() => {
  const width = document.documentElement.clientWidth;
  const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const held = (el) => {
    for (let p = el.parentElement; p && p.tagName !== 'MAIN'; p = p.parentElement) {
      if (scrolls(p) && p.getBoundingClientRect().right <= width + 1) return true;
    }
    return false;
  };
  const named = (el) => `${el.tagName}.${el.className}: ${el.textContent.slice(0, 40)}`;
  const out = [];
  for (const el of document.querySelectorAll('main *')) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > width + 1 && !held(el)) out.push('off screen ' + named(el));
  }
  const exact = '.requests .value, .body-line, .request-line code, .fields .value';
  for (const el of document.querySelectorAll(exact)) {
    const hidden = el.offsetParent !== null && el.scrollWidth > el.clientWidth + 1;
    if (hidden) out.push('partly hidden ' + named(el));
  }
  return {page: document.documentElement.scrollWidth - width, elements: out};
}
"""


@pytest.fixture
def world(server: ContractServer, data_dir: Path, open_gateway: Any) -> WebWorld:
    from .worlds import web_world

    return web_world(server, data_dir, open_gateway)


@pytest.fixture
def site(world: WebWorld) -> Iterator[ServedApp]:
    with served(world.app) as running:
        yield running


def dry_run(site: ServedApp, world: WebWorld, job_id: str, token: str) -> list[dict[str, Any]]:
    made = httpx.post(
        f"{site.url}/api/v1/jobs/{job_id}/confirm",
        json={"preview_token": token, "dry_run": True},
        headers={"Authorization": f"Bearer {world.keys['alice']}"},
        timeout=30,
    )
    assert made.status_code == 200, made.text
    requests: list[dict[str, Any]] = made.json()["requests"]
    return requests


def assert_fits(page: Any) -> None:
    found = page.evaluate(OVERFLOW_PROBE)
    assert found["page"] <= 0, f"the page scrolls sideways by {found['page']} px"
    assert found["elements"] == [], found["elements"]


def test_the_preview_shows_the_exact_requests_and_fits_a_phone(
    browser: Any,
    world: WebWorld,
    site: ServedApp,
) -> None:
    body = prepare_body(summary="Promote Ada, note the renewal, fix the account notes.")
    body["changes"][0]["set"].update(
        {"tier": LONG_TIER, "notes": {"source": "web", "renewal": "March"}}
    )
    body["changes"].append(
        {
            "resource": "notes",
            "text": "# Account notes\n\n- Ada prefers email before noon.\n"
            "- Renewal is due in **March**; Lee\u200b owns it now.\n",
        }
    )
    job_id = prepare(site, world, body)
    w = open_page(browser)
    page = w.page
    sign_in(page, site, world.keys["alice"])
    page.goto(f"{site.url}/jobs/{job_id}")
    page.get_by_role("button", name="Preview apply").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/previews/**")
    token = page.locator("input[name=preview_token]").get_attribute("value")
    planned = dry_run(site, world, job_id, token)
    assert [r["method"] for r in planned] == ["PATCH", "PUT"]

    shown = page.locator(".requests .request")
    assert shown.count() == 2
    for i, request in enumerate(planned):
        item = shown.nth(i)
        assert item.locator(".request-line").inner_text() == f"{request['method']} {request['url']}"
        for name, value in request["headers"].items():
            assert f"{name}\t{value}" in item.locator("table.headers").inner_text()
        lines = item.locator(".body-line").all_inner_texts()
        assert unmarked("\n".join(lines)) == request["body"].rstrip("\n")
    assert "application/json-patch+json" in shown.nth(0).inner_text()
    assert LONG_TIER in shown.nth(0).locator(".exact").inner_text()
    folded = page.locator(".fields details.long").first
    assert "characters: show all" in folded.locator("summary").inner_text()
    assert not folded.locator("summary ~ code").is_visible()
    assert page.locator(".fields table.members").count() == 1
    save_shot(page, "preview-requests", docs=True)
    assert world.server.write_count("/records/customer-123") == 0

    narrow = open_page(browser, width=390, height=844)
    narrow.page.context.add_cookies(page.context.cookies())
    narrow.page.goto(page.url)
    phone = narrow.page
    assert phone.locator(".requests .request").count() == 2
    assert_fits(phone)
    for selector in (".value", ".body-line"):
        style = phone.locator(selector).first.evaluate(
            "el => [getComputedStyle(el).overflowWrap, getComputedStyle(el).wordBreak]"
        )
        assert style == ["normal", "normal"], (selector, style)  # never mid-word
    phone.locator(".fields details.long summary").first.click()
    assert phone.locator(".fields details.long[open]").count() == 1
    assert_fits(phone)  # the long value, opened, wraps between its words
    save_shot(phone, "preview-requests-phone", docs=True)
    phone.goto(f"{site.url}/jobs/{job_id}")
    assert_fits(phone)
    w.assert_inert()
    narrow.assert_inert()
    phone.context.close()
    page.context.close()
