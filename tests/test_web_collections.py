"""A collection in the review UI, in real headless Chromium (docs/collections.md): a create shows
"Creates a new record" and is not reversible until its undo is verified and accepted, so confirming
needs the box ticked; the resource's undo page accepts the verified undo; then the undo
removes exactly the record, on the contract server and on a real Kinto. A deletion shows
the whole pre-image; an ambiguous upsert never becomes a job."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.auth import Keyring
from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.operations.context import Context
from undogate.operations.endpoint_check import check_endpoint
from undogate.service import Service

from .browser import ServedApp, chromium_missing, save_shot, served
from .collections_world import CONTACTS, contacts, seed
from .kintoserver import PASSWORD, USER, kinto_server
from .test_kinto_collections import BUCKET, collection, listed
from .test_web_browser import open_page, sign_in
from .worlds import LocalGateway, make_config, review_app

_missing = chromium_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")
sync_api = pytest.importorskip("playwright.sync_api")
COPY = "/collections/contacts-copy"


@pytest.fixture
def world(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> Iterator[tuple[ServedApp, LocalGateway, dict[str, str]]]:
    gw = open_gateway(
        make_config(
            server,
            data_dir,
            contacts(server),
            contacts(server, "contacts-copy", path=COPY, test_copy_of="contacts"),
        )
    )
    keyring = Keyring(gw.ledger, known_agents=lambda: {a.id for a in gw.config.agents})
    alice = keyring.create_operator(label="alice")
    agent = keyring.create_agent_token(
        owner_id=alice.credential.id, agent_id="account-assistant", label="assistant"
    )
    app = review_app(Service(gw, keyring))
    with served(app) as site:
        yield site, gw, {"alice": alice.key, "agent": agent.key}


def _prepare(site: ServedApp, key: str, change: dict[str, Any]) -> httpx.Response:
    body = {"summary": "contacts", "changes": [{"resource": "contacts", **change}]}
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.post(f"{site.url}/api/v1/jobs", json=body, headers=headers, trust_env=False)


def test_create_acknowledged_then_undo_accepted_and_run(
    browser: Any, world: tuple[ServedApp, LocalGateway, dict[str, str]], server: ContractServer
) -> None:
    site, gw, keys = world
    made = _prepare(site, keys["agent"], {"create": {"email": "ann@example.com"}, "id": "ann"})
    assert made.status_code == 201, made.text
    job_id = made.json()["job_id"]
    w = open_page(browser)
    page = w.page
    sign_in(page, site, keys["alice"])
    page.goto(f"{site.url}/jobs/{job_id}")
    assert "Creates a new record ann" in page.inner_text("main")
    page.get_by_role("button", name="Preview apply").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/previews/**")
    main = page.inner_text("main")
    assert "Creates a new record ann" in main and "Not reversible" in main
    box = page.locator("#acknowledge")
    assert box.get_attribute("required") is not None
    page.locator("#confirm").click()  # the browser refuses the form while unticked
    assert "/previews/" in page.url and server.collection_records(CONTACTS) == {}
    save_shot(page, "collection-create-preview")
    box.check()
    page.locator("#confirm").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/receipt")
    assert set(server.collection_records(CONTACTS)) == {"ann"}

    assert check_endpoint(
        Context(gw.config, gw.ledger, gw.http, environ={}), "contacts-copy"
    ).passed
    page.goto(f"{site.url}/resources/contacts/undo")
    assert "Accept the verified undo" in page.inner_text("main")
    page.get_by_role("button", name="Accept the verified undo").click()
    page.wait_for_url(f"{site.url}/resources/contacts/undo")
    assert "these undos are offered" in page.inner_text("main")
    # the notice crosses the redirect in the ledger's session row
    assert "Accepted: these verified undos are offered from now on." in page.content()
    save_shot(page, "collection-undo-offer")
    page.goto(f"{site.url}/jobs/{job_id}")
    page.get_by_role("button", name="Preview undo").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/previews/**")
    assert page.locator("#acknowledge").count() == 0  # offered now: nothing to acknowledge
    page.locator("#confirm").click()
    page.wait_for_url(f"{site.url}/jobs/{job_id}/receipt")
    assert server.collection_records(CONTACTS) == {}
    w.assert_inert()


def test_a_deletion_shows_the_pre_image_and_an_ambiguous_upsert_is_no_job(
    browser: Any, world: tuple[ServedApp, LocalGateway, dict[str, str]], server: ContractServer
) -> None:
    site, _, keys = world
    seed(server, "ann", email="ann@example.com", name="<b>Ann</b>", status="lead")
    seed(server, "dup", email="ANN@example.com")
    refused = _prepare(site, keys["agent"], {"upsert": {"email": "ann@example.com"}})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "ambiguous"
    made = _prepare(site, keys["agent"], {"id": "ann", "delete": True})
    job_id = made.json()["job_id"]
    w = open_page(browser)
    page = w.page
    sign_in(page, site, keys["alice"])
    page.goto(f"{site.url}/agents/account-assistant")
    assert page.get_by_role("link", name=job_id).count() == 1
    assert "contacts" in page.inner_text("main")
    page.goto(f"{site.url}/jobs/{job_id}")
    pre_image = page.inner_text(".record-op.delete")
    assert "whole pre-image" in pre_image and '"<b>Ann</b>"' in pre_image
    assert '"lead"' in pre_image and '"ann@example.com"' in pre_image
    w.assert_inert()


def test_on_kinto_a_create_and_its_undo_by_clicking(
    browser: Any, data_dir: Path, open_gateway: Callable[..., LocalGateway], tmp_path: Path
) -> None:
    """The same on a real Kinto 26.5: the create needs the tick until its undo is
    verified (check-endpoint on the copy) and accepted (the undo page); then the undo
    removes exactly the record."""
    (tmp_path / "kinto").mkdir()
    with kinto_server(tmp_path / "kinto") as kinto:
        kinto.request("PUT", BUCKET, json={})
        for name in ("web", "web-copy"):
            kinto.request("PUT", f"{BUCKET}/collections/{name}", json={})
        config = parse_config(
            {
                "server": {"data_dir": str(data_dir)},
                "resources": [
                    collection(kinto, "contacts", "web"),
                    collection(kinto, "contacts-copy", "web-copy", test_copy_of="contacts"),
                ],
                "agents": [{"id": "account-assistant", "tools": ["prepare_changes"]}],
            }
        )
        env = {"KINTO_AUTH": f"{USER}:{PASSWORD}"}
        gw = open_gateway(config, environ=env)
        keyring = Keyring(gw.ledger, known_agents=lambda: {"account-assistant"})
        alice = keyring.create_operator(label="alice")
        agent = keyring.create_agent_token(
            owner_id=alice.credential.id, agent_id="account-assistant", label="assistant"
        )
        with served(review_app(Service(gw, keyring))) as site:
            made = _prepare(site, agent.key, {"create": {"email": "ann@example.com"}})
            job_id = made.json()["job_id"]
            w = open_page(browser)
            page = w.page
            sign_in(page, site, alice.key)
            page.goto(f"{site.url}/jobs/{job_id}")
            page.get_by_role("button", name="Preview apply").click()
            page.wait_for_url(f"{site.url}/jobs/{job_id}/previews/**")
            assert "Creates a new record" in page.inner_text("main")
            page.locator("#acknowledge").check()
            page.locator("#confirm").click()
            page.wait_for_url(f"{site.url}/jobs/{job_id}/receipt")
            assert [r["email"] for r in listed(kinto, "web").values()] == ["ann@example.com"]
            assert check_endpoint(
                Context(gw.config, gw.ledger, gw.http, environ=env), "contacts-copy"
            ).passed
            page.goto(f"{site.url}/resources/contacts/undo")
            page.get_by_role("button", name="Accept the verified undo").click()
            page.wait_for_url(f"{site.url}/resources/contacts/undo")
            page.goto(f"{site.url}/jobs/{job_id}")
            page.get_by_role("button", name="Preview undo").click()
            page.wait_for_url(f"{site.url}/jobs/{job_id}/previews/**")
            page.locator("#confirm").click()
            page.wait_for_url(f"{site.url}/jobs/{job_id}/receipt")
            assert listed(kinto, "web") == {}
            w.assert_inert()
