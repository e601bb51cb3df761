"""``job_status`` (docs/agents.md): an agent opted in reads its own job's state and a
reviewer's reason, over MCP (both transports) and HTTP; never values, never another
agent's job; an agent not opted in is offered no such tool and is refused over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from undogate.cli.serve import open_configured
from undogate.contract_server import ContractServer

from .serving import base_env, served_gateway
from .worlds import BEFORE_VALUES, RECORD, Connect, ServedWorld, resource, run

REASON = "Ada is not a customer yet: the contract is unsigned"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[ServedWorld]:
    """A served gateway whose ``tracker`` is opted in to job_status; ``preparer`` is not."""
    with ContractServer(None) as contract:
        contract.set_record("/records/supplier-7", {"status": "active", "owner": "kim"})
        config = tmp_path / "undogate.yaml"
        tools = ["list_resources", "prepare_changes"]
        config.write_text(
            yaml.safe_dump(
                {
                    "server": {"data_dir": str(tmp_path / "data")},
                    "resources": [
                        resource(contract, "customer", RECORD, agent_id="tracker"),
                        resource(contract, "supplier", "/records/supplier-7", agent_id="preparer"),
                    ],
                    "agents": [
                        {"id": "tracker", "tools": [*tools, "job_status"]},
                        {"id": "preparer", "tools": tools},
                    ],
                }
            )
        )
        env = base_env()
        keys: dict[str, str] = {}
        with open_configured(config, environ=env) as svc:
            operator = svc.keyring.create_operator(label="alice")
            keys["operator"] = operator.key
            for agent in ("tracker", "preparer"):
                keys[agent] = svc.keyring.create_agent_token(
                    owner_id=operator.credential.id, agent_id=agent, label=agent
                ).key
        with served_gateway(config, env) as url:
            yield ServedWorld(url=url, contract=contract, keys=keys)


def _http(world: ServedWorld, method: str, path: str, key: str, body: Any = None) -> httpx.Response:
    return httpx.request(
        method,
        world.url + path,
        json=body,
        headers={"Authorization": f"Bearer {world.keys[key]}"},
        timeout=30,
        trust_env=False,
    )


def test_an_agent_reads_its_own_jobs_state_and_the_reviewers_reason(
    world: ServedWorld, connect: Connect
) -> None:
    other = _http(
        world,
        "POST",
        "/api/v1/jobs",
        "preparer",
        {"summary": "s", "changes": [{"resource": "supplier", "set": {"status": "x"}}]},
    ).json()["job_id"]

    async def scenario() -> None:
        async with connect("tracker") as agent:
            assert "job_status" in await agent.tool_names()
            job = await agent.prepare(
                summary="Promote Ada",
                changes=[{"resource": "customer", "set": {"status": "customer"}}],
            )
            job_id = job["job_id"]
            status = await agent.call("job_status", job_id=job_id)
            assert not status.is_error, status.content
            assert status.structured_content is not None
            assert status.structured_content["state"] == "prepared"
            assert status.structured_content["reason"] is None
            rejected = _http(
                world, "POST", f"/api/v1/jobs/{job_id}/reject", "operator", {"reason": REASON}
            )
            assert rejected.status_code == 200, rejected.text
            status = await agent.call("job_status", job_id=job_id)
            assert status.structured_content is not None
            assert status.structured_content == {
                "job_id": job_id,
                "state": "rejected",
                "updated_at": status.structured_content["updated_at"],
                "reason": REASON,
            }
            text = " ".join(getattr(c, "text", "") for c in status.content)
            assert not any(value in text for value in BEFORE_VALUES)
            # Another agent's job (same owner) is not found, like one that never was.
            code, said = await agent.refusal("job_status", job_id=other)
            assert code == "not_found" and other in said and "prepare_changes" in said
            code, _ = await agent.refusal("job_status", job_id="job_0000000000000000")
            assert code == "not_found"
            code, _ = await agent.refusal("job_status", job_id=job_id, values=True)
            assert code == "invalid_request"
        async with connect("preparer") as agent:
            assert "job_status" not in await agent.tool_names()

    run(scenario)


def test_job_status_over_http_is_for_opted_in_agents_and_their_own_jobs(world: ServedWorld) -> None:
    body = {"summary": "s", "changes": [{"resource": "customer", "set": {"status": "x"}}]}
    job_id = _http(world, "POST", "/api/v1/jobs", "tracker", body).json()["job_id"]
    mine = _http(world, "GET", f"/api/v1/jobs/{job_id}/status", "tracker")
    assert mine.status_code == 200, mine.text
    assert set(mine.json()) == {"job_id", "state", "updated_at", "reason"}
    not_opted = _http(world, "GET", f"/api/v1/jobs/{job_id}/status", "preparer")
    assert not_opted.status_code == 403
    assert "not opted in to job_status" in not_opted.json()["error"]["message"]
    operator = _http(world, "GET", f"/api/v1/jobs/{job_id}/status", "operator")
    assert operator.status_code == 403
