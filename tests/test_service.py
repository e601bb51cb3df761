"""The one door every surface calls (``service/``): one bearer parser, one
authentication, and surfaces that reach the gateway and the keyring only through it."""

from __future__ import annotations

import ast
from pathlib import Path

import anyio
import pytest

from undogate.auth import Principal
from undogate.errors import Forbidden, NotFound, Unauthorized
from undogate.jobs import (
    ChangeRequest,
    Confirmation,
    Job,
    JobState,
    Operation,
    PrepareRequest,
)
from undogate.service import MAX_KEY_CHARS, AgentCaller, Reader, Reviewer, bearer_key

from .worlds import ApiWorld

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "undogate"
SURFACES = ("api", "web", "mcp")


def test_one_bearer_parser_words_its_refusal_as_the_surface_asks() -> None:
    assert bearer_key("Bearer  ugo_abc ", ask="x") == "ugo_abc"
    assert bearer_key("bearer ugo_abc", ask="x") == "ugo_abc"
    for header in ("", "Bearer", "Bearer   ", "Basic ugo_abc", "ugo_abc"):
        with pytest.raises(Unauthorized, match=r"^send it so$"):
            bearer_key(header, ask="send it so")


def test_authentication_refuses_what_no_key_can_be(api_world: ApiWorld) -> None:
    access = api_world.service.access
    with pytest.raises(Unauthorized, match="missing, unknown or revoked"):
        anyio.run(access.authenticate, "ugo_" + "a" * MAX_KEY_CHARS)
    with pytest.raises(Unauthorized, match=r"^as /mcp words it$"):
        anyio.run(
            lambda: access.authenticate_bearer(
                "Bearer " + "a" * (MAX_KEY_CHARS + 1), ask="-", over_long="as /mcp words it"
            )
        )
    principal = anyio.run(access.authenticate, api_world.keys["owner"])
    assert principal.kind == "operator"
    with pytest.raises(Forbidden):
        anyio.run(access.sign_in, api_world.keys["agent"])


def test_a_job_is_seen_only_by_its_owner_and_acted_on_only_with_write(api_world: ApiWorld) -> None:
    service = api_world.service

    async def caller(key: str) -> Principal:
        found = api_world.keys[key]
        assert found is not None
        return await service.access.authenticate(found)

    async def scenario() -> None:
        agent = await caller("agent")
        request = PrepareRequest(
            summary="promote",
            changes=(ChangeRequest(resource_id="customer", set={"status": "customer"}),),
        )
        job = (await service.agents.prepare(AgentCaller.of(agent, "api"), request)).job
        owner = Reader.of(await caller("owner"), "api")
        assert (await service.reviewers.job(owner, job.id)).id == job.id
        other = Reader.of(await caller("other_operator"), "api")
        with pytest.raises(NotFound):
            await service.reviewers.job(other, job.id)
        reader = await caller("reader")
        with pytest.raises(NotFound):  # the reader is another owner: nothing to see
            await service.reviewers.job(Reader.of(reader, "api"), job.id)
        with pytest.raises(Forbidden):
            Reviewer.of(reader, "api")
        with pytest.raises(Forbidden):  # an agent token reads no jobs
            Reader.of(agent, "api")

    anyio.run(scenario)


def test_surfaces_reach_the_gateway_and_keyring_only_through_the_service() -> None:
    found: list[str] = []
    for surface in SURFACES:
        for path in sorted((PACKAGE / surface).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in ("gateway", "keyring"):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} .{node.attr}")
    assert found == []


def test_a_confirm_loads_its_job_once(api_world: ApiWorld) -> None:
    """The door loads the job (deciding whether the key may see it) and the confirm works
    on that job; the job it answers with is the one its last commit wrote."""
    service, ledger = api_world.service, api_world.gateway.ledger
    loads: list[str] = []
    load_job = ledger.load_job

    def counted(job_id: str, *, with_actions: bool = True) -> Job | None:
        loads.append(job_id)
        return load_job(job_id, with_actions=with_actions)

    async def scenario() -> Confirmation:
        agent = await service.access.authenticate(api_world.keys["agent"])
        request = PrepareRequest(
            summary="promote",
            changes=(ChangeRequest(resource_id="customer", set={"status": "customer"}),),
        )
        job = (await service.agents.prepare(AgentCaller.of(agent, "api"), request)).job
        owner = await service.access.authenticate(api_world.keys["owner"])
        reviewer = Reviewer.of(owner, "api")
        _, preview = await service.reviewers.preview(reviewer, job.id, Operation.APPLY)
        assert preview.token is not None
        ledger.load_job = counted  # type: ignore[method-assign]
        return await service.reviewers.confirm(reviewer, job.id, preview.token)

    done = anyio.run(scenario)
    assert loads == [done.job.id]
    assert done.job.state is JobState.APPLIED
    assert [a.status.value for a in done.job.actions] == ["done"]
