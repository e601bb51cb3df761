"""schemathesis against the served OpenAPI: no 5xx, no undocumented status, no response
that breaks its schema. Bounded: a fixed number of examples per operation."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from undogate.api.openapi import openapi_document
from undogate.jobs import Actor, ChangeRequest, PrepareRequest

from .worlds import AGENT, ApiWorld

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


OPERATIONS = [
    (method.upper(), path)
    for path, methods in openapi_document()["paths"].items()
    for method in methods
]


def _key(world: Any, method: str, path: str) -> str:
    if path.startswith("/api/v1/admin/"):
        return str(world.keys["master"])
    if path == "/api/v1/resources" or (path == "/api/v1/jobs" and method == "POST"):
        return str(world.keys["agent"])
    return str(world.keys["owner"])


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_api_conforms_to_its_openapi(api_world: ApiWorld, method: str, path: str) -> None:
    # A real job of the owner, so that job routes answer with receipts, not only 404s.
    owner_agent = Actor(AGENT.id, api_world.owner_id, "agent", "test")
    seed = api_world.gateway.prepare(
        owner_agent,
        "account-assistant",
        PrepareRequest("seed", (ChangeRequest(resource_id="customer", set={"status": "x"}),)),
    ).job.id
    schema = schemathesis.openapi.from_asgi("/openapi.json", api_world.app)
    operation = schema[path][method]
    key = _key(api_world, method, path)

    @given(case=operation.as_strategy())
    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        derandomize=True,
    )
    def check(case: Any) -> None:
        # Half the cases are steered onto real objects, so success answers get checked too.
        steer = len(str(case.body)) % 2 == 1
        if case.path_parameters and "job_id" in case.path_parameters and steer:
            case.path_parameters["job_id"] = seed
        if steer and isinstance(case.body, dict):
            if path == "/api/v1/jobs":
                value = str(case.body.get("summary") or "x")[:50]
                case.body = {
                    "summary": value or "x",
                    "changes": [{"resource": "customer", "set": {"owner": value}}],
                }
            elif path.endswith("/previews"):
                case.body = {"operation": "apply"}
        case.call_and_validate(headers={"Authorization": f"Bearer {key}"}, checks=CHECKS)

    check()
