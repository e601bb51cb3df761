"""The agent tools over MCP, end to end with the SDK's real client, on both transports:
streamable HTTP (``/mcp`` on a running gateway) and stdio (``python -m
undogate.mcp`` forwarding to that gateway's HTTP API).

Every test runs against a real ``undogate serve`` subprocess.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import anyio
import httpx
import pytest

from undogate.jsonvalue import dumps
from undogate.mcp.bridge import RemoteBackend
from undogate.mcp.tools import Refusal, agent_error

from .serving import base_env, free_port
from .worlds import RECORD, Connect, ServedWorld, run

pytestmark = pytest.mark.slow

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def customer_change(**extra: Any) -> dict[str, Any]:
    return {"resource": "customer", "set": {"status": "customer"}, **extra}


# -- what an agent sees ------------------------------------------------------------------


def test_the_tool_list_is_exactly_what_the_config_opts_in_to(connect: Connect) -> None:
    expected = {
        "account-assistant": ["list_resources", "prepare_changes"],
        "lister": ["list_resources"],
        "preparer": ["prepare_changes"],
        "wildcard": [],
    }

    async def scenario() -> None:
        for agent, tools in expected.items():
            async with connect(agent) as session:
                assert await session.tool_names() == tools, agent
                listed = (await session.client.list_tools()).tools
                assert all(TOOL_NAME.match(t.name) for t in listed)
                for refused in ("apply", "confirm", "undo", "reconcile", "reject"):
                    result = await session.call(refused)
                    assert result.is_error
                if "list_resources" not in tools:
                    assert (await session.call("list_resources")).is_error

    run(scenario)


def test_tool_descriptions_tell_a_model_what_it_does_never_does_and_how_to_retry(
    connect: Connect,
) -> None:
    async def scenario() -> None:
        async with connect("account-assistant") as session:
            tools = {t.name: t for t in (await session.client.list_tools()).tools}
        prepare = tools["prepare_changes"].description or ""
        assert "writes NOTHING" in prepare
        assert "cannot apply, confirm, undo or reject" in prepare
        assert "idempotency_key" in prepare and "replay" in prepare
        assert "read-only" in (tools["list_resources"].description or "").lower()
        schema = tools["prepare_changes"].input_schema
        assert set(schema["required"]) == {"summary", "changes"}
        assert tools["list_resources"].annotations is not None
        assert tools["list_resources"].annotations.read_only_hint is True

    run(scenario)


def test_list_resources_shows_only_the_agents_resources_and_no_addresses(
    connect: Connect,
) -> None:
    async def scenario() -> None:
        async with connect("account-assistant") as session:
            result = await session.call("list_resources")
        assert not result.is_error
        assert result.structured_content == {
            "resources": [
                {
                    "id": "customer",
                    "name": "Customer",
                    "kind": "json_record",
                    "fields": ["status", "owner", "tier", "balance", "ratio", "notes"],
                },
                {"id": "notes", "name": "Notes", "kind": "webdav_text", "fields": []},
                {
                    "id": "wrapped",
                    "name": "Wrapped",
                    "kind": "json_record",
                    "fields": ["status", "owner"],
                },
            ]
        }

    run(scenario)


# -- prepare, then a person applies -------------------------------------------------------


def test_a_prepared_job_is_applied_by_an_operator_through_the_api(
    connect: Connect, world: ServedWorld, transport: str
) -> None:
    async def scenario() -> None:
        async with connect("account-assistant") as session:
            receipt = await session.prepare(
                summary="Promote the lead to customer",
                changes=[customer_change(assertion_kind="observed")],
                idempotency_key="promote-1",
                attribution_label="ticket 42",
            )
        assert receipt["state"] == "prepared" and receipt["replay"] is False
        assert receipt["changes"] == [
            {"resource": "customer", "kind": "json_record", "fields": ["status"]}
        ]
        job_id = receipt["job_id"]
        assert receipt["review_path"] == f"/jobs/{job_id}"
        assert "person" in receipt["review"]
        assert world.contract.get_record(RECORD)["status"] == "lead"  # nothing written yet

        job = world.api("GET", f"/api/v1/jobs/{job_id}")
        assert job["changes"][0]["assertion_kind"]["value"] == "observed"
        assert job["attribution_label"] == {
            "value": "ticket 42",
            "caller_supplied": True,
            "verified": False,
        }
        events = world.api("GET", f"/api/v1/jobs/{job_id}/events")["events"]
        # stdio reaches the gateway through its HTTP API, and the ledger says so.
        assert events[0]["access_path"] == ("mcp" if transport == "http" else "api")
        preview = world.api("POST", f"/api/v1/jobs/{job_id}/previews", {"operation": "apply"})
        done = world.api(
            "POST", f"/api/v1/jobs/{job_id}/confirm", {"preview_token": preview["preview_token"]}
        )
        assert done["job"]["state"] == "applied"
        assert world.contract.get_record(RECORD)["status"] == "customer"

    run(scenario)


def test_a_prepare_names_its_session_for_a_rewind_plan(
    connect: Connect, world: ServedWorld, transport: str
) -> None:
    """The session an agent names is kept (caller-supplied); over stdio, a prepare that
    names none is of the bridge process's own MCP session (docs/rewind.md)."""

    async def scenario() -> None:
        async with connect("account-assistant") as session:
            named = await session.prepare(summary="s", changes=[customer_change()], session="run-7")
            vip = {"resource": "customer", "set": {"status": "vip"}}
            unnamed = await session.prepare(summary="t", changes=[vip])
        kept = world.api("GET", f"/api/v1/jobs/{named['job_id']}")["session"]
        assert kept == {"value": "run-7", "caller_supplied": True, "verified": False}
        own = world.api("GET", f"/api/v1/jobs/{unnamed['job_id']}")["session"]
        if transport == "stdio":
            assert own["value"].startswith("mcp-stdio-"), own

    run(scenario)


def test_a_text_document_change_is_prepared_too(connect: Connect) -> None:
    async def scenario() -> None:
        async with connect("account-assistant") as session:
            receipt = await session.prepare(
                summary="Rewrite the notes",
                changes=[{"resource": "notes", "text": "# Notes\n\nall new\n"}],
            )
        assert receipt["changes"] == [{"resource": "notes", "kind": "webdav_text", "fields": []}]

    run(scenario)


# -- the safe-writes envelope ----------------------------------------------------------------


def test_a_replay_with_the_same_key_returns_the_same_job(
    connect: Connect, world: ServedWorld
) -> None:
    async def scenario() -> None:
        arguments: dict[str, Any] = {
            "summary": "Promote",
            "changes": [customer_change()],
            "idempotency_key": "k-replay",
        }
        async with connect("account-assistant") as session:
            first = await session.prepare(**arguments)
            again = await session.prepare(**arguments)
        assert again["job_id"] == first["job_id"]
        assert (first["replay"], again["replay"]) == (False, True)
        assert [j["id"] for j in world.jobs()] == [first["job_id"]]

    run(scenario)


def test_the_same_key_with_a_different_change_is_refused(
    connect: Connect, world: ServedWorld
) -> None:
    async def scenario() -> None:
        async with connect("account-assistant") as session:
            first = await session.prepare(
                summary="Promote", changes=[customer_change()], idempotency_key="k-reused"
            )
            code, text = await session.refusal(
                "prepare_changes",
                summary="Promote",
                changes=[{"resource": "customer", "set": {"status": "churned"}}],
                idempotency_key="k-reused",
            )
        assert code == "idempotency_key_reused"
        assert "new idempotency_key" in text
        assert first["job_id"] in text  # the agent's own job, so it may see its id
        assert len(world.jobs()) == 1

    run(scenario)


def test_concurrent_prepares_with_one_key_create_one_job(
    connect: Connect, world: ServedWorld
) -> None:
    receipts: list[dict[str, Any]] = []

    async def scenario() -> None:
        async with connect("account-assistant") as session:

            async def one() -> None:
                receipts.append(
                    await session.prepare(
                        summary="Promote", changes=[customer_change()], idempotency_key="k-race"
                    )
                )

            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(one)

    run(scenario)
    assert len(receipts) == 8
    assert len({r["job_id"] for r in receipts}) == 1
    assert sorted(r["replay"] for r in receipts) == [False] + [True] * 7
    assert len(world.jobs()) == 1


def test_a_stale_expected_version_is_refused_with_the_current_version(
    connect: Connect, world: ServedWorld
) -> None:
    read = world.contract.etag(RECORD)
    current = world.contract.set_field(RECORD, "/owner", "pat")  # someone else wrote since

    async def scenario() -> None:
        async with connect("account-assistant") as session:
            code, text = await session.refusal(
                "prepare_changes",
                summary="Promote",
                changes=[customer_change(expected_version=read)],
                idempotency_key="k-stale",
            )
            assert code == "stale_version"
            assert dumps(current) in text  # the current version, for the agent's retry
            assert "Read the resource again" in text
            # With the current version the same key now prepares (nothing was recorded).
            receipt = await session.prepare(
                summary="Promote",
                changes=[customer_change(expected_version=current)],
                idempotency_key="k-stale-2",
            )
        assert receipt["state"] == "prepared"

    run(scenario)
    assert len(world.jobs()) == 1


def test_another_agents_resource_is_refused_exactly_like_an_unknown_one(
    connect: Connect, world: ServedWorld
) -> None:
    async def scenario() -> None:
        async with connect("account-assistant") as session:
            foreign = await session.refusal(
                "prepare_changes",
                summary="x",
                changes=[{"resource": "supplier", "set": {"status": "x"}}],
            )
            unknown = await session.refusal(
                "prepare_changes",
                summary="x",
                changes=[{"resource": "nosuchthing", "set": {"status": "x"}}],
            )
        assert foreign[0] == unknown[0] == "not_found"
        assert foreign[1].replace("supplier", "ID") == unknown[1].replace("nosuchthing", "ID")

    run(scenario)
    assert world.jobs() == [] and world.jobs("other-agent") == []


def test_refusals_from_the_remote_system_reveal_no_address_or_variable(
    connect: Connect, world: ServedWorld
) -> None:
    world.contract.arm("weak_etag", RECORD)

    async def scenario() -> None:
        async with connect("account-assistant") as session:
            breach = await session.refusal(
                "prepare_changes", summary="x", changes=[customer_change()]
            )
            missing = await session.refusal(
                "prepare_changes",
                summary="x",
                changes=[{"resource": "wrapped", "set": {"status": "closed"}}],
            )
            invalid = await session.refusal(
                "prepare_changes",
                summary="x",
                changes=[{"resource": "customer", "set": {"name": "Grace"}}],
            )
        assert breach[0] == "remote_contract_breach"
        assert missing[0] == "missing_token"
        assert invalid[0] == "invalid_request" and "allow-listed" in invalid[1]
        # The world fixture checks every recorded result for URLs, tokens, variables and
        # before-values when the test ends.

    run(scenario)


# -- the HTTP endpoint's own door ------------------------------------------------------------


def test_the_mcp_endpoint_takes_only_live_agent_tokens(world: ServedWorld) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    for key, status, code in (
        (None, 401, "unauthorized"),
        ("revoked", 401, "unauthorized"),
        ("operator", 403, "forbidden"),
    ):
        auth = {"Authorization": f"Bearer {world.keys[key]}"} if key else {}
        response = httpx.post(
            f"{world.url}/mcp", json=body, headers={**headers, **auth}, trust_env=False
        )
        assert response.status_code == status, (key, response.text)
        assert response.json()["error"]["code"] == code


# -- stdio start-up ------------------------------------------------------------------------------


def _stdio(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # The name agent configurations written before ``undogate.mcp`` still launch.
    return subprocess.run(
        [sys.executable, "-m", "undogate.mcp_server"],
        env={**base_env(), **env},
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_stdio_refuses_to_start_without_a_gateway_or_with_a_bad_token(world: ServedWorld) -> None:
    unset = _stdio({})
    assert unset.returncode == 2 and "UNDOGATE_AGENT_TOKEN" in unset.stderr
    bad = _stdio({"UNDOGATE_URL": world.url, "UNDOGATE_AGENT_TOKEN": world.keys["revoked"]})
    assert bad.returncode == 2 and "unauthorized" in bad.stderr
    assert world.keys["revoked"] not in bad.stderr
    gone = _stdio({"UNDOGATE_URL": f"http://127.0.0.1:{free_port()}", "UNDOGATE_AGENT_TOKEN": "x"})
    assert gone.returncode == 2 and "gateway_unavailable" in gone.stderr
    far = _stdio({"UNDOGATE_URL": "http://10.0.0.5:8080", "UNDOGATE_AGENT_TOKEN": "uga_secret"})
    assert far.returncode == 2 and "use https" in far.stderr  # no token over plain http
    assert "uga_secret" not in far.stderr


# -- pieces -------------------------------------------------------------------------------------


def test_an_agent_error_withholds_addresses_and_opaque_messages() -> None:
    remote = agent_error(
        Refusal(
            "remote_unavailable",
            "could not read customer: connect to https://records.internal:8443 failed",
            {"resource": "customer", "status": 503, "variable": "CUSTOMER_TOKEN"},
        )
    )
    assert str(remote).startswith("remote_unavailable: undogate could not read")
    assert "records.internal" not in str(remote) and "CUSTOMER_TOKEN" not in str(remote)
    assert '"resource":"customer"' in str(remote).replace(" ", "")
    other = agent_error(Refusal("invalid_request", "see http://x.example/y for help", {}))
    assert "x.example" not in str(other) and "Fix the input" in str(other)
    unknown = agent_error(Refusal("gateway_unavailable", "boom", {}))
    assert "same idempotency_key" in str(unknown)


def _mock_gateway(routes: dict[tuple[str, str], tuple[int, Any]]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        status, body = routes.get(
            (request.method, request.url.path),
            (404, {"error": {"code": "not_found", "message": "no route", "details": {}}}),
        )
        return httpx.Response(status, json=body)

    return httpx.MockTransport(handle)


AGENT_ROUTE = ("GET", "/api/v1/agent")


@pytest.mark.parametrize(
    ("routes", "tools"),
    [
        ({AGENT_ROUTE: (200, {"tools": ["prepare_changes", "x"]})}, ("prepare_changes",)),
        ({AGENT_ROUTE: (200, {"tools": []})}, ()),
    ],
)
def test_stdio_learns_the_agents_tools_from_the_gateway(
    routes: dict[tuple[str, str], tuple[int, Any]], tools: tuple[str, ...]
) -> None:
    async def scenario() -> None:
        backend = RemoteBackend("http://gateway.test", "uga_x", transport=_mock_gateway(routes))
        try:
            assert await backend.agent_tools() == tools
        finally:
            await backend.aclose()

    run(scenario)


def test_big_integers_arrive_exactly(connect: Connect, world: ServedWorld) -> None:
    big = 987654321098765432109876543210

    async def scenario() -> None:
        async with connect("account-assistant") as session:
            receipt = await session.prepare(
                summary="Set the balance",
                changes=[{"resource": "customer", "set": {"balance": big}}],
            )
        job = httpx.get(
            f"{world.url}/api/v1/jobs/{receipt['job_id']}",
            headers={"Authorization": f"Bearer {world.keys['operator']}"},
            trust_env=False,
        )
        assert f'"balance":{big}' in job.text.replace(" ", "")

    run(scenario)
