"""Webhooks from ``undogate serve`` (docs/webhooks.md): the delivery task runs beside the server,
its outbox outlives a restart, and an operator sees every failure in the log, in
``undogate webhooks list`` and on the review pages, never with a secret."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from undogate.contract_server import ContractServer

from .postgres import PostgresCluster
from .serving import SERVE, cli, free_port, serve_log, serving, wait_healthy
from .webhook_receiver import Receiver, new_secret, wait_until
from .worlds import MASTER_KEY, resource

SECRET_ENV = "UNDOGATE_TEST_WEBHOOK_SECRET"
PATH = "/records/customer-123"
CSRF_RE = re.compile(r'name="csrf" value="([^"]+)"')


class WebhookWorld:
    """A config with one webhook endpoint, its operator and agent keys; ``serve`` runs it."""

    def __init__(
        self,
        tmp_path: Path,
        server: ContractServer,
        receiver: Receiver,
        attempts: int = 3,
        ledger: str | None = None,
    ) -> None:
        self.config = tmp_path / "undogate.yaml"
        self.receiver = receiver
        place = {"ledger": ledger} if ledger else {}
        self.config.write_text(
            yaml.safe_dump(
                {
                    "server": {"data_dir": str(tmp_path / "data"), **place},
                    "resources": [resource(server, "customer", PATH)],
                    "agents": [{"id": "account-assistant", "tools": ["prepare_changes"]}],
                    "webhooks": {
                        "endpoints": [
                            {
                                "id": "ops-chat",
                                "url": receiver.url,
                                "secret_env": SECRET_ENV,
                                "allow_loopback_http": True,
                            }
                        ],
                        "poll_s": 0.1,
                        "first_retry_s": 0.1,
                        "max_retry_s": 0.3,
                        "max_attempts": attempts,
                        "timeout_s": 2,
                    },
                }
            )
        )
        self.env = {**os.environ, "UNDOGATE_MASTER_KEY": MASTER_KEY, SECRET_ENV: receiver.secret}
        init = cli("init", "--config", str(self.config), env=self.env)
        assert init.returncode == 0, init.stderr
        self.operator = init.stdout.strip()
        owner = "op_" + self.operator[4:16]
        made = cli(
            "keys", "create-agent", "--agent", "account-assistant", "--owner", owner,
            "--config", str(self.config), env=self.env,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        self.agent = made.stdout.splitlines()[0]

    def prepare(self, url: str) -> str:
        response = httpx.post(
            f"{url}/api/v1/jobs",
            json={
                "summary": "Promote Ada",
                "changes": [{"resource": "customer", "set": {"status": "platinum"}}],
            },
            headers={"Authorization": f"Bearer {self.agent}"},
            timeout=30,
        )
        assert response.status_code == 201, response.text
        return str(response.json()["job_id"])

    def messages(self, url: str, status: str = "") -> list[dict[str, Any]]:
        response = httpx.get(
            f"{url}/api/v1/webhooks/messages" + (f"?status={status}" if status else ""),
            headers={"Authorization": f"Bearer {self.operator}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        found: list[dict[str, Any]] = response.json()["messages"]
        return found

    def cli_list(self, url: str, *args: str) -> Any:
        env = {**self.env, "UNDOGATE_URL": url, "UNDOGATE_KEY": self.operator, "COLUMNS": "200"}
        return cli("webhooks", "list", *args, env=env)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(new_secret())
    yield r
    r.stop()


def test_the_outbox_outlives_a_restart_and_a_receiver_that_was_down(
    tmp_path: Path, server: ContractServer, receiver: Receiver
) -> None:
    # The receiver is not started: it is down. Enough attempts to outlast this serve.
    gw = WebhookWorld(tmp_path, server, receiver, attempts=100)
    with serving(gw.config, gw.env) as (url, proc):
        job_id = gw.prepare(url)
        wait_until(lambda: "attempt 1 of 100 failed" in serve_log(proc), what="a failed attempt")
        [waiting] = gw.messages(url)
        assert waiting["status"] == "pending"
        assert waiting["job_id"] == job_id
        listed = gw.cli_list(url)
        assert listed.returncode == 0, listed.stderr  # nothing failed for good yet
        assert waiting["id"] in listed.stdout and "pending" in listed.stdout
        log = serve_log(proc)
    assert f"webhook {waiting['id']} (job.prepared, job {job_id}) to endpoint ops-chat" in log
    assert receiver.secret not in log and "/hooks/undogate" not in log

    receiver.start()
    with serving(gw.config, gw.env) as (url, proc):
        [body] = receiver.wait_for(1)  # verified with the standardwebhooks package
        assert body["type"] == "job.prepared"
        assert body["data"]["job_id"] == job_id
        assert receiver.received[0].headers["webhook-id"] == waiting["id"]
        wait_until(lambda: gw.messages(url)[0]["status"] == "delivered", what="delivered")
        assert "Promote" not in receiver.received[0].body.decode()


def test_a_failing_receiver_is_shown_to_operators_everywhere(
    tmp_path: Path, server: ContractServer, receiver: Receiver
) -> None:
    receiver.status = 500
    receiver.start()
    gw = WebhookWorld(tmp_path, server, receiver)
    with serving(gw.config, gw.env) as (url, proc):
        job_id = gw.prepare(url)
        wait_until(lambda: bool(gw.messages(url, "failed")), what="the message failing")
        [failed] = gw.messages(url, "failed")
        assert failed["attempts"] == 3
        assert failed["last_response_status"] == 500
        assert failed["last_error"] == "the receiver answered HTTP 500"
        assert len(receiver.received) == 3

        listed = gw.cli_list(url, "--status", "failed")
        assert listed.returncode == 1  # a failure for good: a cron job can tell
        for text in (failed["id"], "ops-chat", "job.prepared", job_id, "HTTP 500"):
            assert text in listed.stdout, listed.stdout
        assert receiver.url not in listed.stdout

        with httpx.Client(base_url=url, timeout=30) as web:
            form = web.get("/signin")
            csrf = CSRF_RE.search(form.text)
            assert csrf is not None
            signed = web.post("/signin", data={"key": gw.operator, "csrf": csrf.group(1)})
            assert signed.status_code in (200, 303), signed.text
            page = web.get("/webhooks?status=failed")
        assert page.status_code == 200
        for text in (failed["id"][:8], "ops-chat", job_id, "the receiver answered HTTP 500"):
            assert text in page.text
        assert 'href="/webhooks"' in page.text  # in the navigation of every page
        assert receiver.url not in page.text and receiver.secret not in page.text

        wrong = httpx.get(
            f"{url}/api/v1/webhooks/messages?status=lost",
            headers={"Authorization": f"Bearer {gw.operator}"},
        )
        assert wrong.status_code == 400
        assert wrong.json()["error"]["code"] == "invalid_request"
        agents_only = httpx.get(
            f"{url}/api/v1/webhooks/messages", headers={"Authorization": f"Bearer {gw.agent}"}
        )
        assert agents_only.status_code == 403
        log = serve_log(proc)
    assert "failed for good after 3 attempt(s): the receiver answered HTTP 500" in log
    assert receiver.secret not in log and "/hooks/undogate" not in log


def test_serve_warns_about_an_unset_webhook_secret(
    tmp_path: Path, server: ContractServer, receiver: Receiver
) -> None:
    gw = WebhookWorld(tmp_path, server, receiver)
    env = {k: v for k, v in gw.env.items() if k != SECRET_ENV}
    warning = f"webhook ops-chat: its secret variable {SECRET_ENV} is not set"
    with serving(gw.config, env) as (_, proc):
        # The warning precedes "serving", but the drain thread may still be catching up.
        wait_until(lambda: warning in serve_log(proc), what="the warning")


def test_a_write_cut_off_by_a_crash_is_announced_once_recovery_quarantines_it(
    tmp_path: Path, server: ContractServer, receiver: Receiver
) -> None:
    receiver.start()
    gw = WebhookWorld(tmp_path, server, receiver)
    auth = {"Authorization": f"Bearer {gw.operator}"}
    with serving(gw.config, {**gw.env, "UNDOGATE_CRASH_AT": "apply:after_response"}) as (url, proc):
        job_id = gw.prepare(url)
        receiver.wait_for(1)
        preview = httpx.post(
            f"{url}/api/v1/jobs/{job_id}/previews", json={"operation": "apply"}, headers=auth
        )
        assert preview.status_code == 200, preview.text
        with pytest.raises(httpx.TransportError):  # the gateway dies mid-confirm
            httpx.post(
                f"{url}/api/v1/jobs/{job_id}/confirm",
                json={"preview_token": preview.json()["preview_token"]},
                headers=auth,
                timeout=30,
            )
        assert proc.wait(timeout=15) == -9
    with serving(gw.config, gw.env) as (url, _):
        bodies = receiver.wait_for(2)
        assert [b["type"] for b in bodies] == ["job.prepared", "job.needs_review"]
        assert bodies[1]["data"]["previous_state"] == "applying"
        assert bodies[1]["data"]["job_id"] == job_id
        wait_until(
            lambda: all(m["status"] == "delivered" for m in gw.messages(url)), what="delivered"
        )


def test_workers_on_a_postgresql_ledger_deliver_each_message_once(
    tmp_path: Path, server: ContractServer, receiver: Receiver, postgres_cluster: PostgresCluster
) -> None:
    """Every worker of ``serve --workers`` runs the delivery task over the one outbox:
    they race for the same due messages, and each is claimed, sent and recorded once."""
    receiver.start()
    gw = WebhookWorld(tmp_path, server, receiver, ledger=postgres_cluster.fresh_database())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    parent = subprocess.Popen(
        [*SERVE, "--config", str(gw.config), "--port", str(port), "--workers", "2"],
        env=gw.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(url, parent)
        jobs = {gw.prepare(url) for _ in range(8)}
        wait_until(lambda: len(gw.messages(url, "delivered")) == len(jobs), what="every delivery")
        messages = gw.messages(url)
    finally:
        parent.send_signal(signal.SIGTERM)
        _, log = parent.communicate(timeout=30)
    assert {m["job_id"] for m in messages} == jobs
    assert all(m["status"] == "delivered" and m["attempts"] == 1 for m in messages)
    ids = [r.headers["webhook-id"] for r in receiver.received]
    assert sorted(ids) == sorted(m["id"] for m in messages), log  # none sent twice
    assert {b["data"]["job_id"] for b in receiver.verified()} == jobs
    assert "outlived its claim" not in log


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request: pytest.FixtureRequest) -> str | None:
    """None: the SQLite ledger in the data dir; else a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return None
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    return cluster.fresh_database()


def test_stopping_and_resuming_an_agent_is_announced_to_its_owner_alone(
    tmp_path: Path, server: ContractServer, receiver: Receiver, ledger_url: str | None
) -> None:
    """Stop and resume over the API: ``agent.stopped`` then ``agent.resumed``, signed,
    naming who acted and the owner's waiting jobs it holds or releases; another owner's
    stop of the same agent names none of them, and each owner lists their own."""
    receiver.start()
    gw = WebhookWorld(tmp_path, server, receiver, ledger=ledger_url)
    made = cli(
        "keys", "create-operator", "--label", "night-shift", "--config", str(gw.config),
        env=gw.env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    other = made.stdout.splitlines()[0]
    stop = "/api/v1/agents/account-assistant/stop"
    resume = "/api/v1/agents/account-assistant/resume"
    with serving(gw.config, gw.env) as (url, _):
        mine = {"Authorization": f"Bearer {gw.operator}"}
        theirs = {"Authorization": f"Bearer {other}"}
        waiting = gw.prepare(url)
        receiver.wait_for(1)
        stopped = httpx.post(url + stop, headers=mine, timeout=30)
        assert stopped.status_code == 200, stopped.text
        again = httpx.post(url + stop, headers=mine, timeout=30)  # changes nothing
        assert again.json()["stopped_at"] == stopped.json()["stopped_at"]
        receiver.wait_for(2)
        resumed = httpx.post(url + resume, headers=mine, timeout=30)
        assert resumed.status_code == 200 and resumed.json()["stopped"] is False
        receiver.wait_for(3)
        assert httpx.post(url + stop, headers=theirs, timeout=30).status_code == 200
        bodies = receiver.wait_for(4)
        wait_until(
            lambda: all(m["status"] == "delivered" for m in gw.messages(url)), what="delivered"
        )
        listed = gw.messages(url)
        their_list = httpx.get(f"{url}/api/v1/webhooks/messages", headers=theirs, timeout=30)
        shown = gw.cli_list(url)
        with httpx.Client(base_url=url, timeout=30) as web:
            form = web.get("/signin")
            csrf = CSRF_RE.search(form.text)
            assert csrf is not None
            web.post("/signin", data={"key": gw.operator, "csrf": csrf.group(1)})
            page = web.get("/webhooks")
    assert [b["type"] for b in bodies] == [
        "job.prepared",
        "agent.stopped",
        "agent.resumed",
        "agent.stopped",
    ]
    owner = bodies[0]["data"]["owner_id"]
    stop_data = bodies[1]["data"]
    assert stop_data["actor"] == f"operator:{owner}"  # an operator key is its owner
    assert stop_data == {
        "owner_id": owner,
        "agent_id": "account-assistant",
        "stopped": True,
        "actor": stop_data["actor"],
        "actor_label": "first operator",
        "waiting_jobs": [waiting],
        "more_waiting_jobs": False,
        "review_url": "/agents/account-assistant/rewind",
    }
    # When: the stop's own time, as the API answered it.
    stopped_at = datetime.fromisoformat(bodies[1]["timestamp"]).timestamp()
    assert stopped_at == pytest.approx(stopped.json()["stopped_at"], abs=0.001)
    assert bodies[2]["data"] == {**stop_data, "stopped": False}  # the same job released
    their_stop = bodies[3]["data"]
    assert their_stop["owner_id"] != owner and their_stop["actor"] != stop_data["actor"]
    assert their_stop["actor_label"] == "night-shift"
    assert their_stop["waiting_jobs"] == []  # the first owner's job is not theirs to hear of
    for got in receiver.received:
        assert gw.operator not in got.body.decode() and other not in got.body.decode()
    # Each owner lists their own messages; one about an agent names no job.
    assert [(m["event"], m["job_id"]) for m in listed] == [
        ("agent.resumed", None),
        ("agent.stopped", None),
        ("job.prepared", waiting),
    ]
    assert listed[0]["review_path"] == "/agents/account-assistant/rewind"
    assert their_list.status_code == 200
    assert [(m["event"], m["job_id"]) for m in their_list.json()["messages"]] == [
        ("agent.stopped", None)
    ]
    assert shown.returncode == 0, shown.stderr
    assert "agent account-assistant" in shown.stdout and "agent.resumed" in shown.stdout
    assert page.status_code == 200
    assert page.text.count('href="/agents/account-assistant/rewind">agent <code>') == 2
    assert f'href="/jobs/{waiting}"><code>{waiting}</code>' in page.text
