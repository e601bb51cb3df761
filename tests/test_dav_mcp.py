"""An address book on real Radicale (basic auth) through a served gateway: an agent, over
MCP with the SDK's real client (streamable HTTP and stdio), learns the property shapes
from the tool's description, is refused ``ambiguous`` for two contacts whose emails
differ only in case (nothing prepared, nothing written) and prepares a contact's create;
a reviewer confirms it (acknowledging it cannot be undone yet), checks the test copy,
accepts the verified undo and undoes it, all over the HTTP API."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .caldav_servers import PASSWORD, USER, DavCollections
from .collections_world import served_collection
from .dav_world import CONTACT, CREDENTIALS_ENV, dav_resource, properties, seed
from .serving import base_env
from .worlds import Connect, ServedWorld, run

AGENT = "account-assistant"
FIELDS = ["FN", "EMAIL", "NOTE"]
IDENTITY = [{"field": "EMAIL", "evidence": "email"}]


@pytest.fixture
def book(radicale: DavCollections) -> str:
    return radicale.new_addressbook()


@pytest.fixture
def world(tmp_path: Path, radicale: DavCollections, book: str) -> Iterator[ServedWorld]:
    copy = radicale.new_addressbook()
    seed(radicale, copy, CONTACT, ".vcf")
    resources = [
        dav_resource(radicale, "book", "vcard_collection", book, FIELDS, identity=IDENTITY),
        dav_resource(
            radicale,
            "book-copy",
            "vcard_collection",
            copy,
            FIELDS,
            identity=IDENTITY,
            test_copy_of="book",
        ),
    ]
    env = {**base_env(), CREDENTIALS_ENV: f"{USER}:{PASSWORD}"}
    secrets = [PASSWORD, CREDENTIALS_ENV, radicale.base_url]
    with served_collection(tmp_path, resources, env, secrets) as world:
        yield world


def _members(radicale: DavCollections, book: str) -> dict[str, str]:
    """Each member's path and its text, as the server holds them."""
    listed = radicale.propfind_members(book).text
    hrefs = set(re.findall(r"<[^>]*href>([^<]+\.vcf)</", listed))
    return {h: radicale.request("GET", h).text for h in sorted(hrefs)}


def test_an_ambiguous_upsert_and_a_create_undone_over_mcp(
    world: ServedWorld, radicale: DavCollections, book: str, connect: Connect
) -> None:
    for email in ("Dup@Example.com", "dup@example.com"):
        seed(radicale, book, CONTACT.replace("ada@old.example", email), ".vcf")
    start = _members(radicale, book)
    assert len(start) == 2
    created: dict[str, Any] = {}

    async def scenario() -> None:
        async with connect(AGENT) as agent:
            tools = {t.name: t for t in (await agent.client.list_tools()).tools}
            described = tools["prepare_changes"].description or ""
            assert "kind `vcard_collection`" in described and '"params"' in described
            code, text = await agent.refusal(
                "prepare_changes",
                summary="note on Dup",
                changes=[{"resource": "book", "upsert": {"EMAIL": "DUP@example.com", "NOTE": "x"}}],
            )
            assert code == "ambiguous"
            details = json.loads(text.split(" Details: ", 1)[1])
            assert len(details["candidates"]) == 2
            assert {json.dumps(c["evidence"]) for c in details["candidates"]} == {
                json.dumps({"EMAIL": "dup@example.com"})
            }
            created.update(
                await agent.prepare(
                    summary="add Grace",
                    idempotency_key="mcp-create-grace",
                    changes=[
                        {
                            "resource": "book",
                            "create": {
                                "FN": "Grace Hopper",
                                "EMAIL": {
                                    "value": "grace@navy.example",
                                    "params": {"TYPE": "work"},
                                },
                            },
                        }
                    ],
                )
            )

    run(scenario)
    assert _members(radicale, book) == start  # nothing written by preparing
    assert [j["id"] for j in world.api("GET", f"/api/v1/jobs?agent={AGENT}")["jobs"]] == [
        created["job_id"]
    ]  # the ambiguous upsert prepared nothing
    job_id = created["job_id"]
    (touched,) = created["changes"]
    name = touched["record_id"]
    refused = world.confirm(job_id, "apply")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "irreversible_not_acknowledged"
    applied = world.confirm(job_id, "apply", acknowledge_irreversible=True)
    assert applied.status_code == 200, applied.text
    assert applied.json()["job"]["state"] == "applied"
    made = properties(radicale.request("GET", f"{book}{name}").text)
    assert made["FN"][0].value == "Grace Hopper"
    receipt = world.api("GET", f"/api/v1/jobs/{job_id}")
    rows = {r["field"]: r for r in receipt["changes"][0]["rows"]}
    assert rows["EMAIL"]["after"] == "grace@navy.example (TYPE=work)"
    check = world.api("POST", "/api/v1/endpoint-checks", {"resource": "book-copy"})
    assert check["passed"] and check["verified_undos"] == ["undo_of_create", "recreate"]
    offer = world.api("POST", "/api/v1/resources/book/undo-acceptance", {})
    assert offer["accepted"] == ["recreate", "undo_of_create"]
    undone = world.confirm(job_id, "undo")
    assert undone.status_code == 200, undone.text
    assert undone.json()["job"]["state"] == "undone"
    assert _members(radicale, book) == start
