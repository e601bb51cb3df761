"""API behaviour beyond access: lossless bodies, error shape, privacy, re-authorisation."""

from __future__ import annotations

import json
from typing import Any

from starlette.testclient import TestClient

from undogate.jsonvalue import JsonNumber, loads

from .worlds import ApiWorld

PATH = "/records/customer-123"
BIG = "98765432109876543210987654321098765432.10000000000000000000001"


def auth(world: Any, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.keys[who]}", "Content-Type": "application/json"}


def prepare(client: TestClient, world: Any, body: str) -> Any:
    return client.post("/api/v1/jobs", content=body, headers=auth(world, "agent"))


def test_bodies_are_lossless_and_duplicate_keys_are_refused(api_world: ApiWorld) -> None:
    with TestClient(api_world.app) as client:
        made = prepare(
            client,
            api_world,
            '{"summary": "s", "changes": [{"resource": "customer", "set": {"balance": '
            + BIG
            + "}}]}",
        )
        assert made.status_code == 201, made.text
        job = client.get(f"/api/v1/jobs/{made.json()['job_id']}", headers=auth(api_world, "owner"))
        assert BIG in job.text  # the exact text, not a float
        after: Any = loads(job.content)["changes"][0]["after"]  # type: ignore[index,call-overload]
        assert after["balance"] == JsonNumber(BIG)
        dup = prepare(client, api_world, '{"summary": "a", "summary": "b", "changes": []}')
        assert dup.status_code == 400
        assert dup.json()["error"]["code"] == "invalid_request"
        assert dup.json()["error"]["details"]["reason"] == "duplicate_key"
        for bad in ("[1]", "{", '{"summary": NaN}', '{"summary": "s", "extra": 1}'):
            r = prepare(client, api_world, bad)
            assert r.status_code == 400, (bad, r.text)
        wrong_type = client.post(
            "/api/v1/jobs",
            content=b'{"summary":"s"}',
            headers={**auth(api_world, "agent"), "Content-Type": "text/plain"},
        )
        assert wrong_type.status_code == 415
        big = client.post(
            "/api/v1/jobs", content=b" " * (1024 * 1024 + 1), headers=auth(api_world, "agent")
        )
        assert big.status_code == 413


def test_replay_returns_the_original_job_and_reuse_is_refused(api_world: ApiWorld) -> None:
    body = (
        '{"summary": "s", "idempotency_key": "k1", "changes": '
        '[{"resource": "customer", "set": {"status": "%s"}}]}'
    )
    with TestClient(api_world.app) as client:
        first = prepare(client, api_world, body % "a")
        again = prepare(client, api_world, body % "a")
        assert (first.status_code, again.status_code) == (201, 200)
        assert again.json()["replay"] is True
        assert again.json()["job_id"] == first.json()["job_id"]
        reused = prepare(client, api_world, body % "b")
        assert reused.status_code == 409
        assert reused.json()["error"]["code"] == "idempotency_key_reused"


def test_agent_receipt_and_resources_carry_no_values_urls_or_tokens(api_world: ApiWorld) -> None:
    with TestClient(api_world.app) as client:
        res = client.get("/api/v1/resources", headers=auth(api_world, "agent"))
        made = prepare(
            client,
            api_world,
            '{"summary": "s", "changes": [{"resource": "customer", "set": {"status": "zz9"}}]}',
        )
        listing = client.get(
            "/api/v1/jobs?agent=account-assistant", headers=auth(api_world, "owner")
        )
    for text in (res.text, made.text):
        assert "http://" not in text and "127.0.0.1" not in text
    receipt = made.json()
    assert "zz9" not in made.text and "lead" not in made.text
    assert receipt["changes"] == [
        {"resource": "customer", "kind": "json_record", "fields": ["status"]}
    ]
    assert receipt["review_path"] == f"/jobs/{receipt['job_id']}"
    assert "person" in receipt["review"]
    assert "zz9" not in listing.text and "lead" not in listing.text  # lists carry no values


def test_caller_supplied_labels_are_marked(api_world: ApiWorld) -> None:
    with TestClient(api_world.app) as client:
        made = prepare(
            client,
            api_world,
            '{"summary": "s", "attribution_label": "from crm", "changes": [{"resource": '
            '"customer", "set": {"status": "q"}, "assertion_kind": "imported"}]}',
        )
        job = client.get(
            f"/api/v1/jobs/{made.json()['job_id']}", headers=auth(api_world, "owner")
        ).json()
    assert job["attribution_label"] == {
        "value": "from crm",
        "caller_supplied": True,
        "verified": False,
    }
    assert job["changes"][0]["assertion_kind"]["value"] == "imported"
    assert job["changes"][0]["assertion_kind"]["caller_supplied"] is True
    assert job["summary"]["supplied_by"] == "agent"


def test_confirm_rechecks_the_credential_before_each_dispatch(api_world: ApiWorld) -> None:
    keyring = api_world.keyring
    original = keyring.recheck
    owner_id = api_world.owner_id

    def revoke_then_recheck(principal: Any) -> Any:
        # The reviewer's key is revoked between the confirm request and the dispatch.
        if keyring.get(owner_id).revoked_at is None:
            keyring.revoke(owner_id, force=True)
        return original(principal)

    with TestClient(api_world.app) as client:
        made = prepare(
            client,
            api_world,
            '{"summary": "s", "changes": [{"resource": "customer", "set": {"status": "r"}}]}',
        )
        job_id = made.json()["job_id"]
        preview = client.post(
            f"/api/v1/jobs/{job_id}/previews",
            json={"operation": "apply"},
            headers=auth(api_world, "owner"),
        )
        token = preview.json()["preview_token"]
        keyring.recheck = revoke_then_recheck  # type: ignore[method-assign]
        done = client.post(
            f"/api/v1/jobs/{job_id}/confirm",
            json={"preview_token": token},
            headers=auth(api_world, "owner"),
        )
    # Revoked before the first write: refused, nothing recorded as sent, nothing written.
    assert done.status_code == 401, done.text
    assert done.json()["error"]["code"] == "unauthorized"
    assert api_world.server.write_count(PATH) == 0
    job = api_world.gateway.ledger.load_job(job_id)
    assert job is not None
    assert job.state.value == "prepared" and job.actions == ()


def test_unknown_routes_and_methods_use_the_error_shape(api_world: ApiWorld) -> None:
    with TestClient(api_world.app) as client:
        missing = client.get("/nope")
        wrong = client.delete("/api/v1/jobs")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"
    for r in (missing, wrong):
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "no-referrer"


def test_receipt_views_mark_absent_fields_and_diff_text_by_line() -> None:
    from undogate.adapters import field_rows, text_diff

    rows = field_rows(["a", "b"], {"a": "1"}, {"b": JsonNumber("2")})
    assert rows == [
        {"field": "a", "before": "1", "before_present": True, "after": None,
         "after_present": False, "changes": True},
        {"field": "b", "before": None, "before_present": False, "after": JsonNumber("2"),
         "after_present": True, "changes": True},
    ]  # fmt: skip
    diff = text_diff("a\nb\n", "a\nc\n")
    assert [(d["op"], d["line"]) for d in diff] == [  # type: ignore[index,call-overload]
        ("@", "@@ -1,2 +1,2 @@"),
        (" ", "a"),
        ("-", "b"),
        ("+", "c"),
    ]


def test_a_write_only_key_cannot_see_values_through_a_preview(api_world: ApiWorld) -> None:
    from undogate.auth import WRITE

    write_only = api_world.keyring.create_operator(label="write only", scopes=(WRITE,))
    client = TestClient(api_world.app)
    made = prepare(
        client,
        api_world,
        '{"summary": "s", "changes": [{"resource": "customer", "set": {"status": "x"}}]}',
    )
    job_id = made.json()["job_id"]
    headers = {"Authorization": f"Bearer {write_only.key}"}
    preview = client.post(
        f"/api/v1/jobs/{job_id}/previews", headers=headers, json={"operation": "apply"}
    )
    assert preview.status_code == 403
    assert '"x"' not in preview.text


def test_every_blocked_preview_is_a_409_with_what_blocks_each_change(api_world: ApiWorld) -> None:
    """A guard that blocks a preview answers one shape whatever the guard (docs/operating.md): 409,
    its code, and per blocked change what blocks it, never a 200 without a token."""
    owner = auth(api_world, "owner")
    with TestClient(api_world.app) as client:

        def job(status: str) -> str:
            change = {"resource": "customer", "set": {"status": status}}
            body = json.dumps({"summary": "s", "changes": [change]})
            return str(prepare(client, api_world, body).json()["job_id"])

        def preview(job_id: str, operation: str) -> Any:
            return client.post(
                f"/api/v1/jobs/{job_id}/previews", json={"operation": operation}, headers=owner
            )

        def apply(job_id: str) -> None:
            token = preview(job_id, "apply").json()["preview_token"]
            done = client.post(
                f"/api/v1/jobs/{job_id}/confirm", json={"preview_token": token}, headers=owner
            )
            assert done.json()["job"]["state"] == "applied", done.text

        edited = job("customer")
        apply(edited)
        api_world.server.set_field(PATH, "/status", "edited by someone else")
        conflict = preview(edited, "undo")
        api_world.server.arm("apply_then_500", PATH)
        uncertain = job("gold")
        token = preview(uncertain, "apply").json()["preview_token"]
        client.post(
            f"/api/v1/jobs/{uncertain}/confirm", json={"preview_token": token}, headers=owner
        )
        quarantined = preview(job("silver"), "apply")

    for answer, code in ((conflict, "conflict"), (quarantined, "quarantined")):
        assert answer.status_code == 409, answer.text
        assert answer.headers["cache-control"] == "no-store"
        error = answer.json()["error"]
        assert error["code"] == code
        (blocker,) = error["details"]["blockers"]
        assert blocker["change"] == 0 and blocker["resource"] == "customer"
        assert blocker["code"] == code and blocker["message"] == error["message"]
    # The reviewer still sees what the undo would have written over what.
    (change,) = conflict.json()["error"]["details"]["preview"]["changes"]
    assert change["current"]["status"] == "edited by someone else"
    assert change["planned"]["status"] == "lead"
