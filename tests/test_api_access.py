"""The access matrix: every route by every kind of caller, each with its expected status."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from undogate.jobs import Actor, ChangeRequest, JobState, Operation, PrepareRequest

from .worlds import ApiWorld

CALLERS = (
    "none",
    "bad",
    "agent",
    "other_agent",
    "owner",
    "other_operator",
    "reader",
    "master",
)
PATH = "/records/customer-123"


def row(*statuses: int) -> dict[str, int]:
    assert len(statuses) == len(CALLERS)
    return dict(zip(CALLERS, statuses, strict=True))


# (name, method, path template, body template, job state needed, expected per caller)
#                               none bad  agent oagent owner other reader master
MATRIX: list[tuple[str, str, str, Any, str | None, dict[str, int]]] = [
    ("healthz", "GET", "/healthz", None, None, row(200, 200, 200, 200, 200, 200, 200, 200)),
    ("openapi", "GET", "/openapi.json", None, None, row(200, 200, 200, 200, 200, 200, 200, 200)),
    (
        "agent_info",
        "GET",
        "/api/v1/agent",
        None,
        None,
        row(401, 401, 200, 200, 403, 403, 403, 403),
    ),
    (
        "resources",
        "GET",
        "/api/v1/resources",
        None,
        None,
        row(401, 401, 200, 200, 403, 403, 403, 403),
    ),
    (
        "prepare",
        "POST",
        "/api/v1/jobs",
        {"summary": "Promote", "changes": [{"resource": "customer", "set": {"status": "vip"}}]},
        None,
        row(401, 401, 201, 404, 403, 403, 403, 403),
    ),
    (
        "list",
        "GET",
        "/api/v1/jobs?agent=account-assistant",
        None,
        "prepared",
        row(401, 401, 403, 403, 200, 200, 200, 403),
    ),
    (
        "detail",
        "GET",
        "/api/v1/jobs/{job}",
        None,
        "prepared",
        row(401, 401, 403, 403, 200, 404, 200, 403),
    ),
    (
        "events",
        "GET",
        "/api/v1/jobs/{job}/events",
        None,
        "prepared",
        row(401, 401, 403, 403, 200, 404, 200, 403),
    ),
    (
        "webhook_messages",
        "GET",
        "/api/v1/webhooks/messages",
        None,
        None,
        row(401, 401, 403, 403, 200, 200, 200, 403),
    ),
    (
        "preview_apply",
        "POST",
        "/api/v1/jobs/{job}/previews",
        {"operation": "apply"},
        "prepared",
        row(401, 401, 403, 403, 200, 404, 403, 403),
    ),
    (
        "preview_undo",
        "POST",
        "/api/v1/jobs/{job}/previews",
        {"operation": "undo"},
        "applied",
        row(401, 401, 403, 403, 200, 404, 403, 403),
    ),
    (
        "preview_reconcile",
        "POST",
        "/api/v1/jobs/{job}/previews",
        {"operation": "accept_observed"},
        "needs_review",
        row(401, 401, 403, 403, 200, 404, 403, 403),
    ),
    (
        "confirm_apply",
        "POST",
        "/api/v1/jobs/{job}/confirm",
        {"preview_token": "{token}"},
        "previewed_apply",
        row(401, 401, 403, 403, 200, 404, 403, 403),
    ),
    (
        "confirm_undo",
        "POST",
        "/api/v1/jobs/{job}/confirm",
        {"preview_token": "{token}"},
        "previewed_undo",
        row(401, 401, 403, 403, 200, 404, 403, 403),
    ),
    (
        "reject",
        "POST",
        "/api/v1/jobs/{job}/reject",
        None,
        "prepared",
        row(401, 401, 403, 403, 200, 404, 403, 403),
    ),
    (
        # Every caller that may run a check reaches the check itself, which refuses a
        # resource that is not a test copy (the happy path: test_endpoint_check.py).
        "endpoint_check",
        "POST",
        "/api/v1/endpoint-checks",
        {"resource": "customer"},
        None,
        row(401, 401, 403, 403, 400, 400, 403, 403),
    ),
    (
        "undo_offer",
        "GET",
        "/api/v1/resources/customer/undo-offer",
        None,
        None,
        row(401, 401, 403, 403, 200, 200, 200, 403),
    ),
    (
        # Nothing verified for customer: every caller that may accept reaches the refusal
        # (the happy path: test_collection_check.py, test_mcp_collections.py).
        "undo_acceptance",
        "POST",
        "/api/v1/resources/customer/undo-acceptance",
        {},
        None,
        row(401, 401, 403, 403, 409, 409, 403, 403),
    ),
    (
        "inbox",
        "GET",
        "/api/v1/inbox?view=waiting",
        None,
        "prepared",
        row(401, 401, 403, 403, 200, 200, 200, 403),
    ),
    (
        # Another owner's job in a bulk reject is an outcome (not_found), not a refusal.
        "inbox_reject",
        "POST",
        "/api/v1/inbox/reject",
        {"jobs": ["{job}"], "reason": "stale"},
        "prepared",
        row(401, 401, 403, 403, 200, 200, 403, 403),
    ),
    (
        # Nobody in this world is opted in to job_status (tests/test_job_status.py is).
        "job_status",
        "GET",
        "/api/v1/jobs/{job}/status",
        None,
        "prepared",
        row(401, 401, 403, 403, 403, 403, 403, 403),
    ),
    (
        "export_events",
        "GET",
        "/api/v1/admin/events?since=1h",
        None,
        None,
        row(401, 401, 403, 403, 403, 403, 403, 200),
    ),
    (
        "export_jobs",
        "GET",
        "/api/v1/admin/jobs?since=1h",
        None,
        None,
        row(401, 401, 403, 403, 403, 403, 403, 200),
    ),
    (
        "admin_list",
        "GET",
        "/api/v1/admin/keys",
        None,
        None,
        row(401, 401, 403, 403, 403, 403, 403, 200),
    ),
    (
        "admin_create",
        "POST",
        "/api/v1/admin/keys",
        {"kind": "operator", "label": "new"},
        None,
        row(401, 401, 403, 403, 403, 403, 403, 201),
    ),
    (
        "admin_revoke",
        "POST",
        "/api/v1/admin/keys/{credential}/revoke",
        {},
        None,
        row(401, 401, 403, 403, 403, 403, 403, 200),
    ),
    (
        # Only the master key, which lives with the server, ever makes an enrolment code:
        # an operator key, keys:admin or not, is the very thing the code guards against.
        "passkey_enrol",
        "POST",
        "/api/v1/admin/passkey-enrolments",
        {"owner": "{credential}"},
        None,
        row(401, 401, 403, 403, 403, 403, 403, 201),
    ),
]


def _job_in_state(world: Any, caller: str, state: str) -> tuple[str, str | None]:
    """A job owned by the caller's owner (the reader owns its own jobs, so that the
    matrix shows its missing scope, not someone else's privacy), in ``state``."""
    gw = world.gateway
    owner_id = world.reader_id if caller == "reader" else world.owner_id
    world.server.reset()
    agent = Actor("account-assistant", owner_id, "agent", "test")
    reviewer = Actor(owner_id, owner_id, "operator", "test")
    request = PrepareRequest(
        summary="Promote the lead",
        changes=(ChangeRequest(resource_id="customer", set={"status": "customer"}),),
    )
    job_id = gw.prepare(agent, "account-assistant", request).job.id
    if state == "prepared":
        return job_id, None
    if state == "previewed_apply":
        return job_id, gw.preview(reviewer, job_id, Operation.APPLY).token
    if state == "needs_review":
        world.server.arm("apply_then_500", PATH)
    token = gw.preview(reviewer, job_id, Operation.APPLY).token
    assert token is not None
    done = gw.confirm(reviewer, job_id, token).job
    assert done.state is (JobState.NEEDS_REVIEW if state == "needs_review" else JobState.APPLIED)
    if state == "previewed_undo":
        return job_id, gw.preview(reviewer, job_id, Operation.UNDO).token
    return job_id, None


def _fill(value: Any, job: str, token: str, credential: str) -> Any:
    if isinstance(value, str):
        return (
            value.replace("{job}", job)
            .replace("{token}", token)
            .replace("{credential}", credential)
        )
    if isinstance(value, dict):
        return {k: _fill(v, job, token, credential) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, job, token, credential) for v in value]
    return value


@pytest.fixture
def world(api_world: ApiWorld) -> ApiWorld:
    return api_world


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("entry", MATRIX, ids=[m[0] for m in MATRIX])
def test_access_matrix(world: Any, entry: tuple[Any, ...], caller: str) -> None:
    name, method, path, body, state, expected = entry
    job, token = ("job_0000000000000000", None)
    if state is not None:
        job, token = _job_in_state(world, caller, state)
    credential = ""
    if name == "admin_revoke":
        credential = world.keyring.create_operator(label="throwaway").credential.id
    if name == "passkey_enrol":
        credential = world.owner_id
    url = _fill(path, job, token or "", credential)
    payload = _fill(body, job, token or "", credential)
    headers = {}
    key = world.keys.get(caller)  # "none" sends no key
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    writes_before = world.server.write_count(PATH)
    with TestClient(world.app) as client:
        response = client.request(method, url, json=payload, headers=headers)
    assert response.status_code == expected[caller], (name, caller, response.text)
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    if url.startswith("/api/"):
        assert response.headers["cache-control"] == "no-store"
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"code", "message", "details"}
        if response.status_code == 401:
            assert error["code"] == "unauthorized"
            assert response.headers["www-authenticate"].startswith("Bearer")
        if response.status_code == 403:
            assert error["code"] == "forbidden"
        # A refused caller never causes an external write.
        assert world.server.write_count(PATH) == writes_before
    if name == "list" and caller == "other_operator":
        assert response.json()["jobs"] == []
    if name == "resources" and caller == "other_agent":
        assert [r["id"] for r in response.json()["resources"]] == ["supplier"]


def test_agent_tokens_never_review_any_operation(world: Any) -> None:
    """Whatever the state and operation, an agent token gets 403 on every review route."""
    with TestClient(world.app) as client:
        for state in ("prepared", "applied", "needs_review"):
            job, _ = _job_in_state(world, "owner", state)
            for key in ("agent", "other_agent"):
                auth = {"Authorization": f"Bearer {world.keys[key]}"}
                for op in ("apply", "undo", "accept_observed"):
                    r = client.post(
                        f"/api/v1/jobs/{job}/previews", json={"operation": op}, headers=auth
                    )
                    assert r.status_code == 403, r.text
                for suffix in ("confirm", "reject"):
                    r = client.post(
                        f"/api/v1/jobs/{job}/{suffix}",
                        json={"preview_token": "x"},
                        headers=auth,
                    )
                    assert r.status_code == 403, r.text


def test_the_matrix_covers_every_api_route() -> None:
    from starlette.routing import Route

    from undogate.api import api_routes
    from undogate.api.export import export_routes
    from undogate.api.inbox import inbox_routes

    served = {
        (
            method,
            route.path.replace("{job_id}", "{job}")
            .replace("{credential_id}", "{credential}")
            .replace("{resource_id}", "customer"),
        )
        for route in (*api_routes(), *inbox_routes(), *export_routes())
        if isinstance(route, Route) and route.include_in_schema
        for method in (route.methods or set()) - {"HEAD"}
    }
    covered = {(method, path.split("?")[0]) for _, method, path, *_ in MATRIX}
    assert served - covered == set()
