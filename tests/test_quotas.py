"""Fair shares (issue 13, item 4): one agent cannot fill the ledger for everyone.

Quotas of unresolved jobs per agent and per owner, and a prepare rate per agent, against
the real contract server and a real ledger; the flood itself goes over HTTP to a served
gateway.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.errors import LimitReached, QuotaExceeded, RateLimited, UndogateError
from undogate.jobs import (
    TERMINAL_STATES,
    UNRESOLVED_STATES,
    Actor,
    ChangeRequest,
    JobState,
    Operation,
    Prepared,
    PrepareRequest,
)
from undogate.jsonvalue import JsonValue
from undogate.ledger import Ledger
from undogate.ledger.sql_jobs import COUNT_AGENT_SQL, COUNT_OWNER_SQL
from undogate.mcp.tools import Refusal, agent_error
from undogate.operations.quotas import PrepareRate

from .postgres import PostgresCluster
from .worlds import AGENT, MASTER_KEY, OWNER, TICKET, LocalGateway, confirmed, resource

PATH = "/records/customer-123"
OTHER = Actor(id="other-agent", owner_id=AGENT.owner_id, kind="agent", access_path="test")
BOBS = Actor(id=AGENT.id, owner_id="op_bob", kind="agent", access_path="test")
# Every rate and quota out of the way unless a test names it.
ROOMY = {
    "max_unresolved_jobs_per_agent": 1000,
    "max_unresolved_jobs_per_owner": 1000,
    "max_prepares_per_minute": 100_000,
    "prepare_burst": 1000,
}


def quota_config(
    server: ContractServer, data_dir: Path, ledger: str | None = None, **limits: int
) -> Config:
    """account-assistant owns ``customer``; other-agent owns ``ticket``; ``ledger``: a
    PostgreSQL URL (else SQLite)."""
    return parse_config(
        {
            "server": {"data_dir": str(data_dir), **({"ledger": ledger} if ledger else {})},
            "limits": {**ROOMY, **limits},
            "resources": [
                resource(server, "customer", PATH),
                {
                    **resource(server, "ticket", TICKET, record_pointer="/data", fields=["status"]),
                    "agent_id": OTHER.id,
                },
            ],
            "agents": [
                {"id": AGENT.id, "tools": ["prepare_changes"]},
                {"id": OTHER.id, "tools": ["prepare_changes"]},
            ],
        }
    )


def prepare(
    gw: LocalGateway, actor: Actor = AGENT, key: str | None = None, **set_: JsonValue
) -> Prepared:
    target = "ticket" if actor.id == OTHER.id else "customer"
    req = PrepareRequest(
        summary="change",
        changes=(ChangeRequest(resource_id=target, set=dict(set_) or {"status": "customer"}),),
        idempotency_key=key,
    )
    return gw.prepare(actor, actor.id, req)


def unresolved(gw: LocalGateway, actor: Actor = AGENT) -> int:
    return gw.ledger.read(lambda tx: tx.count_unresolved(actor.owner_id, actor.id, stop_at=10**6))


# -- quotas of unresolved jobs -----------------------------------------------------------


RACERS = 16


def race(prepare_as: Callable[[int], object]) -> list[str]:
    """``RACERS`` prepares released at once (``prepare_as(i)``); each one's outcome,
    "prepared" or its refusal's code."""
    start = threading.Barrier(RACERS)

    def one(i: int) -> str:
        start.wait(timeout=10)
        try:
            prepare_as(i)
        except UndogateError as exc:
            return exc.code
        return "prepared"

    with ThreadPoolExecutor(RACERS) as pool:
        return list(pool.map(one, range(RACERS)))


def ledger_url(engine: str, request: pytest.FixtureRequest) -> str | None:
    """A fresh PostgreSQL database for ``engine`` "postgres"; None: SQLite."""
    if engine != "postgres":
        return None
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    return cluster.fresh_database()


def test_the_quotath_job_is_prepared_the_next_refused_and_a_resolved_job_frees_room(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    gw = open_gateway(quota_config(server, data_dir, max_unresolved_jobs_per_agent=2))
    rejected = prepare(gw, notes="a").job.id
    applied = prepare(gw, status="customer").job.id  # the 2nd: exactly at the quota
    with pytest.raises(QuotaExceeded) as info:
        prepare(gw, tier="gold")
    assert info.value.code == "quota_exceeded"
    assert info.value.details == {"limit": "max_unresolved_jobs_per_agent", "maximum": 2}
    assert "holds 2 unresolved jobs" in info.value.message

    gw.reject(OWNER, rejected)  # a rejected job is resolved: room for one more
    uncertain = prepare(gw, owner="kim").job.id
    with pytest.raises(QuotaExceeded):
        prepare(gw, tier="gold")

    assert (
        confirmed(gw, applied, Operation.APPLY).job.state is JobState.APPLIED
    )  # applied: resolved too
    later = prepare(gw, tier="gold").job.id
    with pytest.raises(QuotaExceeded):
        prepare(gw, notes="b")

    server.arm("apply_then_500", PATH)  # a job that needs review still holds its place
    assert confirmed(gw, uncertain, Operation.APPLY).job.state is JobState.NEEDS_REVIEW
    with pytest.raises(QuotaExceeded):
        prepare(gw, notes="b")
    assert unresolved(gw) == 2
    assert {gw.get_job(OWNER.owner_id, j).state for j in (uncertain, later)} == {
        JobState.NEEDS_REVIEW,
        JobState.PREPARED,
    }


def test_every_state_counts_exactly_as_documented(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    # docs/limits.md: applied, undone, rejected and invalidated are resolved.
    resolved = {JobState.APPLIED, JobState.UNDONE, JobState.REJECTED, JobState.INVALIDATED}
    assert set(UNRESOLVED_STATES) == set(JobState) - resolved
    gw = open_gateway(quota_config(server, data_dir, max_unresolved_jobs_per_agent=1))
    job_id = prepare(gw).job.id
    finished = False
    for state in sorted(JobState, key=lambda s: s in TERMINAL_STATES):
        if finished:  # a finished job stays finished (the ledger refuses): take a new one
            job_id = prepare(gw).job.id
        gw.ledger.write(lambda tx, s=state, j=job_id: tx.set_job_state(j, s))  # type: ignore[misc]
        finished = state in TERMINAL_STATES
        refused = True
        try:
            gw.ledger.read(lambda tx: gw.quotas.check_unresolved(tx, AGENT.owner_id, AGENT.id))
        except QuotaExceeded:
            pass
        else:
            refused = False
        assert refused is (state not in resolved), state


def test_the_owner_quota_spans_its_agents_and_never_another_owner(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    gw = open_gateway(
        quota_config(
            server, data_dir, max_unresolved_jobs_per_agent=2, max_unresolved_jobs_per_owner=3
        )
    )
    prepare(gw, status="a")
    prepare(gw, status="b")
    prepare(gw, OTHER, status="c")
    with pytest.raises(QuotaExceeded) as info:
        prepare(gw, OTHER, status="d")  # other-agent holds 1 of its 2, but alice holds 3
    assert info.value.details == {"limit": "max_unresolved_jobs_per_owner", "maximum": 3}
    assert "3" in info.value.message and "unresolved" in info.value.message
    # bob's token for the very same agent id has its own shares
    prepare(gw, BOBS, status="e")
    prepare(gw, BOBS, status="f")
    with pytest.raises(QuotaExceeded) as bobs:
        prepare(gw, BOBS, status="g")
    assert bobs.value.details["limit"] == "max_unresolved_jobs_per_agent"


@pytest.mark.parametrize(
    ("limits", "refusal"),
    [
        ({"max_unresolved_jobs_per_agent": 4}, QuotaExceeded),
        ({"prepare_burst": 4, "max_prepares_per_minute": 1}, RateLimited),
    ],
    ids=["quota", "rate"],
)
def test_concurrent_prepares_from_one_agent_never_overshoot(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    limits: dict[str, int],
    refusal: type[UndogateError],
) -> None:
    gw = open_gateway(quota_config(server, data_dir, None, **limits))
    outcomes = race(lambda i: prepare(gw, status=f"s{i}"))
    assert outcomes.count("prepared") == 4, outcomes
    assert outcomes.count(refusal.code) == RACERS - 4, outcomes
    assert unresolved(gw) == 4


@pytest.mark.parametrize(
    ("limits", "refusal", "prepared"),
    [
        ({"max_unresolved_jobs_per_agent": 4}, QuotaExceeded, 8),  # 4 for each agent
        (
            {"max_unresolved_jobs_per_agent": 4, "max_unresolved_jobs_per_owner": 4},
            QuotaExceeded,
            4,
        ),
        ({"max_jobs": 4}, LimitReached, 4),
    ],
    ids=["agent-quota", "owner-quota", "ledger-limit"],
)
@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_two_gateways_on_one_ledger_never_overshoot_together(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    request: pytest.FixtureRequest,
    engine: str,
    limits: dict[str, int],
    refusal: type[UndogateError],
    prepared: int,
) -> None:
    """Two gateways, each with its own connections and lease (what two processes hold),
    race 16 prepares of one owner's two agents: the count runs after each job's rows are
    written and before its commit (under the owner's lock on PostgreSQL, under SQLite's
    one write lock on SQLite), so exactly the quota is prepared."""
    shared = quota_config(server, data_dir, ledger_url(engine, request), **limits)
    gateways = [open_gateway(shared), open_gateway(shared)]

    def one(i: int) -> None:
        actor = AGENT if i % 4 < 2 else OTHER  # each agent on both gateways
        prepare(gateways[i % 2], actor, status=f"s{i}")

    outcomes = race(one)
    assert outcomes.count("prepared") == prepared, outcomes
    assert outcomes.count(refusal.code) == RACERS - prepared, outcomes
    assert unresolved(gateways[0]) + unresolved(gateways[1], OTHER) == prepared
    assert gateways[1].ledger.read(lambda tx: tx.usage()).jobs == prepared


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_four_owners_racing_through_two_gateways_never_overshoot_the_ledger_limit(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    request: pytest.FixtureRequest,
    engine: str,
) -> None:
    """No owner's lock serializes these prepares (each owner's quota is roomy): the
    ledger-wide counters alone must, counted and checked in the write that inserts each
    job (on PostgreSQL at its commit, under the chain's lock), so exactly ``max_jobs``
    are prepared."""
    shared = quota_config(server, data_dir, ledger_url(engine, request), max_jobs=4)
    gateways = [open_gateway(shared), open_gateway(shared)]

    def one(i: int) -> None:
        agent = AGENT if i % 2 == 0 else OTHER
        actor = Actor(id=agent.id, owner_id=f"op_{i % 4}", kind="agent", access_path="test")
        prepare(gateways[i % 2], actor, status=f"s{i}")

    outcomes = race(one)
    assert outcomes.count("prepared") == 4, outcomes
    assert outcomes.count(LimitReached.code) == RACERS - 4, outcomes
    assert gateways[0].ledger.read(lambda tx: tx.usage()).jobs == 4


def test_refusals_come_before_any_read_of_the_resource(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    gw = open_gateway(
        quota_config(
            server,
            data_dir,
            max_unresolved_jobs_per_agent=1,
            max_prepares_per_minute=1,
            prepare_burst=2,
        )
    )
    prepare(gw)
    # A read would consume this fault and end in remote_contract_breach.
    server.arm("weak_etag", PATH)
    with pytest.raises(QuotaExceeded):
        prepare(gw, status="other")
    assert server.armed_faults() == [("weak_etag", PATH, 1)]
    server.clear_faults()
    gw.reject(OWNER, gw.ledger.list_jobs(OWNER.owner_id, AGENT.id)[0][0])
    gw.reject(OWNER, prepare(gw).job.id)  # the second and last token of the burst
    server.arm("weak_etag", PATH)
    with pytest.raises(RateLimited):
        prepare(gw, status="other")
    assert server.armed_faults() == [("weak_etag", PATH, 1)]


def test_a_full_ledger_refuses_before_any_read_and_takes_no_token(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    # The quotas and the ledger's limits are checked in one read, before the rate.
    gw = open_gateway(
        quota_config(server, data_dir, max_jobs=1, max_prepares_per_minute=1, prepare_burst=2)
    )
    prepare(gw)  # the first of two tokens
    server.arm("weak_etag", PATH)
    with pytest.raises(LimitReached) as refused:
        prepare(gw, status="other")
    assert refused.value.details["limit"] == "max_jobs"
    assert server.armed_faults() == [("weak_etag", PATH, 1)]  # nothing was read
    gw.quotas.rate.take(AGENT.owner_id, AGENT.id)  # the second token is still there
    with pytest.raises(RateLimited):
        gw.quotas.rate.take(AGENT.owner_id, AGENT.id)


# -- the prepare rate ---------------------------------------------------------------------


def test_the_rate_limit_says_when_to_retry_and_is_per_agent(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    gw = open_gateway(quota_config(server, data_dir, max_prepares_per_minute=1, prepare_burst=2))
    prepare(gw, status="a")
    prepare(gw, status="b")
    with pytest.raises(RateLimited) as info:
        prepare(gw, status="c")
    assert info.value.code == "rate_limited"
    assert 1 <= info.value.retry_after_s <= 60
    assert info.value.details == {
        "retry_after_s": info.value.retry_after_s,
        "limit": "max_prepares_per_minute",
        "maximum": 1,
    }
    assert f"{info.value.retry_after_s} s" in info.value.message
    prepare(gw, OTHER, status="d")  # another agent of the same owner: its own bucket
    prepare(gw, BOBS, status="e")  # another owner's token for the same agent id: its own


def test_the_bucket_refills_at_its_rate_and_a_refusal_takes_nothing() -> None:
    now = [1000.0]
    rate = PrepareRate(per_minute=60, burst=3, clock=lambda: now[0])
    for _ in range(3):
        rate.take("op_alice", "a")
    with pytest.raises(RateLimited) as info:
        rate.take("op_alice", "a")
    assert info.value.retry_after_s == 1
    now[0] += 0.5
    with pytest.raises(RateLimited) as info:
        rate.take("op_alice", "a")
    assert info.value.retry_after_s == 1  # half a token: whole seconds, rounded up
    now[0] += 0.5
    rate.take("op_alice", "a")  # the refusals took nothing: one full token after 1 s
    with pytest.raises(RateLimited):
        rate.take("op_alice", "a")
    now[0] += 3600
    for _ in range(3):  # an hour idle refills the burst, never more
        rate.take("op_alice", "a")
    with pytest.raises(RateLimited):
        rate.take("op_alice", "a")
    slow = PrepareRate(per_minute=2, burst=1, clock=lambda: now[0])
    slow.take("op_alice", "a")
    with pytest.raises(RateLimited) as info:
        slow.take("op_alice", "a")
    assert info.value.retry_after_s == 30


# -- idempotent replays ---------------------------------------------------------------------


def test_a_replay_is_neither_counted_nor_refused(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    gw = open_gateway(
        quota_config(
            server,
            data_dir,
            max_unresolved_jobs_per_agent=1,
            max_prepares_per_minute=1,
            prepare_burst=1,
        )
    )
    original = prepare(gw, key="k1")
    assert not original.replay
    # At its quota and out of tokens, the agent still gets its job back.
    again = prepare(gw, key="k1")
    assert again.replay and again.job.id == original.job.id
    with pytest.raises(QuotaExceeded):
        prepare(gw, key="k2", status="other")
    gw.reject(OWNER, original.job.id)
    with pytest.raises(RateLimited):
        prepare(gw, key="k2", status="other")
    assert prepare(gw, key="k1").job.id == original.job.id
    assert len(gw.ledger.list_jobs(OWNER.owner_id, AGENT.id)) == 1


# -- counting stays cheap ----------------------------------------------------------------------


def test_counting_reads_only_the_unresolved_index(gateway: LocalGateway) -> None:
    assert isinstance(gateway.ledger, Ledger)
    with gateway.ledger.raw() as c:
        for sql, args in ((COUNT_AGENT_SQL, ("o", "a", 9)), (COUNT_OWNER_SQL, ("o", 9))):
            plan = " ".join(str(row[-1]) for row in c.execute("EXPLAIN QUERY PLAN " + sql, args))
            assert "COVERING INDEX jobs_unresolved" in plan, plan


# -- the surfaces ------------------------------------------------------------------------------


def test_an_agent_is_told_what_to_do_next_through_mcp() -> None:
    rate = str(
        agent_error(
            Refusal.of(
                RateLimited("too fast", retry_after_s=7, limit="max_prepares_per_minute", maximum=1)
            )
        )
    )
    assert rate.startswith("rate_limited: too fast. Nothing was prepared. Wait retry_after_s")
    assert '"retry_after_s":7' in rate and '"maximum":1' in rate
    quota = str(
        agent_error(
            Refusal.of(QuotaExceeded("full", limit="max_unresolved_jobs_per_agent", maximum=2))
        )
    )
    assert quota.startswith("quota_exceeded: full. Nothing was prepared.")
    assert '"limit":"max_unresolved_jobs_per_agent"' in quota


FLOOD_THREADS = 8
FLOOD_EACH = 6  # 48 prepares against a ledger that holds 20: without fair shares it fills
QUOTA_BOUND = {
    "max_jobs": 20,
    "max_unresolved_jobs_per_agent": 5,
    "max_unresolved_jobs_per_owner": 5,
    "max_prepares_per_minute": 100_000,
    "prepare_burst": 1000,
}
RATE_BOUND = {
    "max_jobs": 20,
    "max_unresolved_jobs_per_agent": 15,
    "max_unresolved_jobs_per_owner": 15,
    "max_prepares_per_minute": 1,
    "prepare_burst": 5,
}


@pytest.mark.parametrize(
    ("served", "code"),
    [({"limits": QUOTA_BOUND}, "quota_exceeded"), ({"limits": RATE_BOUND}, "rate_limited")],
    indirect=["served"],
    ids=["quota", "rate"],
)
def test_a_flooding_agent_is_refused_and_another_owners_agent_keeps_working(
    served: dict[str, Any], code: str
) -> None:
    url = str(served["url"])
    body = {"summary": "flood", "changes": [{"resource": "customer", "set": {"status": "x"}}]}

    def flood(_: int) -> list[httpx.Response]:
        headers = {"Authorization": f"Bearer {served['agent']}"}
        with httpx.Client(base_url=url, timeout=30, headers=headers) as client:
            return [client.post("/api/v1/jobs", json=body) for _ in range(FLOOD_EACH)]

    with ThreadPoolExecutor(FLOOD_THREADS) as pool:
        answers = [r for batch in pool.map(flood, range(FLOOD_THREADS)) for r in batch]
    made = [r for r in answers if r.status_code == 201]
    refused = [r for r in answers if r.status_code != 201]
    assert len(made) == 5, [r.text for r in refused[:3]]
    assert {r.status_code for r in refused} == {429}
    errors = [r.json()["error"] for r in refused]
    assert {e["code"] for e in errors} == {code}
    for answer, error in zip(refused, errors, strict=True):
        if code == "rate_limited":
            wait = error["details"]["retry_after_s"]
            assert answer.headers["retry-after"] == str(wait) and 1 <= wait <= 60
            assert error["details"]["limit"] == "max_prepares_per_minute"
        else:
            assert "retry-after" not in answer.headers
            assert error["details"] == {"limit": "max_unresolved_jobs_per_agent", "maximum": 5}

    master = {"Authorization": f"Bearer {MASTER_KEY}"}
    with httpx.Client(base_url=url, timeout=30) as client:
        bob = client.post(
            "/api/v1/admin/keys", json={"kind": "operator", "label": "bob"}, headers=master
        )
        assert bob.status_code == 201, bob.text
        bobs_agent = client.post(
            "/api/v1/admin/keys",
            json={"kind": "agent", "agent": AGENT.id, "owner": bob.json()["credential"]["id"]},
            headers=master,
        )
        assert bobs_agent.status_code == 201, bobs_agent.text
        works = client.post(
            "/api/v1/jobs",
            json=body,
            headers={"Authorization": f"Bearer {bobs_agent.json()['key']}"},
        )
        assert works.status_code == 201, works.text
        listed = client.get(
            "/api/v1/jobs",
            params={"agent": AGENT.id},
            headers={"Authorization": f"Bearer {served['operator']}"},
        )
        assert listed.status_code == 200, listed.text
        assert len(listed.json()["jobs"]) == 5  # alice's flood left exactly its share
