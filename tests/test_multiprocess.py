"""Several ``undogate serve`` processes on one ledger, as real processes against the
contract server, on each engine: SQLite (one file on this machine, shared by processes
started apart) and PostgreSQL. A confirm raced through two processes writes once; a key
revoked through one is refused by the other on the next request; a process killed
mid-write leaves its write ``dispatching`` until its lease expires (a reviewer who tries
to act on its job meanwhile is told so, through the API and the web page), then a live
process settles it as ``uncertain`` and reconciles it, while its own writes go on."""

from __future__ import annotations

import re
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from undogate.contract_server import ContractServer
from undogate.jobs import ActionStatus, ChangeState, JobState
from undogate.ledger import Store

from .browser import accessibility_problems, chromium_missing
from .fixtures.fleet import CUSTOMER, LEASE_S, QUOTA, SUPPLIER, Fleet
from .serving import cli, serve_log, serving
from .test_web_browser import open_page
from .worlds import MASTER_KEY


@pytest.fixture
def ledger(fleet_ledger: Store) -> Store:
    return fleet_ledger


def _call(url: str, key: str, path: str, body: dict[str, object] | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    if body is None:
        return httpx.get(f"{url}{path}", headers=headers, timeout=30)
    return httpx.post(f"{url}{path}", json=body, headers=headers, timeout=30)


def _prepare(url: str, fleet: Fleet, resource_id: str, status: str) -> str:
    body: dict[str, object] = {"summary": f"{resource_id} {status}", "changes": [
        {"resource": resource_id, "set": {"status": status}}
    ]}  # fmt: skip
    prepared = _call(url, fleet.agent, "/api/v1/jobs", body)
    assert prepared.status_code == 201, prepared.text
    return str(prepared.json()["job_id"])


def _preview(url: str, fleet: Fleet, job_id: str, operation: str = "apply") -> str:
    shown = _call(url, fleet.operator, f"/api/v1/jobs/{job_id}/previews", {"operation": operation})
    assert shown.status_code == 200, shown.text
    return str(shown.json()["preview_token"])


def _confirm(url: str, fleet: Fleet, job_id: str, token: str) -> httpx.Response:
    return _call(url, fleet.operator, f"/api/v1/jobs/{job_id}/confirm", {"preview_token": token})


def test_a_confirm_raced_through_two_processes_writes_exactly_once(
    fleet: Fleet, server: ContractServer
) -> None:
    with serving(fleet.config, fleet.env) as (a, _), serving(fleet.config, fleet.env) as (b, _):
        job_id = _prepare(a, fleet, "customer", "customer")
        token = _preview(b, fleet, job_id)
        writes = server.write_count(CUSTOMER)
        start = threading.Barrier(4)
        answers: list[str] = []

        def confirm(url: str) -> None:
            start.wait(10)
            answer = _confirm(url, fleet, job_id, token)
            if answer.status_code == 200:  # a confirm that came after the winner had
                # finished is answered with the same receipt, marked repeated
                answers.append("repeated" if answer.json()["repeated"] else "applied")
            else:
                answers.append(answer.json()["error"]["code"])

        racers = [threading.Thread(target=confirm, args=(u,)) for u in (a, b, a, b)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(60)
        assert answers.count("applied") == 1, answers
        # The losers are refused (the token spent, or the job moved on under them) or,
        # arriving after the winner finished, shown its receipt; none sends anything.
        losers = {"repeated", "preview_used", "changed_since_preview"}
        assert set(answers) - {"applied"} <= losers, answers
        assert server.write_count(CUSTOMER) == writes + 1
        assert server.get_record(CUSTOMER)["status"] == "customer"

        # The same token again, through either process: nothing is sent again.
        for url in (a, b):
            assert _confirm(url, fleet, job_id, token).status_code in (200, 409)
        assert server.write_count(CUSTOMER) == writes + 1


def test_a_key_revoked_through_one_process_is_refused_by_the_other_at_once(
    fleet: Fleet,
) -> None:
    with serving(fleet.config, fleet.env) as (a, _), serving(fleet.config, fleet.env) as (b, _):
        made = _call(
            a,
            MASTER_KEY,
            "/api/v1/admin/keys",
            {"kind": "agent", "agent": "account-assistant", "owner": fleet.owner, "label": "x"},
        )
        assert made.status_code == 201, made.text
        key, credential = made.json()["key"], made.json()["credential"]["id"]
        for url in (a, b):  # both have verified it (a memo would now hold it)
            assert _call(url, key, "/api/v1/resources").status_code == 200
        revoked = _call(a, MASTER_KEY, f"/api/v1/admin/keys/{credential}/revoke", {})
        assert revoked.status_code == 200, revoked.text
        refused = _call(b, key, "/api/v1/resources")
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == "unauthorized"
        assert _call(a, key, "/api/v1/resources").status_code == 401

        # And revoked directly on the ledger by the CLI (a third process): the same.
        listed = cli("keys", "list", "--config", str(fleet.config), env=fleet.env)
        assert listed.returncode == 0, listed.stderr
        assert _call(b, fleet.agent, "/api/v1/resources").status_code == 200
        agent_id = "at_" + fleet.agent[4:16]
        gone = cli("keys", "revoke", agent_id, "--config", str(fleet.config), env=fleet.env)
        assert gone.returncode == 0, gone.stderr
        for url in (a, b):
            assert _call(url, fleet.agent, "/api/v1/resources").status_code == 401


def test_a_process_killed_mid_write_is_settled_only_after_its_lease_expires(
    fleet: Fleet, server: ContractServer, ledger: Store
) -> None:
    with (
        serving(fleet.config, fleet.env) as (a, doomed),
        serving(fleet.config, fleet.env) as (
            b,
            _,
        ),
    ):
        hanging_job = _prepare(a, fleet, "customer", "customer")
        token = _preview(a, fleet, hanging_job)
        gate = server.hold_next_write(CUSTOMER)
        outcome: list[int] = []
        confirming = threading.Thread(
            target=lambda: outcome.append(_confirm_quietly(a, fleet, hanging_job, token))
        )
        confirming.start()
        assert gate.arrived.wait(30), "the write never reached the endpoint"
        _write_through(b, fleet, "prospect")  # the other process writes meanwhile

        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
        (action,) = ledger.read(lambda tx: tx.in_flight_actions())
        assert action.job_id == hanging_job and action.lease_id is not None
        lease_expiry = _lease_expiry(ledger, action.lease_id)
        assert time.time() < lease_expiry  # dead, but its lease not yet expired: held
        gate.release()  # the write lands; nobody records its outcome
        confirming.join(30)
        _write_through(b, fleet, "customer")  # and goes on writing after the kill

        # Once the lease expired, the live process settles the dead one's write.
        _wait_for(lambda: _state(ledger, hanging_job) is JobState.NEEDS_REVIEW)
        job = ledger.load_job(hanging_job)
        assert job is not None
        assert job.changes[0].state is ChangeState.UNCERTAIN
        assert job.actions[-1].status is ActionStatus.UNCERTAIN
        finished_at = job.actions[-1].finished_at
        assert finished_at is not None and finished_at >= lease_expiry
        assert "lease" in (job.actions[-1].detail or "")
        assert ledger.read(lambda tx: tx.in_flight_actions()) == []
        assert server.get_record(CUSTOMER)["status"] == "customer"  # it did land

        # Reconciled through the live process: the observed state is accepted.
        accept = _preview(b, fleet, hanging_job, "accept_observed")
        reconciled = _confirm(b, fleet, hanging_job, accept)
        assert reconciled.status_code == 200, reconciled.text
        assert reconciled.json()["job"]["state"] == "applied"


def test_a_reviewer_is_told_a_killed_process_s_write_is_settled_once_its_lease_expires(
    fleet: Fleet, server: ContractServer, ledger: Store, request: pytest.FixtureRequest
) -> None:
    """While a process killed mid-write still holds its lease, its job stays applying:
    what a reviewer tries on it is refused with what is true, and when it changes."""
    if (missing := chromium_missing()) is not None:
        pytest.skip(missing)
    browser: Any = request.getfixturevalue("browser")
    _set_lease_s(fleet.config, 60)  # the refusals below all come before it expires
    with (
        serving(fleet.config, fleet.env) as (a, doomed),
        serving(fleet.config, fleet.env) as (
            b,
            _,
        ),
    ):
        job_id = _prepare(a, fleet, "customer", "customer")
        reviewer = open_page(browser)
        page = reviewer.page
        page.goto(f"{b}/signin")
        page.get_by_label("Operator key").fill(fleet.operator)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{b}/inbox")
        page.goto(f"{b}/jobs/{job_id}")  # opened while prepared: it offers the apply

        token = _preview(a, fleet, job_id)
        gate = server.hold_next_write(CUSTOMER)
        confirming = threading.Thread(target=lambda: _confirm_quietly(a, fleet, job_id, token))
        confirming.start()
        try:
            assert gate.arrived.wait(30), "the write never reached the endpoint"
            doomed.send_signal(signal.SIGKILL)
            doomed.wait(10)
            (action,) = ledger.read(lambda tx: tx.in_flight_actions())
            assert action.lease_id is not None
            expires_at = _lease_expiry(ledger, action.lease_id)
            at = datetime.fromtimestamp(expires_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            truth = (
                "a gateway process is writing this job's changes (applying), or it stopped "
                "while writing them. If that process is alive, the job moves on when its "
                "write finishes. If it is gone, another gateway process settles the write "
                f"as uncertain once its lease expires, at {at}; the observed state can be "
                "accepted then"
            )
            asked: list[tuple[str, dict[str, object], str]] = [
                (f"/api/v1/jobs/{job_id}/previews", {"operation": operation}, event)
                for operation, event in (
                    ("accept_observed", "accept_observed"),
                    ("undo", "start_undo"),
                    ("apply", "start_apply"),
                )
            ]
            asked.append((f"/api/v1/jobs/{job_id}/reject", {}, "reject"))
            for path, body, event in asked:
                refused = _call(b, fleet.operator, path, body)
                assert refused.status_code == 409, refused.text
                error = refused.json()["error"]
                assert error["code"] == "transition_not_allowed"
                assert error["message"] == f"Can't {event.replace('_', ' ')} yet: {truth}"
                assert error["details"]["lease_expires_at"] == expires_at

            page.get_by_role("button", name="Preview apply").click()
            page.wait_for_load_state()
            shown = " ".join(page.inner_text("main").split())
            assert f"Can't start apply yet: {truth}" in shown
            assert "Reason code: transition_not_allowed" in shown
            assert accessibility_problems(page) == []
            reviewer.assert_inert()

            # Refused, nothing moved: the write stays the dead process's until its lease
            # expires.
            assert _state(ledger, job_id) is JobState.APPLYING
            assert ledger.read(lambda tx: tx.in_flight_actions()) == [action]
        finally:
            gate.release()
            confirming.join(30)
            reviewer.page.context.close()


def _set_lease_s(config: Path, lease_s: float) -> None:
    settings = yaml.safe_load(config.read_text())
    settings["server"]["lease_s"] = lease_s
    config.write_text(yaml.safe_dump(settings))


def _write_through(url: str, fleet: Fleet, status: str) -> None:
    """A whole job on the supplier record through one process: applied, done."""
    job_id = _prepare(url, fleet, "supplier", status)
    confirmed = _confirm(url, fleet, job_id, _preview(url, fleet, job_id))
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["job"]["state"] == "applied"
    assert [a["status"] for a in confirmed.json()["job"]["actions"]] == ["done"]


def _confirm_quietly(url: str, fleet: Fleet, job_id: str, token: str) -> int:
    """A confirm whose process is killed under it: the connection just drops."""
    try:
        return _confirm(url, fleet, job_id, token).status_code
    except httpx.TransportError:
        return 0


def _lease_expiry(ledger: Store, lease_id: str) -> float:
    row = ledger.read(
        lambda tx: tx.connection.execute(  # type: ignore[attr-defined]
            "SELECT expires_at FROM leases WHERE id = ?", (lease_id,)
        ).fetchone()
    )
    assert row is not None
    return float(row[0])


def _state(ledger: Store, job_id: str) -> JobState | None:
    job = ledger.load_job(job_id, with_actions=False)
    return job.state if job is not None else None


def _wait_for(condition: object, timeout: float = 20.0) -> float:
    """Poll ``condition`` (a bounded loop, not a fixed wait); returns when it held."""
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return time.time()
        time.sleep(0.1)
    raise AssertionError("the condition never held")


def test_a_process_starting_never_settles_a_live_process_write_in_flight(
    fleet: Fleet, server: ContractServer, ledger: Store
) -> None:
    with serving(fleet.config, fleet.env) as (a, _):
        job_id = _prepare(a, fleet, "customer", "customer")
        token = _preview(a, fleet, job_id)
        gate = server.hold_next_write(CUSTOMER)
        outcome: list[int] = []
        confirming = threading.Thread(
            target=lambda: outcome.append(_confirm(a, fleet, job_id, token).status_code)
        )
        confirming.start()
        try:
            assert gate.arrived.wait(30), "the write never reached the endpoint"
            # A second process starts (its recovery runs) and lives a few lease periods.
            with serving(fleet.config, fleet.env) as (_, started):
                _wait_for(lambda: "recovery: 0 interrupted write(s)" in serve_log(started))
                (action,) = ledger.read(lambda tx: tx.in_flight_actions())
                assert action.job_id == job_id and action.lease_id is not None
                # Past the expiry A's lease had when the write began, and a sweep after:
                # A renewed it, so nobody settled its write.
                first_expiry = _lease_expiry(ledger, action.lease_id)
                _wait_for(lambda: time.time() > first_expiry + LEASE_S / 2)
                assert _lease_expiry(ledger, action.lease_id) > first_expiry
                assert ledger.read(lambda tx: tx.in_flight_actions()) == [action]
                assert _state(ledger, job_id) is JobState.APPLYING
        finally:
            gate.release()
            confirming.join(30)
        assert outcome == [200]
        job = ledger.load_job(job_id)
        assert job is not None and job.state is JobState.APPLIED
        assert [a.status for a in job.actions] == [ActionStatus.DONE]


def test_a_flood_through_both_processes_gets_exactly_its_quota_and_never_starves_another_owner(
    fleet: Fleet,
) -> None:
    """One owner's agent floods prepares through both processes while another owner's
    agent prepares beside it: the first gets exactly its quota (counted in the ledger,
    whichever process admits), the rest refused with ``quota_exceeded``; every prepare of
    the other owner lands, during the flood."""
    with serving(fleet.config, fleet.env) as (a, _), serving(fleet.config, fleet.env) as (b, _):
        bob = _call(a, MASTER_KEY, "/api/v1/admin/keys", {"kind": "operator", "label": "bob"})
        assert bob.status_code == 201, bob.text
        bobs = _call(
            b,
            MASTER_KEY,
            "/api/v1/admin/keys",
            {"kind": "agent", "agent": "account-assistant",
             "owner": bob.json()["credential"]["id"], "label": "bob's"},
        )  # fmt: skip
        assert bobs.status_code == 201, bobs.text
        body: dict[str, object] = {
            "summary": "flood",
            "changes": [{"resource": "customer", "set": {"status": "x"}}],
        }
        flooders, each = 12, 4
        start = threading.Barrier(flooders + 1)

        def flood(i: int) -> list[httpx.Response]:
            start.wait(30)
            return [
                _call((a, b)[(i + n) % 2], fleet.agent, "/api/v1/jobs", body) for n in range(each)
            ]

        def bob_prepares() -> list[httpx.Response]:
            start.wait(30)
            key = bobs.json()["key"]
            return [_call((b, a)[n % 2], key, "/api/v1/jobs", body) for n in range(QUOTA)]

        with ThreadPoolExecutor(flooders + 1) as pool:
            floods = [pool.submit(flood, i) for i in range(flooders)]
            bobs_answers = pool.submit(bob_prepares).result(120)
            answers = [r for f in floods for r in f.result(120)]
        made = [r for r in answers if r.status_code == 201]
        refused = [r.json()["error"]["code"] for r in answers if r.status_code != 201]
        assert len(made) == QUOTA, refused[:3]
        assert refused == ["quota_exceeded"] * (flooders * each - QUOTA)
        assert [r.status_code for r in bobs_answers] == [201] * QUOTA, [
            r.text for r in bobs_answers
        ]


CSRF = re.compile(r'name="csrf" value="([^"]+)"')
PREVIEW_TOKEN = re.compile(r'name="preview_token" value="([^"]+)"')


def _field(pattern: re.Pattern[str], html: str) -> str:
    found = pattern.search(html)
    assert found, html[:2000]
    return found.group(1)


def test_review_sessions_are_shared_by_processes_and_survive_a_restart(
    fleet: Fleet, server: ContractServer
) -> None:
    """Signed in through one process, a reviewer previews there, opens that preview and
    confirms it through another; a restarted process still knows the session."""
    with serving(fleet.config, fleet.env) as (a, _):
        job_id = _prepare(a, fleet, "customer", "customer")
        with httpx.Client(base_url=a, timeout=30, follow_redirects=True) as browser:
            form = browser.get("/signin")  # the form of one process...
            with serving(fleet.config, fleet.env) as (b, _):
                signed = browser.post(  # ... is good at another
                    f"{b}/signin", data={"key": fleet.operator, "csrf": _field(CSRF, form.text)}
                )
                assert signed.url.path == "/inbox", signed.text[:500]
            cookies = dict(browser.cookies)
        # The process that signed the reviewer in is gone; A and a new B know them.
        with serving(fleet.config, fleet.env) as (b, _):
            for url in (a, b):
                with httpx.Client(base_url=url, cookies=cookies, timeout=30) as browser:
                    assert browser.get("/agents").status_code == 200
            with httpx.Client(base_url=a, cookies=cookies, timeout=30) as on_a:
                csrf = _field(CSRF, on_a.get(f"/jobs/{job_id}").text)
                shown = on_a.post(
                    f"/jobs/{job_id}/previews", data={"csrf": csrf, "operation": "apply"}
                )
                assert shown.status_code == 303, shown.text[:500]
                preview_path = shown.headers["location"]
            with httpx.Client(base_url=b, cookies=cookies, timeout=30) as on_b:
                page = on_b.get(preview_path)  # held in the ledger, sealed
                assert page.status_code == 200, page.text[:500]
                token = _field(PREVIEW_TOKEN, page.text)
                done = on_b.post(
                    f"/jobs/{job_id}/confirm", data={"csrf": csrf, "preview_token": token}
                )
                assert done.status_code == 303
                receipt = on_b.get(done.headers["location"])
                assert "Confirmed. This is the receipt of what ran." in receipt.text
        assert server.get_record(CUSTOMER)["status"] == "customer"


def test_a_rewind_confirmed_through_two_processes_at_once_runs_once(
    fleet: Fleet, server: ContractServer
) -> None:
    """One plan's preview token confirmed four times at once through two processes: one
    runs the plan, each other is refused (its token spent, or the plan run) and sends
    nothing."""
    with serving(fleet.config, fleet.env) as (a, _), serving(fleet.config, fleet.env) as (b, _):
        _write_through(a, fleet, "paused")
        selection: dict[str, object] = {"agent": "account-assistant", "since": "1h"}
        planned = _call(a, fleet.operator, "/api/v1/rewinds", selection)
        assert planned.status_code == 201, planned.text
        rewind_id = planned.json()["rewind_id"]
        shown = _call(b, fleet.operator, f"/api/v1/rewinds/{rewind_id}/preview", {})
        assert shown.status_code == 200, shown.text
        token = shown.json()["preview_token"]
        writes = server.write_count(SUPPLIER)
        start = threading.Barrier(4)
        answers: list[str] = []

        def confirm(url: str) -> None:
            start.wait(10)
            path = f"/api/v1/rewinds/{rewind_id}/confirm"
            answer = _call(url, fleet.operator, path, {"preview_token": token})
            answers.append("ran" if answer.status_code == 200 else answer.json()["error"]["code"])

        racers = [threading.Thread(target=confirm, args=(u,)) for u in (a, b, a, b)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(60)
        assert answers.count("ran") == 1, answers
        assert set(answers) - {"ran"} <= {"preview_used", "changed_since_preview"}, answers
        assert server.write_count(SUPPLIER) == writes + 1
        assert server.get_record(SUPPLIER)["status"] == "active"
        report = _call(b, fleet.operator, f"/api/v1/rewinds/{rewind_id}").json()
        assert report["state"] == "finished"
