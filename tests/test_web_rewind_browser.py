"""A rewind in real headless Chromium (docs/rewind.md): from the agent's page, the plan
as one table with a blocked row explained, one preview, one confirmation skipping the
blocked step, by keyboard, at 1280 and 390 px, accessible and never cut off. A plan over
a resource that requires a passkey is confirmed from its page with the passkey (the
DevTools virtual authenticator); refused by the authenticator, or sent without it,
nothing is written and the page says why. With ``UNDOGATE_UPDATE_SCREENSHOTS=1`` it
rewrites docs/screenshots/rewind.png, rewind-passkey.png and their -phone.png."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.jobs import Actor, ChangeRequest, JobState, Operation, PrepareRequest

from .browser import (
    accessibility_problems,
    chromium_missing,
    layout_problems,
    save_shot,
    served,
    tab_to,
)
from .serving import cli
from .test_passkeys_browser import SEND_UNSIGNED, Reviewer, prepare
from .test_web_browser import open_page, sign_in
from .worlds import DOCUMENT, RECORD, LocalGateway, WebWorld, confirmed, web_world

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


# The status as it was before the first refusal, so that waiting for the next one waits.
ASKING_AGAIN = "() => document.getElementById('passkey-status').removeAttribute('data-state')"


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
        # Two fields of one record: each still shows what its job wrote, whatever the
        # step before it on the record undoes.
        why = page.locator("#plan tr.verdict-undo td[data-label='Why']").all_inner_texts()
        assert (
            why
            == ["It still shows what this job wrote, so its undo puts back what was before."] * 2
        )
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


def test_every_step_of_a_plan_says_why_even_stacked_on_a_phone(
    browser: Any,
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
) -> None:
    """Each row says why, true for where its change stands: an undo whose change still
    shows what its job wrote, one that will once the newer step above it is undone, one
    already undone, a document edited outside (its text now against the job's). At 390
    px, where each cell carries its column's label, no label stands above nothing."""
    world = web_world(server, data_dir, open_gateway)
    owner = world.ids["alice"]
    agent = Actor("account-assistant", owner, "agent", "test")
    reviewer = Actor(owner, owner, "operator", "test")

    def applied(summary: str, change: ChangeRequest) -> str:
        job_id = world.gateway.prepare(agent, agent.id, PrepareRequest(summary, (change,))).job.id
        assert confirmed(world.gateway, job_id, actor=reviewer).job.state is JobState.APPLIED
        return job_id

    undone = applied("Owner Lee", ChangeRequest("customer", set={"owner": "lee"}))
    done = confirmed(world.gateway, undone, Operation.UNDO, actor=reviewer)
    assert done.job.state is JobState.UNDONE
    older = applied("Customer", ChangeRequest("customer", set={"status": "customer"}))
    newer = applied("VIP", ChangeRequest("customer", set={"status": "vip"}))
    notes = applied("Notes", ChangeRequest("notes", text="# Renewal in March\n"))
    server.set_text(DOCUMENT, "# Edited by a colleague\n", "text/markdown")
    with served(world.app) as site:
        watched = open_page(browser, width=390, height=844)
        page = watched.page
        sign_in(page, site, world.keys["alice"])
        page.goto(f"{site.url}/agents/account-assistant/rewind")
        page.get_by_label("Since").fill("1h")
        page.get_by_role("button", name="Make the plan").click()
        page.wait_for_url(f"{site.url}/rewinds/**")
        why = {
            row.locator("td[data-label='Job']").inner_text(): row.locator(
                "td[data-label='Why']"
            ).inner_text()
            for row in page.locator("#plan tbody tr").all()
        }
        assert set(why) == {notes, newer, older, undone}
        holds = "It still shows what this job wrote, so its undo puts back what was before."
        assert why[newer] == holds
        assert why[older].startswith("Once step 2 is undone, it shows what this job wrote again")
        assert why[undone] == "This job's undo of this change landed already: nothing to send."
        assert why[notes].startswith('Now: "# Edited by a colleague\\n"; the job wrote "# Renewal')
        assert "notes was edited outside the gateway" in why[notes]  # its id, as written
        state = page.locator("#plan-state").inner_text()
        assert state == "Planned: nothing has been written yet."
        assert "4 changes, 2 to undo, 1 blocked, 1 already undone." in page.inner_text("main")
        check_page(page)
        watched.assert_inert()


@pytest.mark.parametrize("width", [1280, 390])
def test_a_plan_over_a_passkey_resource_is_confirmed_with_the_passkey_by_keyboard(
    browser: Any,
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    tmp_path: Path,
    width: int,
) -> None:
    world = web_world(server, data_dir, open_gateway, require_passkey=True)
    start = server.raw_bytes(RECORD)
    with served(world.app) as site:
        you = Reviewer(browser, site, world)  # on http://localhost: a passkey's site
        page = you.page
        page.set_viewport_size({"width": width, "height": 900})
        you.enrol()
        for status in ("customer", "vip"):  # two jobs on one field, each applied by passkey
            job_id = prepare(site, world, status)
            you.preview(job_id)
            page.get_by_role("button", name="Confirm apply").click()
            page.wait_for_url(f"{you.url}/jobs/{job_id}/receipt")
        writes = server.write_count(RECORD)

        page.goto(f"{you.url}/agents/account-assistant/rewind")
        page.get_by_label("Since").fill("1h")
        tab_to(page, "Make the plan")
        page.keyboard.press("Enter")
        page.wait_for_url(f"{you.url}/rewinds/**")
        plan_url = page.url
        tab_to(page, "Preview the plan")
        page.keyboard.press("Enter")
        page.wait_for_selector("#confirm-rewind")
        status = page.locator("#passkey-status")
        assert "needs your passkey" in status.inner_text()
        assert "this exact plan" in status.inner_text()
        check_page(page)
        save_shot(page, "rewind-passkey" if width == 1280 else "rewind-passkey-phone", docs=True)

        # The authenticator refuses (the person does not verify): nothing is sent.
        you.user_verified(False)
        tab_to(page, "Undo 2 change(s)")
        page.keyboard.press("Enter")
        page.wait_for_selector("#passkey-status[data-state=refused]")
        assert "nothing was sent" in status.inner_text()
        assert "preview the plan again" in status.inner_text()
        check_page(page)
        # An authenticator without the passkey (it went with another device): the same.
        you.user_verified(True)
        held = you.cdp.send("WebAuthn.getCredentials", {"authenticatorId": you.authenticator})
        you.cdp.send("WebAuthn.clearCredentials", {"authenticatorId": you.authenticator})
        page.evaluate(ASKING_AGAIN)
        page.locator("#confirm-rewind").focus()
        page.keyboard.press("Enter")
        page.wait_for_selector("#passkey-status[data-state=refused]")
        assert "nothing was sent" in status.inner_text()
        # The form sent without the passkey's approval: refused by the server.
        page.evaluate(SEND_UNSIGNED)
        page.wait_for_selector("main h1")
        assert "needs your passkey" in page.inner_text("main")
        assert "passkey_required" in page.inner_text("main")
        assert server.write_count(RECORD) == writes  # nothing written by any of them
        check_page(page)
        page.get_by_role("link", name="Back to the plan").click()
        page.wait_for_url(plan_url)
        assert page.inner_text("#plan-state") == "Planned: nothing has been written yet."

        # With the passkey: the plan runs, both steps, one approval.
        for credential in held["credentials"]:
            you.cdp.send(
                "WebAuthn.addCredential",
                {"authenticatorId": you.authenticator, "credential": credential},
            )
        tab_to(page, "Preview the plan")
        page.keyboard.press("Enter")
        page.wait_for_selector("#confirm-rewind")
        tab_to(page, "Undo 2 change(s)")
        page.keyboard.press("Enter")
        page.wait_for_selector("text=The plan ran")
        outcomes = page.locator("#plan tbody td[data-label='Outcome']").all_inner_texts()
        assert [o.strip() for o in outcomes] == ["done", "done"]
        check_page(page)
        you.context.close()
    assert server.raw_bytes(RECORD) == start  # byte for byte, both jobs undone
    # The plan's receipt holds the one approval over the whole plan, and verifies.
    rewind_id = plan_url.rsplit("/", 1)[1]
    receipt = tmp_path / "plan.receipt.json"
    made = cli("export-receipt", rewind_id, "--ledger", str(data_dir), "-o", str(receipt))
    assert made.returncode == 0, made.stderr
    approvals = [
        json.loads(e["event"]["detail"])["preview"]
        for e in json.loads(receipt.read_text())["segment"]
        if e.get("event", {}).get("operation") == "passkey_approved"
    ]
    assert [(a["job_id"], a["operation"]) for a in approvals] == [(rewind_id, "rewind")]
    checked = cli("verify-receipt", str(receipt))
    assert checked.returncode == 0, checked.stdout + checked.stderr
