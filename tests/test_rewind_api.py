"""Rewind and stopping an agent through the HTTP API (docs/rewind.md): the plan, its one
preview and confirmation, what another owner sees, and the stop's stable code."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from .worlds import ApiWorld

PATH = "/records/customer-123"
AGENT = "account-assistant"
WINDOW = {"agent": AGENT, "since": "1h"}


def auth(world: ApiWorld, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.keys[who]}"}


def applied_job(client: TestClient, world: ApiWorld, **prepare: Any) -> str:
    """A job the agent prepares (``prepare``: extra members), applied by the owner."""
    body = {"summary": "s", "changes": [{"resource": "customer", "set": {}}], **prepare}
    made = client.post("/api/v1/jobs", json=body, headers=auth(world, "agent"))
    assert made.status_code == 201, made.text
    job_id = str(made.json()["job_id"])
    preview = client.post(
        f"/api/v1/jobs/{job_id}/previews", json={"operation": "apply"}, headers=auth(world, "owner")
    )
    token = preview.json()["preview_token"]
    done = client.post(
        f"/api/v1/jobs/{job_id}/confirm",
        json={"preview_token": token},
        headers=auth(world, "owner"),
    )
    assert done.status_code == 200, done.text
    return job_id


def change(field: str, value: str) -> list[dict[str, Any]]:
    return [{"resource": "customer", "set": {field: value}}]


def test_a_session_is_rewound_through_the_api_in_one_confirmation(api_world: ApiWorld) -> None:
    with TestClient(api_world.app) as client:
        first = applied_job(client, api_world, changes=change("status", "customer"), session="s1")
        second = applied_job(client, api_world, changes=change("status", "vip"), session="s1")
        other = applied_job(client, api_world, changes=change("tier", "gold"), session="s2")
        made = client.post(
            "/api/v1/rewinds",
            json={"agent": AGENT, "since": "1h", "session": "s1"},
            headers=auth(api_world, "owner"),
        )
        assert made.status_code == 201, made.text
        plan = made.json()
        assert plan["rewind_id"].startswith("rw_")
        assert [s["job"] for s in plan["steps"]] == [second, first]
        assert [s["verdict"] for s in plan["steps"]] == ["undo", "undo"]
        base = f"/api/v1/rewinds/{plan['rewind_id']}"
        preview = client.post(base + "/preview", headers=auth(api_world, "owner")).json()
        assert [r["step"] for r in preview["requests"]] == [1, 2]
        # The second write's version is the one the first leaves: named, not guessed.
        assert preview["requests"][1]["if_match_from_step"] == 1
        assert "If-Match" not in preview["requests"][1]["headers"]
        assert preview["requests"][0]["headers"]["If-Match"]
        done = client.post(
            base + "/confirm",
            json={"preview_token": preview["preview_token"]},
            headers=auth(api_world, "owner"),
        )
        assert done.status_code == 200, done.text
        report = client.get(base, headers=auth(api_world, "owner")).json()
    assert report["state"] == "finished"
    assert report["jobs"] == {second: "done", first: "done"}
    record = api_world.server.get_record(PATH)
    assert record["status"] == "lead" and record["tier"] == "gold"  # s2's job stays
    assert api_world.gateway.ledger.load_job(other).state.value == "applied"  # type: ignore[union-attr]
    # The plan and its run are in the hash chain, beside the jobs' own undo events.
    events = api_world.gateway.ledger.read(lambda tx: tx.events_since(0, 0, 1000))
    ours = [e.operation for e in events if e.target == plan["rewind_id"]]
    assert ours == ["rewind_planned", "rewind_previewed", "rewind_confirmed", "rewind_finished"]


def test_another_owner_sees_no_plan_and_a_reader_makes_none(api_world: ApiWorld) -> None:
    with TestClient(api_world.app) as client:
        applied_job(client, api_world, changes=change("status", "customer"))
        made = client.post(
            "/api/v1/rewinds",
            json={"agent": AGENT, "since": "1h"},
            headers=auth(api_world, "owner"),
        ).json()
        base = f"/api/v1/rewinds/{made['rewind_id']}"
        for method, path in (("GET", base), ("POST", base + "/preview")):
            seen = client.request(method, path, headers=auth(api_world, "other_operator"))
            assert seen.status_code == 404, seen.text
            assert seen.json()["error"]["code"] == "not_found"
        # The other owner's own plan of the agent finds none of the owner's jobs.
        theirs = client.post(
            "/api/v1/rewinds",
            json={"agent": AGENT, "since": "1h"},
            headers=auth(api_world, "other_operator"),
        )
        assert theirs.status_code == 404 and "nothing to rewind" in theirs.text
        read_only = client.post(
            "/api/v1/rewinds",
            json={"agent": AGENT, "since": "1h"},
            headers=auth(api_world, "reader"),
        )
        assert read_only.status_code == 403
        # Each operator key is its own owner: the reader's key sees none of this owner's plans.
        assert client.get(base, headers=auth(api_world, "reader")).status_code == 404


def test_a_stopped_agent_is_refused_and_its_waiting_jobs_held_until_resumed(
    api_world: ApiWorld,
) -> None:
    stop = f"/api/v1/agents/{AGENT}/stop"
    with TestClient(api_world.app) as client:
        body = {"summary": "s", "changes": change("status", "customer")}
        waiting = client.post("/api/v1/jobs", json=body, headers=auth(api_world, "agent"))
        job_id = waiting.json()["job_id"]
        preview = client.post(
            f"/api/v1/jobs/{job_id}/previews",
            json={"operation": "apply"},
            headers=auth(api_world, "owner"),
        ).json()
        stopped = client.post(stop, headers=auth(api_world, "owner"))
        assert stopped.status_code == 200 and stopped.json()["stopped"] is True
        refused = client.post("/api/v1/jobs", json=body, headers=auth(api_world, "agent"))
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "agent_stopped"
        held = client.post(
            f"/api/v1/jobs/{job_id}/confirm",
            json={"preview_token": preview["preview_token"]},
            headers=auth(api_world, "owner"),
        )
        assert held.status_code == 409 and held.json()["error"]["code"] == "agent_stopped"
        assert api_world.server.write_count(PATH) == 0
        assert client.get(stop, headers=auth(api_world, "owner")).json()["stopped"] is True
        # Per owner: the reader's key (another owner) finds the agent running.
        assert client.get(stop, headers=auth(api_world, "reader")).json()["stopped"] is False
        resumed = client.post(f"/api/v1/agents/{AGENT}/resume", headers=auth(api_world, "owner"))
        assert resumed.json()["stopped"] is False
        done = client.post(
            f"/api/v1/jobs/{job_id}/confirm",
            json={"preview_token": preview["preview_token"]},
            headers=auth(api_world, "owner"),
        )
        assert done.status_code == 200, done.text
        body["changes"] = change("status", "vip")
        again = client.post("/api/v1/jobs", json=body, headers=auth(api_world, "agent"))
        assert again.status_code == 201, again.text
    events = api_world.gateway.ledger.read(lambda tx: tx.events_since(0, 0, 1000))
    acts = [e.operation for e in events if e.target == AGENT]
    assert acts == ["agent_stopped", "agent_resumed"]


def test_a_stopped_agent_cannot_resume_itself_nor_plan_read_or_confirm_a_rewind(
    api_world: ApiWorld,
) -> None:
    """The kill switch is a person's: the agent's own key is refused on every rewind and
    stop route, and the agent stays stopped. A plan's blocked steps show current values,
    which an agent never sees."""
    with TestClient(api_world.app) as client:
        applied_job(client, api_world, changes=change("status", "customer"))
        api_world.server.set_field(PATH, "/status", "edited outside")  # a blocked step
        plan = client.post("/api/v1/rewinds", json=WINDOW, headers=auth(api_world, "owner"))
        assert plan.status_code == 201, plan.text
        base = f"/api/v1/rewinds/{plan.json()['rewind_id']}"
        stop = f"/api/v1/agents/{AGENT}"
        assert client.post(f"{stop}/stop", headers=auth(api_world, "owner")).status_code == 200
        agent = auth(api_world, "agent")
        for method, path, body in (
            ("POST", f"{stop}/resume", None),
            ("POST", f"{stop}/stop", None),
            ("GET", stop + "/stop", None),
            ("POST", "/api/v1/rewinds", WINDOW),
            ("GET", base, None),
            ("POST", f"{base}/preview", {}),
            ("POST", f"{base}/confirm", {"preview_token": "x"}),
        ):
            answer = client.request(method, path, json=body, headers=agent)
            assert answer.status_code == 403, (path, answer.text)
            assert "edited outside" not in answer.text
        held = client.get(f"{stop}/stop", headers=auth(api_world, "owner")).json()
        assert held["stopped"] is True
