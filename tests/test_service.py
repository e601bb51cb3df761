"""The one door every surface calls (``service.py``): one bearer parser, one
authentication, and surfaces that reach the gateway and the keyring only through it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import anyio
import pytest

from undogate.errors import Forbidden, NotFound, Unauthorized
from undogate.jobs import ChangeRequest, PrepareRequest
from undogate.service import MAX_KEY_CHARS, Service, bearer_key

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "undogate"
SURFACES = ("api", "web", "mcp")


def test_one_bearer_parser_words_its_refusal_as_the_surface_asks() -> None:
    assert bearer_key("Bearer  ugo_abc ", ask="x") == "ugo_abc"
    assert bearer_key("bearer ugo_abc", ask="x") == "ugo_abc"
    for header in ("", "Bearer", "Bearer   ", "Basic ugo_abc", "ugo_abc"):
        with pytest.raises(Unauthorized, match=r"^send it so$"):
            bearer_key(header, ask="send it so")


def test_authentication_refuses_what_no_key_can_be(api_world: Any) -> None:
    service = Service(api_world.gateway, api_world.keyring)
    with pytest.raises(Unauthorized, match="missing, unknown or revoked"):
        anyio.run(service.authenticate, "ugo_" + "a" * MAX_KEY_CHARS)
    with pytest.raises(Unauthorized, match=r"^as /mcp words it$"):
        anyio.run(
            lambda: service.authenticate_bearer(
                "Bearer " + "a" * (MAX_KEY_CHARS + 1), ask="-", over_long="as /mcp words it"
            )
        )
    principal = anyio.run(service.authenticate, api_world.keys["owner"])
    assert principal.kind == "operator"
    with pytest.raises(Forbidden):
        anyio.run(service.sign_in, api_world.keys["agent"])


def test_a_job_is_seen_only_by_its_owner_and_acted_on_only_with_write(api_world: Any) -> None:
    service = Service(api_world.gateway, api_world.keyring)

    async def scenario() -> None:
        agent = await service.authenticate(api_world.keys["agent"])
        request = PrepareRequest(
            summary="promote",
            changes=(ChangeRequest(resource_id="customer", set={"status": "customer"}),),
        )
        job = (await service.prepare(agent, "api", request)).job
        owner = await service.authenticate(api_world.keys["owner"])
        assert (await service.job(owner, job.id)).id == job.id
        other = await service.authenticate(api_world.keys["other_operator"])
        with pytest.raises(NotFound):
            await service.job(other, job.id)
        reader = await service.authenticate(api_world.keys["reader"])
        with pytest.raises(NotFound):  # the reader is another owner: nothing to see
            await service.job(reader, job.id)
        with pytest.raises(Forbidden):
            await service.reject(reader, "api", job.id)
        with pytest.raises(Forbidden):  # an agent token reads no jobs
            await service.job(agent, job.id)

    anyio.run(scenario)


def test_surfaces_reach_the_gateway_and_keyring_only_through_the_service() -> None:
    found: list[str] = []
    for surface in SURFACES:
        for path in sorted((PACKAGE / surface).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in ("gateway", "keyring"):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} .{node.attr}")
    assert found == []
