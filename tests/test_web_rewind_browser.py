"""A rewind in real headless Chromium (docs/rewind.md): from the agent's page, the plan
as one table with a blocked row explained, one preview, one confirmation skipping the
blocked step, by keyboard, at 1280 and 390 px, accessible and never cut off. With
``UNDOGATE_UPDATE_SCREENSHOTS=1`` it rewrites docs/screenshots/rewind.png and
rewind-phone.png."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.jobs import Actor, ChangeRequest, JobState, PrepareRequest

from .browser import (
    accessibility_problems,
    chromium_missing,
    layout_problems,
    save_shot,
    served,
    tab_to,
)
from .test_web_browser import open_page, sign_in
from .worlds import RECORD, LocalGateway, WebWorld, confirmed, web_world

_missing = chromium_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")


def three_applied(world: WebWorld, server: ContractServer) -> list[str]:
    """Three of alice's jobs on the customer, applied; the last one's field then edited
    outside the gateway (its step is blocked)."""
    owner = world.ids["alice"]
    agent = Actor("account-assistant", owner, "agent", "test")
    reviewer = Actor(owner, owner, "operator", "test")
    ids = []
    for field, value in (("status", "customer"), ("owner", "lee"), ("tier", "gold")):
        request = PrepareRequest(f"Set {field}", (ChangeRequest("customer", set={field: value}),))
        job_id = world.gateway.prepare(agent, agent.id, request).job.id
        assert confirmed(world.gateway, job_id, actor=reviewer).job.state is JobState.APPLIED
        ids.append(job_id)
    server.set_field(RECORD, "/tier", "platinum")
    return ids


def check_page(page: Any) -> None:
    assert layout_problems(page) == {}
    assert accessibility_problems(page) == []


@pytest.mark.parametrize("width", [1280, 390])
def test_a_rewind_from_the_agents_page_by_keyboard(
    browser: Any,
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    width: int,
) -> None:
    world = web_world(server, data_dir, open_gateway)
    ids = three_applied(world, server)
    with served(world.app) as site:
        watched = open_page(browser, width=width, height=900)
        page = watched.page
        sign_in(page, site, world.keys["alice"])
        page.goto(f"{site.url}/agents/account-assistant")
        page.get_by_role("link", name="Undo this agent's work since…").click()
        page.wait_for_url(f"{site.url}/agents/account-assistant/rewind")
        check_page(page)
        page.get_by_label("Since").fill("1h")
        tab_to(page, "Make the plan")
        page.keyboard.press("Enter")
        page.wait_for_url(f"{site.url}/rewinds/**")
        rows = page.locator("#plan tbody tr")
        assert rows.count() == 3
        blocked = page.locator("#plan tr.verdict-blocked")
        assert blocked.count() == 1 and ids[2] in blocked.inner_text()
        assert "edited outside the gateway" in blocked.inner_text()
        assert '"platinum"' in blocked.inner_text()  # what it shows now, as exact text
        check_page(page)
        tab_to(page, "Preview the plan")
        page.keyboard.press("Enter")
        page.wait_for_selector("#confirm-rewind")
        assert page.locator("ol.request-list li.request").count() == 2
        check_page(page)
        save_shot(page, "rewind" if width == 1280 else "rewind-phone", docs=True)
        tab_to(page, "Leave the 1 blocked step(s) as they are and undo everything else")
        page.keyboard.press("Space")
        tab_to(page, "Undo 2 change(s)")
        page.keyboard.press("Enter")
        page.wait_for_selector("text=The plan ran")
        outcomes = page.locator("#plan tbody td[data-label='Outcome']").all_inner_texts()
        assert [o.strip() for o in outcomes] == ["skipped", "done", "done"]
        check_page(page)
        watched.assert_inert()
    record = server.get_record(RECORD)
    assert (record["status"], record["owner"], record["tier"]) == ("lead", "sam", "platinum")
