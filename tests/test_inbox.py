"""The review inbox (docs/operating.md) through the API, the review pages and the CLI: across
agents, only the key's own owner's jobs of the agents it sees, every filter, keyset pages
past the newest 100, counts per state, bulk reject with one confirmation, and a reject's
reason in the history."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.testclient import TestClient

from undogate.auth import READ, Keyring
from undogate.config import parse_config
from undogate.contract_server import ContractServer
from undogate.jobs import Actor, ChangeRequest, JobState, Operation, PrepareRequest
from undogate.operations.inbox import parse_time

from .serving import cli
from .test_cli_review import Terminal, prepare, reviewer_env
from .worlds import ApiWorld, resource

MANY = {
    "limits": {
        "max_prepares_per_minute": 1000,
        "prepare_burst": 500,
        "max_unresolved_jobs_per_agent": 500,
    }
}


def _prepare(world: Any, agent: str, resource: str, owner: str | None = None) -> str:
    if resource == "supplier" and "/records/supplier-7" not in world.server.paths():
        world.server.set_record("/records/supplier-7", {"status": "active", "owner": "kim"})
    actor = Actor(agent, owner or world.owner_id, "agent", "test")
    request = PrepareRequest("s", (ChangeRequest(resource_id=resource, set={"status": "x"}),))
    return str(world.gateway.prepare(actor, agent, request).job.id)


BAD_QUERIES = (
    ("?view=all", "view"),
    ("?state=done", "state"),
    ("?since=yesterday", "since"),
    ("?id=job%25", "id"),
    ("?limit=101", "limit"),
    ("?limit=%C2%B2", "limit"),  # a digit to str.isdigit, not to int()
)


def _get(client: TestClient, key: str, query: str = "") -> Any:
    return client.get(f"/api/v1/inbox{query}", headers={"Authorization": f"Bearer {key}"})


def test_the_api_inbox_spans_agents_and_shows_only_what_the_key_may_see(
    api_world: ApiWorld,
) -> None:
    w = api_world
    mine = _prepare(w, "account-assistant", "customer")
    other_agent = _prepare(w, "other-agent", "supplier")
    bob_id = w.keyring.authenticate(w.keys["other_operator"]).owner_id
    bobs = _prepare(w, "account-assistant", "customer", owner=bob_id)
    limited = w.keyring.create_operator(label="only other-agent", agents=("other-agent",))
    with TestClient(w.app) as client:
        listed = _get(client, w.keys["owner"])
        assert listed.status_code == 200, listed.text
        ids = [j["id"] for j in listed.json()["jobs"]]
        assert ids == [other_agent, mine] and bobs not in ids  # newest first, own owner only
        row = listed.json()["jobs"][1]
        assert row["agent"] == "account-assistant" and row["resources"] == ["customer"]
        assert row["review_path"] == f"/jobs/{mine}" and "x" not in str(row)  # never a value
        assert listed.json()["counts"] == {"prepared": 2}
        assert [j["id"] for j in _get(client, w.keys["other_operator"]).json()["jobs"]] == [bobs]
        # A key limited to some agents sees those agents' jobs only, and may not name others.
        assert [j["id"] for j in _get(client, limited.key).json()["jobs"]] == []
        refused = _get(client, limited.key, "?agent=account-assistant")
        assert refused.status_code == 403
        unknown = _get(client, w.keys["owner"], "?agent=nobody")
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
        assert _get(client, w.keys["agent"]).status_code == 403  # agents have no inbox
        filtered = _get(client, w.keys["owner"], "?agent=other-agent&resource=supplier")
        assert [j["id"] for j in filtered.json()["jobs"]] == [other_agent]
        assert _get(client, w.keys["owner"], f"?id={mine[:10]}").json()["jobs"][0]["id"] == mine
        for bad, field in BAD_QUERIES:
            answer = _get(client, w.keys["owner"], bad)
            assert answer.status_code == 400, bad
            assert answer.json()["error"]["details"]["field"] == field


def test_the_export_refuses_a_cursor_that_is_not_ascii_digits(api_world: ApiWorld) -> None:
    master = {"Authorization": f"Bearer {api_world.keys['master']}"}
    with TestClient(api_world.app) as client:
        for after in ("%C2%B2", "x1"):
            answer = client.get(f"/api/v1/admin/events?since=1h&after={after}", headers=master)
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["code"] == "invalid_request"


@pytest.fixture
def busy_world(server: ContractServer, data_dir: Path, open_gateway: Any) -> Any:
    """api_world's shape, with quotas that let one agent prepare 130 jobs at once."""
    from undogate.api import create_app
    from undogate.service import Service

    config = parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": [resource(server, "customer", "/records/customer-123")],
            "agents": [{"id": "account-assistant", "tools": ["prepare_changes"]}],
            **MANY,
        }
    )
    gw = open_gateway(config)
    keyring = Keyring(gw.ledger, known_agents=lambda: {"account-assistant"})
    owner = keyring.create_operator(label="alice")
    return SimpleNamespace(
        gateway=gw,
        server=server,
        app=create_app(Service(gw, keyring)),
        owner_id=owner.credential.id,
        keys={"owner": owner.key},
    )


def test_views_states_time_and_keyset_pages_past_the_newest_100(busy_world: Any) -> None:
    w = busy_world
    gw = w.gateway
    reviewer = Actor(w.owner_id, w.owner_id, "operator", "test")
    ids = [_prepare(w, "account-assistant", "customer") for _ in range(130)]
    gw.reject(reviewer, ids[0], "stale")
    w.server.arm("apply_then_500", "/records/customer-123")
    token = gw.preview(reviewer, ids[1], Operation.APPLY).token
    assert token is not None
    assert gw.confirm(reviewer, ids[1], token).job.state is JobState.NEEDS_REVIEW
    with TestClient(w.app) as client:
        key = w.keys["owner"]
        first = _get(client, key).json()
        assert len(first["jobs"]) == 100 and first["jobs"][0]["id"] == ids[-1]
        second = _get(client, key, f"?after={first['next_after']}").json()
        assert [j["id"] for j in second["jobs"]] == ids[29::-1] and second["next_after"] is None
        assert first["counts"] == {"prepared": 128, "needs_review": 1, "quarantined": 1}
        quarantined = _get(client, key, "?view=quarantined").json()["jobs"]
        assert [j["id"] for j in quarantined] == [ids[1]] and quarantined[0]["quarantined"]
        assert [j["id"] for j in _get(client, key, "?view=needs_review").json()["jobs"]] == [ids[1]]
        assert [j["id"] for j in _get(client, key, "?state=rejected").json()["jobs"]] == [ids[0]]
        assert _get(client, key, "?view=waiting&state=rejected").json()["jobs"] == []
        assert _get(client, key, "?since=2999-01-01").json()["jobs"] == []
        assert len(_get(client, key, "?until=1m&limit=5").json()["jobs"]) == 0
        assert len(_get(client, key, "?since=1h&limit=5").json()["jobs"]) == 5


def test_parse_time_reads_durations_and_iso_dates() -> None:
    now = 1_800_000_000.0
    assert parse_time("7d", now, name="since") == now - 7 * 86400
    assert parse_time("30m", now, name="since") == now - 1800
    assert parse_time("2026-12-01", now, name="since") == 1796083200.0
    assert parse_time("2026-12-01T09:30Z", now, name="since") == 1796083200.0 + 9.5 * 3600
    with pytest.raises(Exception, match="a duration ago"):
        parse_time("last week", now, name="since")


def test_bulk_reject_and_a_reason_over_the_api(api_world: ApiWorld) -> None:
    w = api_world
    ids = [_prepare(w, "account-assistant", "customer") for _ in range(3)]
    bob_id = w.keyring.authenticate(w.keys["other_operator"]).owner_id
    bobs = _prepare(w, "account-assistant", "customer", owner=bob_id)
    reviewer = Actor(w.owner_id, w.owner_id, "operator", "test")
    w.gateway.reject(reviewer, ids[2])
    auth = {"Authorization": f"Bearer {w.keys['owner']}"}
    with TestClient(w.app) as client:
        done = client.post(
            "/api/v1/inbox/reject", json={"jobs": [*ids, bobs], "reason": "stale"}, headers=auth
        )
        assert done.status_code == 200, done.text
        outcomes = {o["job"]: o for o in done.json()["outcomes"]}
        assert outcomes[ids[0]]["rejected"] and outcomes[ids[1]]["rejected"]
        assert outcomes[ids[2]]["code"] == "transition_not_allowed"  # moved on: left, with why
        assert outcomes[bobs]["code"] == "not_found"  # another owner's: as if it did not exist
        events = client.get(f"/api/v1/jobs/{ids[0]}/events", headers=auth).json()["events"]
        assert events[-1]["operation"] == "reject" and events[-1]["detail"] == {"reason": "stale"}
        assert w.gateway.get_job(bob_id, bobs).state is JobState.PREPARED
        one = _prepare(w, "account-assistant", "customer")
        long = client.post(f"/api/v1/jobs/{one}/reject", json={"reason": "x" * 501}, headers=auth)
        assert long.status_code == 400 and long.json()["error"]["details"]["field"] == "reason"
        said = client.post(f"/api/v1/jobs/{one}/reject", json={"reason": " why "}, headers=auth)
        assert said.status_code == 200
        assert w.gateway.ledger.events(one)[-1].detail == {"reason": "why"}
        bodies: tuple[dict[str, object], ...] = (
            {"jobs": []},
            {"jobs": ["j"] * 101},
            {"jobs": [one], "reason": "a\x00b"},
        )
        for body in bodies:
            assert client.post("/api/v1/inbox/reject", json=body, headers=auth).status_code == 400
        reader = w.keyring.create_operator(label="reader", scopes=(READ,))
        refused = client.post(
            "/api/v1/inbox/reject",
            json={"jobs": [one]},
            headers={"Authorization": f"Bearer {reader.key}"},
        )
        assert refused.status_code == 403


# -- the review pages -------------------------------------------------------------------


def _signed_in(client: TestClient, key: str) -> str:
    from .test_web import csrf_of

    form = client.get("/signin").text
    client.post("/signin", data={"key": key, "csrf": csrf_of(form)})
    return csrf_of(client.get("/inbox").text)


def test_the_inbox_page_filters_counts_and_bulk_rejects_once(api_world: ApiWorld) -> None:
    from undogate.app import build_app

    w = api_world
    ids = [_prepare(w, "account-assistant", "customer") for _ in range(2)]
    other = _prepare(w, "other-agent", "supplier")
    app = build_app(w.service)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        csrf = _signed_in(client, w.keys["owner"])
        page = client.get("/inbox").text
        assert all(i in page for i in (*ids, other))
        assert re.search(r'class="count count-waiting" href="/inbox\?view=waiting">3 waiting', page)
        # The filters offer the agents the key sees and those agents' resources, each its own.
        offered = {
            name: re.findall(r'<option value="([^"]+)"', block)
            for name, block in re.findall(r'<select id="f-(\w+)".*?>(.*?)</select>', page, re.S)
        }
        assert {"account-assistant", "other-agent"} <= set(offered["agent"])
        assert {"customer", "supplier"} <= set(offered["resource"])
        assert not set(offered["agent"]) & set(offered["resource"])
        only = client.get("/inbox?agent=other-agent").text
        assert other in only and ids[0] not in only
        assert "3 waiting" in only  # the navigation counts every agent the key sees
        assert client.get("/inbox?since=soon").status_code == 400
        waiting = client.get("/inbox?view=waiting&agent=account-assistant").text
        assert 'href="/inbox/reject?agent=account-assistant"' in waiting
        confirm = client.get("/inbox/reject?agent=account-assistant").text
        assert ids[0] in confirm and other not in confirm and "Reject 2 jobs" in confirm
        hidden = re.search(r'name="jobs" value="([^"]+)"', confirm)
        assert hidden is not None and set(hidden.group(1).split()) == set(ids)
        done = client.post(
            "/inbox/reject", data={"csrf": csrf, "jobs": hidden.group(1), "reason": "stale"}
        )
        assert done.status_code == 200 and "Rejected 2 of 2 jobs." in done.text
        assert all(w.gateway.get_job(w.owner_id, i).state is JobState.REJECTED for i in ids)
        assert w.gateway.get_job(w.owner_id, other).state is JobState.PREPARED
        assert "1 waiting" in client.get("/agents").text
        forged = client.post("/inbox/reject", data={"csrf": "nope", "jobs": other})
        assert forged.status_code == 403
        job_page = client.post(f"/jobs/{other}/reject", data={"csrf": csrf, "reason": "no"})
        assert job_page.status_code == 200  # the history says why, in its facts
        assert re.search(r"<dt>Why</dt><dd>no</dd>", job_page.text)


# -- the CLI ----------------------------------------------------------------------------


@pytest.mark.parametrize("served", [MANY], indirect=True)
def test_the_cli_inbox_pages_filters_and_rejects_stale_jobs_once(served: dict[str, Any]) -> None:
    body = '{"summary": "s", "changes": [{"resource": "customer", "set": {"status": "x"}}]}'
    ids = [prepare(served, body) for _ in range(103)]
    env = reviewer_env(served)
    first = cli("jobs", "list", env=env)
    assert first.returncode == 0, first.stderr
    assert ids[-1] in first.stdout and ids[2] not in first.stdout
    assert "waiting 103 · needs review 0 · quarantined 0" in first.stdout
    more = re.search(r"more: add --after (job_\w+)", first.stdout)
    assert more is not None and more.group(1) == ids[3]
    second = cli("jobs", "list", "--after", more.group(1), env=env)
    assert all(i in second.stdout for i in ids[:3]) and "more:" not in second.stdout
    found = cli("jobs", "list", "--id", ids[5][:12], "--view", "waiting", env=env)
    assert ids[5] in found.stdout
    bad = cli("jobs", "list", "--since", "whenever", env=env)
    assert bad.returncode == 2 and "error [invalid_request]: since must be" in bad.stderr
    refused = cli("jobs", "reject-stale", "--older-than", "0m", env=env)
    assert refused.returncode == 2  # no terminal: nothing rejected
    term = Terminal(["jobs", "reject-stale", "--older-than", "0m", "--reason", "stale"], env)
    term.read_until('Type "reject 100"')
    term.send("reject 100")
    term.read_until("100 of 100 rejected")
    assert term.finish() == 0
    after = cli("jobs", "list", "--view", "waiting", env=env)
    assert "waiting 3 · " in after.stdout
    term = Terminal(["reject", ids[0], "--reason", "not now"], env)
    term.read_until('Type "reject"')
    term.send("reject")
    term.read_until("is now rejected")
    assert term.finish() == 0
    shown = cli("jobs", "show", ids[0], env=env)
    assert shown.returncode == 0 and "rejected by operator:" in shown.stdout
    assert shown.stdout.rstrip().endswith(": not now")
    stale = cli("jobs", "show", ids[5], env=env)
    assert "(no reason given)" not in stale.stdout and ": stale" in stale.stdout


def test_an_inbox_page_reads_the_owner_index_in_order_on_sqlite(tmp_path: Path) -> None:
    """Across agents, newest first, after a cursor: no sort of the owner's history; and
    the counts read only the unresolved jobs."""
    from undogate.ledger import InboxQuery, Ledger

    ledger = Ledger.open(tmp_path / "data")
    try:
        seen: list[str] = []
        with ledger.raw() as c:
            c.set_trace_callback(seen.append)
        query = InboxQuery("op_a", ("agent-a", "agent-b"), after="job_x", limit=101)
        ledger.write(lambda tx: tx.inbox(query))  # on the writer: the connection traced
        ledger.write(lambda tx: tx.inbox_counts("op_a", ("agent-a", "agent-b")))
        with ledger.raw() as c:
            c.set_trace_callback(None)

            def plan(marker: str) -> str:
                sql = next(sql for sql in seen if marker in sql)
                return " ".join(row[-1] for row in c.execute("EXPLAIN QUERY PLAN " + sql))

            page, per_state = plan("ORDER BY j.seq DESC"), plan("GROUP BY j.state")
        assert "jobs_by_owner" in page, page
        assert "TEMP B-TREE" not in page, page
        # The navigation's counts read only unresolved jobs (the partial index).
        assert "jobs_unresolved" in per_state, per_state
    finally:
        ledger.close()
