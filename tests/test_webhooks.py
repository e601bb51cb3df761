"""Signed webhooks (docs/webhooks.md), in process: the outbox row commits with the state change,
the delivery task signs (verified with the ``standardwebhooks`` package), retries with
backoff, gives up and says so, and the address policy applies to the receiver. The
served path (a restart, the CLI, the log) is in tests/test_webhooks_served.py."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from undogate.auth import Keyring
from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.errors import ConfigError, InvalidRequest, LedgerError, NotFound, UndogateError
from undogate.jobs import Actor, ChangeRequest, JobState, Operation, PrepareRequest
from undogate.ledger import Ledger, OutboxMessage
from undogate.ledger.postgres import PostgresStore
from undogate.net import PinnedClient
from undogate.operations.agent_stop import set_stopped
from undogate.operations.lease_sweep import ExpiredLeaseSweep
from undogate.service import Reader, Reviewer, Service
from undogate.webhooks.delivery import WebhookDelivery, webhook_warnings
from undogate.webhooks.events import WAITING_NAMED, event_for

from .postgres import PostgresCluster
from .webhook_receiver import Receiver, new_secret, wait_until
from .worlds import AGENT, OWNER, LocalGateway, resource

SECRET_ENV = "UNDOGATE_TEST_WEBHOOK_SECRET"
PATH = "/records/customer-123"
# What the customer record holds and what the jobs below write: none may reach a receiver.
VALUES = ("lead", "sam", "Ada Lovelace", "123456789012345678901234567890", "platinum", "lee")
SUMMARY = "Promote Ada Lovelace to customer"


def webhook_config(
    server: ContractServer, data_dir: Path, url: str, **webhooks: Any
) -> dict[str, Any]:
    endpoint = {"id": "ops", "url": url, "secret_env": SECRET_ENV, "allow_loopback_http": True}
    endpoint.update(webhooks.pop("endpoint", {}))
    return {
        "server": {"data_dir": str(data_dir), "public_url": "https://review.example.com"},
        "resources": [resource(server, "customer", PATH)],
        "agents": [{"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}],
        "webhooks": {
            "endpoints": [endpoint],
            "first_retry_s": 0.05,
            "max_retry_s": 0.2,
            "max_attempts": 3,
            **webhooks,
        },
    }


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(new_secret())
    yield r.start()
    r.stop()


class Hooked:
    """A gateway with webhooks, and its delivery task driven pass by pass."""

    def __init__(self, gw: LocalGateway, secret: str | None) -> None:
        self.gw = gw
        self.http = PinnedClient(request_timeout_s=2.0)
        env = {SECRET_ENV: secret} if secret else {}
        self.delivery = WebhookDelivery(gw.config.webhooks, gw.ledger, self.http, env)

    def prepare(self, **set_: Any) -> str:
        changes = (ChangeRequest(resource_id="customer", set=set_ or {"status": "customer"}),)
        return self.gw.prepare(AGENT, "account-assistant", PrepareRequest(SUMMARY, changes)).job.id

    def run(self, job_id: str, op: Operation) -> JobState:
        preview = self.gw.preview(OWNER, job_id, op)
        assert preview.token is not None, preview.blockers
        return self.gw.confirm(OWNER, job_id, preview.token).job.state

    def messages(self, status: str | None = None) -> list[OutboxMessage]:
        agents = ("account-assistant",)
        return self.gw.ledger.read(
            lambda r: r.webhook_messages(OWNER.owner_id, agents, status=status)
        )

    def deliver_until(self, done: Callable[[list[OutboxMessage]], bool]) -> list[OutboxMessage]:
        def step() -> bool:
            self.delivery.deliver_due()
            return done(self.messages())

        wait_until(step, what="the delivery")
        return self.messages()


@pytest.fixture
def hooked(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    receiver: Receiver,
) -> Iterator[Hooked]:
    gw = open_gateway(parse_config(webhook_config(server, data_dir, receiver.url)))
    h = Hooked(gw, receiver.secret)
    yield h
    h.http.close()


def all_settled(messages: list[OutboxMessage]) -> bool:
    return all(m.status != "pending" for m in messages)


def test_each_event_is_signed_and_carries_ids_states_and_a_link_never_values(
    hooked: Hooked, receiver: Receiver
) -> None:
    applied = hooked.prepare(status="platinum", owner="lee")
    assert hooked.run(applied, Operation.APPLY) is JobState.APPLIED
    assert hooked.run(applied, Operation.UNDO) is JobState.UNDONE
    rejected = hooked.prepare(status="platinum")
    hooked.gw.reject(OWNER, rejected)
    # Nothing was sent yet: every state change only added a row to the outbox.
    assert receiver.received == []
    assert [m.status for m in hooked.messages()] == ["pending"] * 5

    hooked.deliver_until(all_settled)
    bodies = receiver.wait_for(5)  # each verified with the standardwebhooks package
    assert [b["type"] for b in bodies] == [
        "job.prepared",
        "job.applied",
        "job.undone",
        "job.prepared",
        "job.rejected",
    ]
    assert bodies[2]["data"] == {
        "job_id": applied,
        "state": "undone",
        "previous_state": "undoing",
        "owner_id": OWNER.owner_id,
        "agent_id": "account-assistant",
        "resources": ["customer"],
        "review_url": f"https://review.example.com/jobs/{applied}",
    }
    assert bodies[4]["data"]["previous_state"] == "prepared"
    for got in receiver.received:
        assert got.path == "/hooks/undogate"
        assert got.headers["content-type"] == "application/json"
        assert got.headers["webhook-id"].startswith("msg_")
        assert got.headers["webhook-signature"].startswith("v1,")
        text = got.body.decode()
        for value in (*VALUES, SUMMARY, "Ada"):
            assert value not in text, f"{value!r} leaked: {text}"
    assert len({r.headers["webhook-id"] for r in receiver.received}) == 5
    assert [m.status for m in hooked.messages()] == ["delivered"] * 5


def test_needs_review_is_announced_when_a_write_goes_uncertain(
    hooked: Hooked, receiver: Receiver, server: ContractServer
) -> None:
    job_id = hooked.prepare(status="customer")
    server.arm("apply_then_500", PATH)
    assert hooked.run(job_id, Operation.APPLY) is JobState.NEEDS_REVIEW
    hooked.deliver_until(all_settled)
    bodies = receiver.wait_for(2)
    assert [b["type"] for b in bodies] == ["job.prepared", "job.needs_review"]
    assert bodies[1]["data"]["state"] == "needs_review"


def test_the_outbox_works_the_same_on_a_postgresql_ledger(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    receiver: Receiver,
    postgres_cluster: PostgresCluster,
) -> None:
    data = webhook_config(server, data_dir, receiver.url)
    data["server"]["ledger"] = postgres_cluster.fresh_database()
    h = Hooked(open_gateway(parse_config(data)), receiver.secret)
    try:
        assert isinstance(h.gw.ledger, PostgresStore)
        job_id = h.prepare()
        assert h.run(job_id, Operation.APPLY) is JobState.APPLIED
        h.deliver_until(all_settled)
        assert receiver.events() == ["job.prepared", "job.applied"]
        assert [m.status for m in h.messages()] == ["delivered", "delivered"]
    finally:
        h.http.close()


def test_the_lease_sweep_announces_the_jobs_of_a_process_that_died(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    receiver: Receiver,
    postgres_cluster: PostgresCluster,
) -> None:
    """On a shared ledger a live process settles a dead one's write (its lease expired)
    as uncertain: the job's move to needs_review is announced in that same write."""
    data = webhook_config(server, data_dir, receiver.url)
    data["server"].update(ledger=postgres_cluster.fresh_database(), lease_s=3600)
    stalled = Hooked(open_gateway(parse_config(data)), receiver.secret)
    live = Hooked(open_gateway(parse_config(data)), receiver.secret)
    assert isinstance(stalled.gw.ledger, PostgresStore) and stalled.gw.ledger.lease
    assert isinstance(live.gw.ledger, PostgresStore)
    job_id = stalled.prepare()
    token = stalled.gw.preview(OWNER, job_id, Operation.APPLY).token
    assert token is not None
    gate = server.hold_next_write(PATH)
    failures: list[UndogateError] = []

    def confirm() -> None:
        try:
            stalled.gw.confirm(OWNER, job_id, token)
        except UndogateError as exc:
            failures.append(exc)

    confirming = threading.Thread(target=confirm)
    confirming.start()
    try:
        assert gate.arrived.wait(30)
        with live.gw.ledger.raw() as conn:  # as if it had stalled for lease_s
            conn.execute(
                "UPDATE leases SET expires_at = 0 WHERE id = %s", (stalled.gw.ledger.lease.id,)
            )
        sweep = ExpiredLeaseSweep(live.gw.ledger, live.gw.live, every_s=3600)
        assert sweep.sweep() == {"uncertain": 1, "settled": 1}
        live.deliver_until(all_settled)
        assert receiver.events() == ["job.prepared", "job.needs_review"]
    finally:
        gate.release()
        confirming.join(30)
        stalled.http.close()
        live.http.close()
    assert [f.code for f in failures] == ["ledger_error"]  # its late outcome was refused


def test_which_state_change_announces_what() -> None:
    s = JobState
    assert event_for(s.PREPARED, None) == "job.prepared"
    assert event_for(s.PREPARED, s.APPLYING) is None  # an apply refused before any write
    assert event_for(s.APPLIED, s.APPLYING) == "job.applied"
    assert event_for(s.PARTIALLY_APPLIED, s.APPLYING) == "job.applied"
    assert event_for(s.APPLIED, s.UNDOING) is None  # an undo refused: nothing new applied
    assert event_for(s.APPLIED, s.NEEDS_REVIEW) == "job.applied"  # reconciled
    assert event_for(s.NEEDS_REVIEW, s.APPLYING) == "job.needs_review"
    assert event_for(s.PARTIALLY_UNDONE, s.UNDOING) == "job.undone"
    assert event_for(s.REJECTED, s.PREPARED) == "job.rejected"
    assert event_for(s.INVALIDATED, s.PREPARED) is None
    assert event_for(s.APPLYING, s.PREPARED) is None


def test_an_endpoint_gets_only_the_events_it_subscribed_to(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    receiver: Receiver,
) -> None:
    data = webhook_config(server, data_dir, receiver.url, endpoint={"events": ["job.rejected"]})
    h = Hooked(open_gateway(parse_config(data)), receiver.secret)
    try:
        h.prepare()
        rejected = h.prepare()
        h.gw.reject(OWNER, rejected)
        assert [m.event for m in h.messages()] == ["job.rejected"]
        h.deliver_until(all_settled)
        assert receiver.events() == ["job.rejected"]
    finally:
        h.http.close()


def test_a_receiver_that_is_down_gets_the_message_when_it_comes_back(
    hooked: Hooked, receiver: Receiver
) -> None:
    receiver.stop()
    hooked.prepare()
    hooked.delivery.deliver_due()
    [waiting] = hooked.messages()
    assert waiting.status == "pending"
    assert waiting.attempts == 1
    assert waiting.last_error is not None
    assert "not delivered" in waiting.last_error
    receiver.start()
    [done] = hooked.deliver_until(all_settled)
    assert done.status == "delivered"
    assert done.attempts == 2
    [got] = receiver.received
    assert got.headers["webhook-id"] == waiting.id  # the same message, retried
    assert receiver.events() == ["job.prepared"]


def test_a_receiver_that_never_answers_holds_up_a_pass_once_not_per_message(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    receiver: Receiver,
) -> None:
    """It accepts the connection and says nothing: its first message waits out the time
    limit, its others stay due for the next pass, and the healthy receiver gets all of
    its messages in this one."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as silent:  # never accept()ed
        config = webhook_config(server, data_dir, receiver.url, timeout_s=0.3)
        config["webhooks"]["endpoints"].insert(
            0,
            {
                "id": "silent",
                "url": f"http://127.0.0.1:{silent.getsockname()[1]}/hook",
                "secret_env": SECRET_ENV,
                "allow_loopback_http": True,
            },
        )
        h = Hooked(open_gateway(parse_config(config)), receiver.secret)
        try:
            for _ in range(3):
                h.prepare()
            assert h.delivery.deliver_due() == 4  # one to the silent receiver, three to ops
        finally:
            h.http.close()
    silent_ones = [m for m in h.messages() if m.endpoint == "silent"]
    assert sorted(m.attempts for m in silent_ones) == [0, 0, 1]
    assert all(m.status == "pending" for m in silent_ones)
    assert [m.status for m in h.messages() if m.endpoint == "ops"] == ["delivered"] * 3
    assert len(receiver.wait_for(3)) == 3


def test_a_receiver_that_keeps_failing_is_given_up_on_visibly(
    hooked: Hooked, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.status = 500
    hooked.prepare()
    with caplog.at_level(logging.WARNING, logger="undogate.webhooks.delivery"):
        [failed] = hooked.deliver_until(all_settled)
    assert failed.status == "failed"
    assert failed.attempts == 3  # max_attempts
    assert failed.last_response_status == 500
    assert failed.last_error == "the receiver answered HTTP 500"
    assert len(receiver.received) == 3
    assert [m.id for m in hooked.messages("failed")] == [failed.id]
    assert hooked.messages("delivered") == []
    log = caplog.text
    assert "attempt 1 of 3 failed: the receiver answered HTTP 500" in log
    assert f"webhook {failed.id} (job.prepared" in log
    assert "failed for good after 3 attempt(s)" in log
    assert receiver.secret not in log
    assert receiver.url not in log and "/hooks/undogate" not in log
    # Failed stays failed: later passes leave it alone.
    hooked.delivery.deliver_due()
    assert len(receiver.received) == 3


def test_backoff_doubles_up_to_its_ceiling() -> None:
    settings = parse_config(
        {"webhooks": {"first_retry_s": 2, "max_retry_s": 30, "max_attempts": 10}}
    ).webhooks
    assert [settings.retry_delay(n) for n in range(1, 7)] == [2, 4, 8, 16, 30, 30]


def test_an_unset_secret_signs_nothing_and_is_warned_about(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    receiver: Receiver,
) -> None:
    gw = open_gateway(parse_config(webhook_config(server, data_dir, receiver.url)))
    [warning] = webhook_warnings(gw.config.webhooks, {})
    assert f"its secret variable {SECRET_ENV} is not set" in warning
    assert webhook_warnings(gw.config.webhooks, {SECRET_ENV: "whsec_short"})
    assert webhook_warnings(gw.config.webhooks, {SECRET_ENV: receiver.secret}) == []
    h = Hooked(gw, None)
    try:
        h.prepare()
        [failed] = h.deliver_until(all_settled)
        assert failed.status == "failed"
        assert failed.last_error == f"its secret variable {SECRET_ENV} is not set"
        assert receiver.received == []
    finally:
        h.http.close()


@pytest.mark.parametrize(
    ("answer", "endless"),
    [(b"x" * (256 * 1024), False), (b"still talking", True)],
    ids=["a-body-past-64-KiB", "a-body-that-never-ends"],
)
def test_a_2xx_delivers_whatever_follows_it(
    hooked: Hooked, receiver: Receiver, answer: bytes, endless: bool
) -> None:
    """The status is the answer: a long body, or one that never ends, neither fails the
    message nor makes the pass skip the receiver's others."""
    receiver.status, receiver.answer, receiver.endless = 200, answer, endless
    for _ in range(3):
        hooked.prepare()
    assert hooked.delivery.deliver_due() == 3
    assert [(m.status, m.attempts, m.last_error) for m in hooked.messages()] == [
        ("delivered", 1, None)
    ] * 3
    assert len(receiver.verified()) == 3


def test_the_network_policy_applies_to_webhook_urls(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    receiver: Receiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A name that resolves to loopback over https: the policy allows loopback only over http to a
    # literal address with allow_loopback_http; the delivery is refused before sending.
    https_loopback = f"https://localhost:{receiver.port}/hooks/undogate"
    data = webhook_config(server, data_dir, https_loopback, endpoint={"allow_loopback_http": False})
    h = Hooked(open_gateway(parse_config(data)), receiver.secret)
    try:
        h.prepare()
        with caplog.at_level(logging.WARNING, logger="undogate.webhooks.delivery"):
            [failed] = h.deliver_until(all_settled)
        assert failed.status == "failed"
        assert failed.last_error == (
            "refused by the network policy: its host has a loopback address"
        )
        assert receiver.received == []
    finally:
        h.http.close()
    # Neither its host nor the address it resolved to, in the log or on the pages.
    assert "failed for good after 3 attempt(s): refused by the network policy" in caplog.text
    for where in ("localhost", "127.0.0.1", str(receiver.port)):
        assert where not in caplog.text and where not in failed.last_error


def test_a_name_that_does_not_resolve_is_not_named_in_the_log(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    receiver: Receiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = "hooks.undogate-test.invalid"  # RFC 6761: never resolves
    data = webhook_config(
        server, data_dir, f"https://{host}/hook", endpoint={"allow_loopback_http": False}
    )
    h = Hooked(open_gateway(parse_config(data)), receiver.secret)
    try:
        h.prepare()
        with caplog.at_level(logging.WARNING, logger="undogate.webhooks.delivery"):
            [failed] = h.deliver_until(all_settled)
    finally:
        h.http.close()
    assert failed.status == "failed" and failed.last_error is not None
    assert failed.last_error.startswith("not delivered: ")
    assert "its host" in failed.last_error  # could not resolve it, or timed out doing so
    assert "attempt 1 of 3 failed: not delivered" in caplog.text
    assert "undogate-test" not in caplog.text + failed.last_error


@pytest.mark.parametrize(
    ("endpoint", "where", "says"),
    [
        ({"url": "http://127.0.0.1:9/h"}, "url", "http is allowed only with allow_loopback_http"),
        (
            {"url": "http://localhost:9/h", "allow_loopback_http": True},
            "url",
            "needs a literal loopback address",
        ),
        ({"url": "ftp://example.com/h"}, "url", "scheme must be https"),
        ({"url": "https://user:pw@example.com/h"}, "url", "must not contain user-info"),
        ({"url": "https://0x7f000001/h"}, "url", "not a canonical IPv4 address"),
        ({"url": "https://169.254.169.254/h"}, "url", "refused by the network policy"),
        ({"url": "https://10.0.0.5/h"}, "url", "refused by the network policy"),
        ({"url": "https://[fd00:ec2::254]/h"}, "url", "refused by the network policy"),
        ({"events": ["job.deleted"]}, "events[0]", "unknown event 'job.deleted'"),
        ({"events": []}, "events", "must name at least one event"),
        ({"secret_env": "not a name"}, "secret_env", "should match pattern"),
        ({"secret": "whsec_abc"}, "secret", "unknown setting"),
    ],
)
def test_webhook_settings_are_checked_at_load(
    endpoint: dict[str, Any], where: str, says: str
) -> None:
    data = {
        "webhooks": {
            "endpoints": [
                {"id": "ops", "url": "https://hooks.example.com/x", "secret_env": "S", **endpoint}
            ]
        }
    }
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    found = [(p, m) for p, m in caught.value.problems if p == f"webhooks.endpoints[0].{where}"]
    assert found, caught.value.problems
    assert says in found[0][1]
    assert "pw@" not in str(caught.value)  # a URL's secrets are never echoed


def test_webhook_section_rules_beyond_one_endpoint() -> None:
    endpoint = {"id": "ops", "url": "https://hooks.example.com/x", "secret_env": "S"}
    with pytest.raises(ConfigError) as caught:
        parse_config({"webhooks": {"endpoints": [endpoint, endpoint]}})
    problems = dict(caught.value.problems)
    assert "duplicate endpoint id 'ops'" in problems["webhooks.endpoints[1].id"]
    with pytest.raises(ConfigError) as caught:
        parse_config({"webhooks": {"first_retry_s": 10, "max_retry_s": 5}})
    problems = dict(caught.value.problems)
    assert "max_retry_s must not be less than first_retry_s" in problems["webhooks"]
    with pytest.raises(ConfigError) as caught:
        parse_config({"webhooks": {"retries": 3}})
    assert dict(caught.value.problems)["webhooks.retries"] == "unknown setting"
    assert parse_config({}).webhooks.endpoints == ()


def test_an_operator_sees_only_the_messages_about_jobs_it_may_see(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    receiver: Receiver,
) -> None:
    data = webhook_config(server, data_dir, receiver.url)
    data["agents"].append({"id": "other-agent", "tools": ["prepare_changes"]})
    gw = open_gateway(parse_config(data))
    keyring = Keyring(gw.ledger, known_agents=lambda: {a.id for a in gw.config.agents})
    owner = keyring.create_operator(label="owner")
    narrow = keyring.create_operator(label="narrow", agents=("other-agent",))
    agent = Actor("account-assistant", owner.credential.id, "agent", "test")
    request = PrepareRequest(
        SUMMARY, (ChangeRequest(resource_id="customer", set={"status": "vip"}),)
    )
    gw.prepare(agent, "account-assistant", request)
    service = Service(gw, keyring)

    async def seen(key: str, status: str | None = None) -> list[str]:
        reader = Reader.of(await service.access.authenticate(key), "test")
        return [m.event for m in await service.reviewers.webhook_messages(reader, status)]

    assert anyio.run(seen, owner.key) == ["job.prepared"]
    assert anyio.run(seen, owner.key, "failed") == []
    assert anyio.run(seen, narrow.key) == []  # another owner, and not this agent's
    with pytest.raises(InvalidRequest):
        anyio.run(seen, owner.key, "lost")


def test_a_stop_that_does_not_commit_announces_nothing(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    receiver: Receiver,
) -> None:
    gw = open_gateway(parse_config(webhook_config(server, data_dir, receiver.url)))
    ledger = gw.ledger
    assert isinstance(ledger, Ledger)  # SQLite: its connection takes the fault below
    keyring = Keyring(ledger, known_agents=lambda: {a.id for a in gw.config.agents})
    owner = keyring.create_operator(label="owner")
    service = Service(gw, keyring)
    hooked = Hooked(gw, receiver.secret)

    async def stop(agent_id: str) -> float | None:
        reviewer = Reviewer.of(await service.access.authenticate(owner.key), "test")
        return await service.rewinds.stop(reviewer, agent_id)

    def outbox() -> int:
        with ledger.raw() as c:
            return int(c.execute("SELECT COUNT(*) FROM webhook_outbox").fetchone()[0])

    with pytest.raises(NotFound):
        anyio.run(stop, "no-such-agent")
    assert outbox() == 0
    # The database refuses the stop's chain event, inserted after its message: the
    # whole write rolls back, the message with it.
    with ledger.raw() as c:
        c.execute(
            "CREATE TRIGGER refuse_stops BEFORE INSERT ON events "
            "WHEN NEW.operation = 'agent_stopped' "
            "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        )
    with pytest.raises(LedgerError):
        anyio.run(stop, "account-assistant")
    assert outbox() == 0
    assert gw.ledger.read(lambda r: r.agent_stopped_at(owner.credential.owner_id, AGENT.id)) is None
    with ledger.raw() as c:
        c.execute("DROP TRIGGER refuse_stops")
    assert anyio.run(stop, "account-assistant") is not None
    assert anyio.run(stop, "account-assistant") is not None  # stopped already: nothing new
    assert outbox() == 1
    try:
        assert hooked.delivery.deliver_due() == 1
    finally:
        hooked.http.close()
    assert receiver.events() == ["agent.stopped"]


def test_a_stop_names_at_most_its_newest_waiting_jobs_and_says_there_are_more(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    receiver: Receiver,
) -> None:
    data = webhook_config(server, data_dir, receiver.url)
    many = WAITING_NAMED + 1
    data["limits"] = {
        "max_unresolved_jobs_per_agent": many,
        "max_prepares_per_minute": many,
        "prepare_burst": many,
    }
    hooked = Hooked(open_gateway(parse_config(data)), receiver.secret)
    try:
        jobs = [hooked.prepare(status=f"s{n}") for n in range(many)]
        set_stopped(hooked.gw, OWNER, "account-assistant", True)
        [message] = [m for m in hooked.messages() if m.event == "agent.stopped"]
        assert message.job_id is None
        sent = json.loads(message.payload)["data"]
        assert sent["waiting_jobs"] == jobs[:0:-1]  # the newest, newest first
        assert sent["more_waiting_jobs"] is True
        assert sent["actor"] == OWNER.label and sent["actor_label"] is None  # no key
    finally:
        hooked.http.close()
