"""The rewind pages over HTTP (no browser): what a plan shows of values it did not write
and of jobs that are not the reviewer's (tests/test_web_rewind_browser.py drives the
same pages in Chromium)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from undogate.config import Config
from undogate.contract_server import ContractServer

from .test_web import csrf_of, signed_in
from .worlds import RECORD, LocalGateway, WebWorld, prepare_via_api, web_world

RLO, ZWSP = "\u202e", "\u200b"


@pytest.fixture
def world(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> WebWorld:
    return web_world(server, data_dir, open_gateway)


def applied(client: TestClient, world: WebWorld, agent: str, owner: str, status: str) -> str:
    """A job of ``agent`` (a key) setting the customer's status, applied by ``owner``."""
    body = {"summary": "status", "changes": [{"resource": "customer", "set": {"status": status}}]}
    job_id = prepare_via_api(client, world.keys[agent], body)
    auth = {"Authorization": f"Bearer {world.keys[owner]}"}
    shown = client.post(
        f"/api/v1/jobs/{job_id}/previews", json={"operation": "apply"}, headers=auth
    )
    token = shown.json()["preview_token"]
    done = client.post(
        f"/api/v1/jobs/{job_id}/confirm", json={"preview_token": token}, headers=auth
    )
    assert done.status_code == 200 and done.json()["job"]["state"] == "applied", done.text
    return job_id


def test_a_plan_page_marks_invisible_characters_and_another_owners_job_stays_theirs(
    world: WebWorld,
) -> None:
    """Alice's agent wrote a status with a zero-width space; Bob's job of the same agent
    then wrote one with a right-to-left override. Alice's plan blocks her step on Bob's
    job: the page shows both values with every invisible character marked, and Bob's job
    is a link Alice cannot open."""
    with signed_in(world) as alice:
        mine = applied(alice, world, "agent", "alice", f"vip{ZWSP}")
        theirs = applied(alice, world, "bob_agent", "bob", f"cust{RLO}remoc")
        page = alice.get("/agents/account-assistant/rewind")
        made = alice.post(
            "/agents/account-assistant/rewind", data={"since": "1h", "csrf": csrf_of(page.text)}
        )
        assert made.status_code == 200, made.text
        html = made.text
        assert mine in html and theirs in html
        assert RLO not in html and ZWSP not in html  # never raw
        assert "U+202E" in html and "U+200B" in html  # each marked
        assert alice.get(f"/jobs/{theirs}").status_code == 404
    assert world.server.get_record(RECORD)["status"] == f"cust{RLO}remoc"
