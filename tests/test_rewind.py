"""Rewind (docs/rewind.md): an agent's work since a moment, undone as one reviewed plan,
against the real contract server and a real ledger."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from undogate.auth import Keyring
from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.errors import (
    AgentStopped,
    ChangedSincePreview,
    PreviewExpired,
    PreviewUsed,
    RewindBlocked,
)
from undogate.jobs import ChangeRequest, ChangeState, JobState, Operation
from undogate.operations.agent_stop import set_stopped
from undogate.operations.rewind import (
    RewindPlan,
    confirm_plan,
    create_plan,
    load_plan,
    preview_plan,
)
from undogate.operations.rewind_plan import Selection, StepVerdict
from undogate.web.refusals import refusal_for

from .serving import cli
from .worlds import OWNER, LocalGateway, confirmed, make_config, prepare, resource

CUSTOMER = "/records/customer-123"
TICKET = "/records/wrapped-7"
SUPPLIER = "/records/supplier-7"
AGENT_ID = "account-assistant"


def three_records(server: ContractServer, data_dir: Path) -> Config:
    """The customer, the ticket (inside ``/data``) and a supplier record."""
    server.set_record(SUPPLIER, {"name": "Acme", "status": "active", "owner": "kim"})
    return make_config(
        server,
        data_dir,
        resource(server, "customer", CUSTOMER),
        resource(server, "ticket", TICKET, record_pointer="/data", fields=["status", "owner"]),
        resource(server, "supplier", SUPPLIER, fields=["status", "owner"]),
    )


@pytest.fixture
def records(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> LocalGateway:
    return open_gateway(three_records(server, data_dir))


def applied(gw: LocalGateway, resource_id: str, **values: str) -> str:
    """A job of the agent on one record, applied; its id."""
    job_id = prepare(gw, ChangeRequest(resource_id, set=dict(values)))
    assert confirmed(gw, job_id).job.state is JobState.APPLIED
    return job_id


def plan(gw: LocalGateway, since: float, **more: object) -> RewindPlan:
    return create_plan(gw, OWNER, Selection(AGENT_ID, since, **more))  # type: ignore[arg-type]


def confirm(gw: LocalGateway, made: RewindPlan, *, skip_blocked: bool = False) -> RewindPlan:
    preview = preview_plan(gw, OWNER, load_plan(gw, OWNER.owner_id, made.id))
    fresh = load_plan(gw, OWNER.owner_id, made.id)
    return confirm_plan(gw, OWNER, fresh, preview.token, skip_blocked=skip_blocked)


def snapshot_bytes(server: ContractServer) -> dict[str, bytes]:
    return {p: server.raw_bytes(p) for p in (CUSTOMER, TICKET, SUPPLIER)}


def test_five_jobs_over_three_records_are_rewound_in_one_confirmation(
    records: LocalGateway, server: ContractServer
) -> None:
    before = snapshot_bytes(server)
    since = time.time()
    jobs = [
        applied(records, "customer", status="customer"),
        applied(records, "ticket", status="closed"),
        applied(records, "customer", status="vip"),  # the same field as the first job
        applied(records, "supplier", owner="lee"),
        applied(records, "ticket", owner="max"),
    ]
    made = plan(records, since)
    assert [s.job_id for s in made.steps] == jobs[::-1]  # newest first
    assert {s.verdict for s in made.steps} == {StepVerdict.UNDO}
    done = confirm(records, made)
    assert snapshot_bytes(server) == before  # byte for byte, every record
    assert [o for _s, o in done.outcomes()] == ["done"] * 5
    assert done.job_outcomes() == dict.fromkeys(jobs, "done")
    for job_id in jobs:
        job = records.get_job(OWNER.owner_id, job_id)
        assert job.state is JobState.UNDONE
    assert done.stored.state == "finished"


def test_a_later_job_outside_the_plan_blocks_its_field_and_is_named(
    records: LocalGateway, server: ContractServer
) -> None:
    since = time.time()
    first = applied(records, "customer", status="customer")
    second = applied(records, "customer", owner="lee")
    until = time.time()
    later = applied(records, "customer", status="vip")  # after ``until``: outside the plan
    made = plan(records, since, until=until)
    by_job = {s.job_id: s for s in made.steps}
    assert set(by_job) == {first, second}
    blocked = by_job[first]
    assert blocked.verdict is StepVerdict.BLOCKED
    assert blocked.in_the_way == later
    assert blocked.current == {"status": "vip"}
    assert by_job[second].verdict is StepVerdict.UNDO
    writes = server.write_count(CUSTOMER)
    preview = preview_plan(records, OWNER, load_plan(records, OWNER.owner_id, made.id))
    with pytest.raises(RewindBlocked) as info:
        confirm_plan(records, OWNER, load_plan(records, OWNER.owner_id, made.id), preview.token)
    assert info.value.details["blocked"][0]["in_the_way"] == later
    assert server.write_count(CUSTOMER) == writes  # nothing written
    # The refusal spent nothing: the same preview, confirmed skipping the blocked step.
    fresh = load_plan(records, OWNER.owner_id, made.id)
    done = confirm_plan(records, OWNER, fresh, preview.token, skip_blocked=True)
    record = server.get_record(CUSTOMER)
    assert record["owner"] == "sam"  # the second job undone
    assert record["status"] == "vip"  # the later value stays
    outcomes = {s.job_id: o for s, o in done.outcomes()}
    assert outcomes == {second: "done", first: "skipped"}
    assert records.get_job(OWNER.owner_id, later).state is JobState.APPLIED


def test_an_undo_lost_mid_plan_stops_the_plan_and_quarantines_that_step(
    records: LocalGateway, server: ContractServer
) -> None:
    since = time.time()
    oldest = applied(records, "customer", status="customer")
    middle = applied(records, "ticket", status="closed")
    newest = applied(records, "supplier", status="paused")
    made = plan(records, since)
    server.arm("apply_then_drop", TICKET)  # the ticket's undo lands, its answer is lost
    done = confirm(records, made)
    outcomes = {s.job_id: o for s, o in done.outcomes()}
    assert outcomes == {newest: "done", middle: "uncertain", oldest: "not_run"}
    assert done.job_outcomes() == {newest: "done", middle: "uncertain", oldest: "not_run"}
    assert done.stored.stopped is not None and done.stored.stopped["step"] == "2"
    assert records.get_job(OWNER.owner_id, middle).state is JobState.NEEDS_REVIEW
    assert records.get_job(OWNER.owner_id, oldest).changes[0].state is ChangeState.APPLIED
    assert server.get_record(CUSTOMER)["status"] == "customer"  # never sent


def test_a_plan_restores_what_its_own_later_jobs_overwrote_on_a_document(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    """Text guards compare versions: each step is checked against the version the step
    before it returns the document to."""
    gw = open_gateway(
        make_config(
            server, data_dir, resource(server, "notes", "/docs/notes.md", kind="webdav_text")
        )
    )
    before = server.raw_bytes("/docs/notes.md")
    since = time.time()
    for text in ("first\n", "second\n", "third\n"):
        job_id = prepare(gw, ChangeRequest("notes", text=text))
        assert confirmed(gw, job_id).job.state is JobState.APPLIED
    made = plan(gw, since)
    assert [s.verdict for s in made.steps] == [StepVerdict.UNDO] * 3
    confirm(gw, made)
    assert server.raw_bytes("/docs/notes.md") == before


def test_a_record_written_whole_blocks_the_older_steps_a_preview_could_not_show(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    """With ``write: put`` the second undo would send bytes only the first undo's
    read-back has: the plan blocks it rather than preview a request it would not send."""
    config = make_config(server, data_dir, resource(server, "customer", CUSTOMER, write="put"))
    gw = open_gateway(config)
    since = time.time()
    first = applied(gw, "customer", status="customer")
    newest = applied(gw, "customer", owner="lee")
    by_job = {s.job_id: s for s in plan(gw, since).steps}
    assert by_job[newest].verdict is StepVerdict.UNDO
    assert by_job[first].verdict is StepVerdict.BLOCKED
    assert "cannot be foreseen" in (by_job[first].message or "")


def test_an_outside_edit_blocks_its_step(records: LocalGateway, server: ContractServer) -> None:
    since = time.time()
    job_id = applied(records, "supplier", status="paused")
    server.set_field(SUPPLIER, "/status", "closed")  # someone else, outside the gateway
    made = plan(records, since)
    (step,) = made.steps
    assert step.verdict is StepVerdict.BLOCKED
    assert step.in_the_way is None and step.job_id == job_id
    assert step.current == {"status": "closed"}


def test_confirm_refuses_when_a_resource_moved_since_the_preview_and_a_token_is_single_use(
    records: LocalGateway, server: ContractServer
) -> None:
    since = time.time()
    applied(records, "customer", owner="lee")
    made = plan(records, since)
    preview = preview_plan(records, OWNER, load_plan(records, OWNER.owner_id, made.id))
    server.set_field(CUSTOMER, "/name", "Ada King")  # moves the version, not the field
    writes = server.write_count(CUSTOMER)
    with pytest.raises(ChangedSincePreview):
        confirm_plan(records, OWNER, load_plan(records, OWNER.owner_id, made.id), preview.token)
    assert server.write_count(CUSTOMER) == writes
    again = preview_plan(records, OWNER, load_plan(records, OWNER.owner_id, made.id))
    assert again.plan.steps[0].verdict is StepVerdict.UNDO  # another field: still undoable
    confirm_plan(records, OWNER, load_plan(records, OWNER.owner_id, made.id), again.token)
    with pytest.raises((PreviewUsed, ChangedSincePreview)):
        confirm_plan(records, OWNER, load_plan(records, OWNER.owner_id, made.id), again.token)


def test_already_undone_and_quarantined_jobs_are_named_not_run(
    records: LocalGateway, server: ContractServer
) -> None:
    since = time.time()
    undone = applied(records, "customer", status="customer")
    assert confirmed(records, undone, Operation.UNDO).job.state is JobState.UNDONE
    uncertain = prepare(records, ChangeRequest("ticket", set={"status": "closed"}))
    server.arm("apply_then_500", TICKET)
    assert confirmed(records, uncertain).job.state is JobState.NEEDS_REVIEW
    made = plan(records, since)
    verdicts = {s.job_id: s.verdict for s in made.steps}
    assert verdicts == {
        undone: StepVerdict.ALREADY_UNDONE,
        uncertain: StepVerdict.QUARANTINED,
    }


def test_a_finished_plan_announces_rewind_applied_without_values(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    config = three_records(server, data_dir)
    endpoint = {
        "id": "ops",
        "url": "http://127.0.0.1:9/hook",
        "secret_env": "UNDOGATE_TEST_WEBHOOK_SECRET",
        "allow_loopback_http": True,
    }
    gw = open_gateway(
        replace(config, webhooks=parse_config({"webhooks": {"endpoints": [endpoint]}}).webhooks)
    )
    since = time.time()
    job_id = applied(gw, "supplier", owner="lee")
    done = confirm(gw, plan(gw, since))
    messages = gw.ledger.read(lambda tx: tx.webhook_messages(OWNER.owner_id, (AGENT_ID,)))
    rewinds = [m for m in messages if m.event == "rewind.applied"]
    assert len(rewinds) == 1
    payload = json.loads(rewinds[0].payload)
    assert payload["data"]["rewind_id"] == done.id
    assert payload["data"]["jobs"] == {job_id: "done"}
    assert "lee" not in rewinds[0].payload and "kim" not in rewinds[0].payload


def test_rewind_applied_says_where_a_plan_stopped_by_step_and_code_never_in_words(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    """Why a plan stopped is told in words a server's answer can reach (a parse error
    quoting a line): the webhook carries the step and its stable code only."""
    config = three_records(server, data_dir)
    endpoint = {
        "id": "ops",
        "url": "http://127.0.0.1:9/hook",
        "secret_env": "UNDOGATE_TEST_WEBHOOK_SECRET",
        "allow_loopback_http": True,
    }
    gw = open_gateway(
        replace(config, webhooks=parse_config({"webhooks": {"endpoints": [endpoint]}}).webhooks)
    )
    since = time.time()
    applied(gw, "customer", status="customer")
    applied(gw, "ticket", status="closed")
    applied(gw, "supplier", status="paused")
    server.arm("apply_then_drop", TICKET)  # the ticket's undo lands, its answer is lost
    done = confirm(gw, plan(gw, since))
    assert done.stored.stopped is not None and done.stored.stopped["message"]
    messages = gw.ledger.read(lambda tx: tx.webhook_messages(OWNER.owner_id, (AGENT_ID,)))
    (rewind,) = [m for m in messages if m.event == "rewind.applied"]
    stopped = json.loads(rewind.payload)["data"]["stopped"]
    assert stopped == {"step": "2", "code": done.stored.stopped["code"]}
    assert str(done.stored.stopped["message"]) not in rewind.payload


def test_a_plan_exports_as_a_receipt_that_verifies_and_fails_after_an_edit(
    records: LocalGateway, data_dir: Path, tmp_path: Path
) -> None:
    since = time.time()
    first = applied(records, "customer", status="customer")
    second = applied(records, "ticket", status="closed")
    done = confirm(records, plan(records, since))
    receipt = tmp_path / "plan.receipt.json"
    made = cli("export-receipt", done.id, "--ledger", str(data_dir), "-o", str(receipt))
    assert made.returncode == 0, made.stderr
    bundle = json.loads(receipt.read_text())
    assert bundle["jobs"] == sorted([first, second])
    whole = [e["event"] for e in bundle["segment"] if "event" in e]
    ops = [e["operation"] for e in whole if e["job_id"] is None]
    assert ops == ["rewind_planned", "rewind_previewed", "rewind_confirmed", "rewind_finished"]
    assert {e["job_id"] for e in whole if e["operation"] == "confirm_undo"} == {first, second}
    checked = cli("verify-receipt", str(receipt))
    assert checked.returncode == 0, checked.stdout + checked.stderr

    def edited(change: Callable[[dict[str, object]], None]) -> str:
        copy = json.loads(json.dumps(bundle))
        change(copy)
        target = tmp_path / "edited.json"
        target.write_text(json.dumps(copy))
        result = cli("verify-receipt", str(target))
        assert result.returncode == 1, (result.stdout, result.stderr)
        return result.stdout

    # A job left out: its rows, whole, no longer belong; one added: the plan never named it.
    assert "belongs to job" in edited(lambda b: b.update(jobs=[first]))
    added = edited(lambda b: b.update(jobs=[first, second, "job_x"]))
    assert "not the ones its plan's row lists" in added


def split_job(gw: LocalGateway, server: ContractServer) -> tuple[str, str]:
    """Job J changes the customer and the ticket; its ticket write is refused, then job K
    changes the supplier, then J is applied again: J's changes sit apart in the plan's
    order, with K's between them. Returns (J, K)."""
    j = prepare(
        gw,
        ChangeRequest("customer", set={"status": "customer"}),
        ChangeRequest("ticket", set={"status": "closed"}),
    )
    server.arm("status:422", TICKET)  # refused: nothing written there
    assert confirmed(gw, j).job.state is JobState.PARTIALLY_APPLIED
    k = applied(gw, "supplier", owner="lee")
    assert confirmed(gw, j).job.state is JobState.APPLIED
    return j, k


def test_a_job_whose_changes_sit_apart_in_the_plan_is_undone_in_two_parts(
    records: LocalGateway, server: ContractServer
) -> None:
    before = snapshot_bytes(server)
    since = time.time()
    j, k = split_job(records, server)
    made = plan(records, since)
    assert [(s.job_id, s.resource_id) for s in made.steps] == [
        (j, "ticket"),
        (k, "supplier"),
        (j, "customer"),
    ]
    assert {s.verdict for s in made.steps} == {StepVerdict.UNDO}
    done = confirm(records, made)
    assert [o for _s, o in done.outcomes()] == ["done"] * 3
    assert done.job_outcomes() == {j: "done", k: "done"}
    assert snapshot_bytes(server) == before
    job = records.get_job(OWNER.owner_id, j)
    assert job.state is JobState.UNDONE
    assert [c.state for c in job.changes] == [ChangeState.UNDONE] * 2
    # Each part is its own dispatch: its confirm, its intent and outcome, its finish;
    # the first leaves the job partly undone, the second undone.
    events = records.ledger.read(lambda tx: tx.events(j))
    undo_events = [
        (e.operation, e.target, e.to_state)
        for e in events
        if e.operation in ("confirm_undo", "undo_done", "finish_undo")
    ]
    assert undo_events == [
        ("confirm_undo", None, "undoing"),
        ("undo_done", "ticket", "undone"),
        ("finish_undo", None, "partially_undone"),
        ("confirm_undo", None, "undoing"),
        ("undo_done", "customer", "undone"),
        ("finish_undo", None, "undone"),
    ]
    undos = [(a.change_index, a.status.value) for a in job.actions if a.operation is Operation.UNDO]
    assert undos == [(1, "done"), (0, "done")]


def test_a_plan_stopped_before_a_write_says_why_not_what_an_older_undo_did(
    records: LocalGateway, server: ContractServer
) -> None:
    """A change whose undo an earlier plan tried (refused by the server), then a plan
    whose run stops before that change's write because the reviewer's key was revoked
    after the write before it: the report names the revocation, not the old refusal."""
    since = time.time()
    job_id = prepare(
        records,
        ChangeRequest("customer", set={"status": "customer"}),
        ChangeRequest("ticket", set={"status": "closed"}),
    )
    assert confirmed(records, job_id).job.state is JobState.APPLIED
    server.set_field(TICKET, "/data/status", "reopened")  # its step blocked: skipped
    server.arm("status:422", CUSTOMER)
    first = confirm(records, plan(records, since), skip_blocked=True)
    assert first.stored.stopped is not None and first.stored.stopped["code"] == "refused"
    server.set_field(TICKET, "/data/status", "closed")  # the edit taken back
    keyring = Keyring(records.ledger, known_agents=lambda: {AGENT_ID})
    issued = keyring.create_operator(label="reviewer")
    principal = keyring.authenticate(issued.key)
    checks: list[str] = []

    def reauthorize() -> None:
        """The service's re-check before each write, with the key revoked after the
        first write landed."""
        checks.append("checked")
        if len(checks) == 2:
            keyring.revoke(issued.credential.id)
        keyring.recheck(principal)

    made = plan(records, since)
    preview = preview_plan(records, OWNER, load_plan(records, OWNER.owner_id, made.id))
    done = confirm_plan(
        records,
        OWNER,
        load_plan(records, OWNER.owner_id, made.id),
        preview.token,
        reauthorize=reauthorize,
    )
    assert [(s.resource_id, o) for s, o in done.outcomes()] == [
        ("ticket", "done"),
        ("customer", "not_run"),
    ]
    assert done.stored.stopped == {
        "step": "2",
        "code": "unauthorized",
        "message": f"step 2 (job {job_id}): not sent: the credential was revoked",
    }
    assert server.get_record(CUSTOMER)["status"] == "customer"  # never sent


def test_a_stopped_agent_and_its_reviewer_are_told_of_the_stop_and_how_to_resume(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    """Both answers name the stop and every way to resume; a held job's expired preview
    is refused as held, not with "preview again", which would not help."""
    now = [time.time()]
    gw = open_gateway(make_config(server, data_dir), clock=lambda: now[0])
    job_id = prepare(gw, status="customer")
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token is not None
    assert set_stopped(gw, OWNER, AGENT_ID, True) is not None
    ways = (
        "stopped by a person",
        f"undogate agents resume {AGENT_ID}",
        f"POST /api/v1/agents/{AGENT_ID}/resume",
        f"/agents/{AGENT_ID}/rewind",
    )
    with pytest.raises(AgentStopped) as refused:
        prepare(gw, status="vip")
    assert "nothing was prepared" in refused.value.message
    assert all(way in refused.value.message for way in ways), refused.value.message
    now[0] += gw.config.server.preview_ttl_s + 1  # the preview expired meanwhile
    with pytest.raises(AgentStopped) as held:
        gw.confirm(OWNER, job_id, preview.token)
    assert "held from confirmation" in held.value.message
    assert all(way in held.value.message for way in ways), held.value.message
    words = refusal_for(held.value)
    assert "Resume the agent" in words.next_step and not words.offer_preview_again
    set_stopped(gw, OWNER, AGENT_ID, False)
    with pytest.raises(PreviewExpired):  # resumed: now the expiry is what stands
        gw.confirm(OWNER, job_id, preview.token)
    assert server.write_count(CUSTOMER) == 0


def test_an_undo_someone_else_ran_while_the_plan_ran_is_not_reported_as_the_plans(
    records: LocalGateway, server: ContractServer
) -> None:
    """While step 1's write is held at the server, a reviewer undoes step 2's job on its
    own: the plan stops there, and its report says step 2 did not run (not that the plan
    did it), and why."""
    since = time.time()
    oldest = applied(records, "customer", status="customer")
    middle = applied(records, "ticket", status="closed")
    newest = applied(records, "supplier", owner="lee")
    made = plan(records, since)
    preview = preview_plan(records, OWNER, load_plan(records, OWNER.owner_id, made.id))
    gate = server.hold_next_write(SUPPLIER)
    with ThreadPoolExecutor(1) as pool:
        fresh = load_plan(records, OWNER.owner_id, made.id)
        running = pool.submit(confirm_plan, records, OWNER, fresh, preview.token)
        assert gate.arrived.wait(10)
        assert confirmed(records, middle, Operation.UNDO).job.state is JobState.UNDONE
        gate.release()
        done = running.result(30)
    assert [o for _s, o in done.outcomes()] == ["done", "not_run", "not_run"]
    assert done.job_outcomes() == {newest: "done", middle: "not_run", oldest: "not_run"}
    assert done.stored.stopped is not None
    assert done.stored.stopped["step"] == "2"
    assert done.stored.stopped["code"] == "transition_not_allowed"
    assert str(done.stored.stopped["message"]).startswith(f"step 2 (job {middle}): not sent:")
    # The chain's record of the end, and the webhook, say the same.
    events = records.ledger.read(lambda tx: tx.events_since(since, 0, 1000))
    (end,) = [e for e in events if e.operation == "rewind_finished"]
    assert end.detail is not None and end.detail["jobs"] == done.job_outcomes()


def test_a_plan_stopped_by_a_lost_answer_exports_a_receipt_that_verifies_before_and_after_reconcile(
    records: LocalGateway, server: ContractServer, data_dir: Path, tmp_path: Path
) -> None:
    since = time.time()
    oldest = applied(records, "customer", status="customer")
    middle = applied(records, "ticket", status="closed")
    newest = applied(records, "supplier", status="paused")
    server.arm("apply_then_drop", TICKET)  # step 2's undo lands, its answer is lost
    done = confirm(records, plan(records, since))
    assert done.job_outcomes() == {newest: "done", middle: "uncertain", oldest: "not_run"}

    def receipt(name: str) -> dict[str, object]:
        target = tmp_path / name
        made = cli("export-receipt", done.id, "--ledger", str(data_dir), "-o", str(target))
        assert made.returncode == 0, made.stderr
        checked = cli("verify-receipt", str(target))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        return dict(json.loads(target.read_text()))

    bundle = receipt("partial.json")
    assert bundle["jobs"] == sorted([oldest, middle, newest])
    rows = [e["event"] for e in bundle["segment"] if "event" in e]  # type: ignore[attr-defined]
    (end,) = [e for e in rows if e["operation"] == "rewind_finished"]
    assert json.loads(end["detail"])["jobs"] == done.job_outcomes()
    # The lost step reconciled afterwards: the plan's receipt still verifies, and says
    # what the plan did, not what the reconcile did later.
    reconciled = confirmed(records, middle, Operation.ACCEPT_OBSERVED)
    assert reconciled.job.state is JobState.UNDONE
    again = receipt("after-reconcile.json")
    assert again["segment"] == bundle["segment"]


def test_a_job_mid_apply_elsewhere_is_blocked_and_its_end_refuses_the_previewed_plan(
    records: LocalGateway, server: ContractServer
) -> None:
    """A plan made while a job's apply is half-way (its ticket write held at the server,
    its customer write landed) blocks that job's landed change; once the apply ends the
    previewed plan no longer holds, and confirming it writes nothing."""
    since = time.time()
    job_id = prepare(
        records,
        ChangeRequest("customer", set={"status": "customer"}),
        ChangeRequest("ticket", set={"status": "closed"}),
    )
    gate = server.hold_next_write(TICKET)
    with ThreadPoolExecutor(1) as pool:
        applying = pool.submit(confirmed, records, job_id)
        assert gate.arrived.wait(10)
        made = plan(records, since)
        (step,) = made.steps
        assert (step.resource_id, step.verdict) == ("customer", StepVerdict.BLOCKED)
        assert step.message == f"job {job_id} is applying: it cannot be undone now"
        preview = preview_plan(records, OWNER, load_plan(records, OWNER.owner_id, made.id))
        gate.release()
        assert applying.result(30).job.state is JobState.APPLIED
    writes = snapshot_bytes(server)
    fresh = load_plan(records, OWNER.owner_id, made.id)
    with pytest.raises(ChangedSincePreview):
        confirm_plan(records, OWNER, fresh, preview.token, skip_blocked=True)
    assert snapshot_bytes(server) == writes
