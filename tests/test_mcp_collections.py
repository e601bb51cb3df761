"""A collection on a real Kinto through a served gateway: an agent prepares a create and
an ambiguous upsert over MCP with the SDK's real client; a reviewer confirms, checks the
test copy, accepts the verified undo and undoes, all over the HTTP API (docs/collections.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .collections_world import served_collection
from .kintoserver import PASSWORD, USER, KintoServer, kinto_server
from .serving import base_env
from .test_kinto_collections import BUCKET, collection, listed, records
from .worlds import Connect, ServedWorld, run

AGENT = "account-assistant"


@pytest.fixture(scope="module")
def kinto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KintoServer]:
    with kinto_server(tmp_path_factory.mktemp("kinto")) as srv:
        srv.request("PUT", BUCKET, json={})
        for name in ("mcp", "mcp-copy"):
            srv.request("PUT", f"{BUCKET}/collections/{name}", json={})
        yield srv


@pytest.fixture
def world(tmp_path: Path, kinto: KintoServer) -> Iterator[ServedWorld]:
    resources = [
        collection(kinto, "contacts", "mcp"),
        collection(kinto, "contacts-copy", "mcp-copy", test_copy_of="contacts"),
    ]
    env = {**base_env(), "KINTO_AUTH": f"{USER}:{PASSWORD}"}
    secrets = [PASSWORD, "KINTO_AUTH", kinto.base_url]
    with served_collection(tmp_path, resources, env, secrets) as world:
        yield world


def test_create_and_its_undo_and_an_ambiguous_upsert_over_mcp(
    world: ServedWorld, kinto: KintoServer, connect: Connect
) -> None:
    kinto.request("PUT", f"{records('mcp')}/one", json={"data": {"email": "Dup@Example.com"}})
    kinto.request("PUT", f"{records('mcp')}/two", json={"data": {"email": "dup@example.com "}})
    start = listed(kinto, "mcp")
    created: dict[str, Any] = {}

    async def scenario() -> None:
        async with connect(AGENT) as agent:
            tools = {t.name: t for t in (await agent.client.list_tools()).tools}
            described = tools["prepare_changes"].description or ""
            assert "json_collection" in described and "ambiguous" in described
            code, text = await agent.refusal(
                "prepare_changes",
                summary="add Dup",
                changes=[{"resource": "contacts", "upsert": {"email": "DUP@example.com"}}],
            )
            assert code == "ambiguous"
            details = json.loads(text.split(" Details: ", 1)[1])
            assert sorted(c["id"] for c in details["candidates"]) == ["one", "two"]
            created.update(
                await agent.prepare(
                    summary="add Ann",
                    idempotency_key="mcp-create-1",
                    changes=[{"resource": "contacts", "create": {"email": "ann@example.com"}}],
                )
            )

    run(scenario)
    assert listed(kinto, "mcp") == start  # preparing wrote nothing
    job_id = created["job_id"]
    (touched,) = created["changes"]
    rid = touched["record_id"]
    refused = world.confirm(job_id, "apply")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "irreversible_not_acknowledged"
    applied = world.confirm(job_id, "apply", acknowledge_irreversible=True)
    assert applied.status_code == 200, applied.text
    assert listed(kinto, "mcp")[rid]["email"] == "ann@example.com"
    blocked = world.api("GET", f"/api/v1/jobs/{job_id}")
    assert blocked["changes"][0]["operation"] == "create"
    check = world.api("POST", "/api/v1/endpoint-checks", {"resource": "contacts-copy"})
    assert check["passed"] and check["verified_undos"] == ["undo_of_create", "recreate"]
    offer = world.api("POST", "/api/v1/resources/contacts/undo-acceptance", {})
    assert offer["accepted"] == ["recreate", "undo_of_create"]
    undone = world.confirm(job_id, "undo")
    assert undone.status_code == 200, undone.text
    assert undone.json()["job"]["state"] == "undone"
    assert listed(kinto, "mcp") == start
