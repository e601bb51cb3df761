"""The full job lifecycle (docs/state-machine.md): quarantine, reconciliation, ordering guards,
invalidation, time limits and ledger limits, against the real contract server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from undogate.contract_server import ContractServer
from undogate.errors import (
    Forbidden,
    IdempotencyKeyReused,
    LaterJobOverlaps,
    LimitReached,
    PreviewUsed,
    Quarantined,
    ReconciliationBlocked,
    TransitionNotAllowed,
    UndogateError,
)
from undogate.jobs import (
    ActionStatus,
    ChangeRequest,
    ChangeState,
    JobState,
    Observation,
    Operation,
    PrepareRequest,
)

from .worlds import (
    AGENT,
    OWNER,
    LocalGateway,
    confirmed,
    make_config,
    prepare,
    resource,
    two_record_job,
)

PATH = "/records/customer-123"


def make_uncertain(gw: LocalGateway, server: ContractServer, fault: str = "apply_then_500") -> str:
    job_id = prepare(gw, status="customer")
    server.arm(fault, PATH)
    assert confirmed(gw, job_id, Operation.APPLY).job.state is JobState.NEEDS_REVIEW
    return job_id


def test_uncertain_action_quarantines_its_fields_until_reconciled(
    gateway: LocalGateway, server: ContractServer
) -> None:
    blocking = make_uncertain(gateway, server)
    other = prepare(gateway, status="vip")
    with pytest.raises(Quarantined) as info:
        gateway.preview(OWNER, other, Operation.APPLY)
    assert info.value.details["blocking_job"] == blocking
    unrelated = prepare(gateway, owner="grace")  # another field is not quarantined
    assert confirmed(gateway, unrelated, Operation.APPLY).job.state is JobState.APPLIED
    preview = gateway.preview(OWNER, blocking, Operation.ACCEPT_OBSERVED)
    assert preview.changes[0].observation is Observation.LOOKS_APPLIED
    assert preview.token
    writes = server.write_count(PATH)
    job = gateway.confirm(OWNER, blocking, preview.token).job
    assert server.write_count(PATH) == writes  # accepting writes nothing externally
    assert job.state is JobState.APPLIED
    assert job.actions[0].status is ActionStatus.ACCEPTED
    assert job.actions[0].observation is Observation.LOOKS_APPLIED
    # Quarantine lifted: the other job (prepared over the applied value) may now run,
    # and the reconciled job, now older than it, waits for it to be undone first.
    assert confirmed(gateway, other, Operation.APPLY).job.state is JobState.APPLIED
    with pytest.raises(LaterJobOverlaps):
        gateway.preview(OWNER, blocking, Operation.UNDO)
    assert confirmed(gateway, other, Operation.UNDO).job.state is JobState.UNDONE
    assert confirmed(gateway, blocking, Operation.UNDO).job.state is JobState.UNDONE
    assert server.get_record(PATH)["status"] == "lead"


def test_accept_observed_not_applied_allows_a_fresh_apply(
    gateway: LocalGateway, server: ContractServer
) -> None:
    job_id = make_uncertain(gateway, server, fault="ok_without_apply")
    preview = gateway.preview(OWNER, job_id, Operation.ACCEPT_OBSERVED)
    assert preview.changes[0].observation is Observation.LOOKS_NOT_APPLIED
    assert preview.token
    assert gateway.confirm(OWNER, job_id, preview.token).job.state is JobState.PREPARED
    assert confirmed(gateway, job_id, Operation.APPLY).job.state is JobState.APPLIED


def test_accept_observed_neither_blocks_reconciliation(
    gateway: LocalGateway, server: ContractServer
) -> None:
    job_id = make_uncertain(gateway, server)
    server.set_field(PATH, "/status", "something else")
    preview = gateway.preview(OWNER, job_id, Operation.ACCEPT_OBSERVED)
    assert preview.changes[0].observation is Observation.NEITHER
    assert preview.token is None
    assert preview.blockers[0]["code"] == ReconciliationBlocked.code
    assert gateway.get_job(OWNER.owner_id, job_id).state is JobState.NEEDS_REVIEW


def test_undo_refuses_to_pass_a_later_overlapping_job(
    gateway: LocalGateway, server: ContractServer
) -> None:
    first = prepare(gateway, status="customer")
    confirmed(gateway, first, Operation.APPLY)
    second = prepare(gateway, status="vip")
    confirmed(gateway, second, Operation.APPLY)
    with pytest.raises(LaterJobOverlaps) as info:
        gateway.preview(OWNER, first, Operation.UNDO)
    assert info.value.details["later_job"] == second
    assert confirmed(gateway, second, Operation.UNDO).job.state is JobState.UNDONE
    assert confirmed(gateway, first, Operation.UNDO).job.state is JobState.UNDONE
    assert server.get_record(PATH)["status"] == "lead"


def test_once_undo_started_never_apply_again(gateway: LocalGateway, server: ContractServer) -> None:
    job_id = prepare(gateway, status="customer")
    confirmed(gateway, job_id, Operation.APPLY)
    server.arm("status:409", PATH)  # the undo is refused: nothing restored
    assert confirmed(gateway, job_id, Operation.UNDO).job.state is JobState.APPLIED
    job = gateway.get_job(OWNER.owner_id, job_id)
    assert job.undo_started
    # Nothing is pending anyway, but even so an apply preview is refused outright.
    with pytest.raises(TransitionNotAllowed):
        gateway.preview(OWNER, job_id, Operation.APPLY)
    assert confirmed(gateway, job_id, Operation.UNDO).job.state is JobState.UNDONE


def test_rejected_job_can_never_be_applied(gateway: LocalGateway) -> None:
    job_id = prepare(gateway, status="customer")
    assert gateway.reject(OWNER, job_id).state is JobState.REJECTED
    with pytest.raises(TransitionNotAllowed, match="rejected"):
        gateway.preview(OWNER, job_id, Operation.APPLY)
    with pytest.raises(TransitionNotAllowed):
        gateway.reject(OWNER, job_id)


def test_token_from_before_a_rejection_cannot_apply(
    gateway: LocalGateway, server: ContractServer
) -> None:
    job_id = prepare(gateway, status="customer")
    token = gateway.preview(OWNER, job_id, Operation.APPLY).token
    assert token
    gateway.reject(OWNER, job_id)
    with pytest.raises(TransitionNotAllowed):
        gateway.confirm(OWNER, job_id, token)
    assert server.write_count(PATH) == 0


def test_identity_change_invalidates_but_token_rotation_does_not(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    env = {"CUSTOMER_TOKEN": "first-secret"}
    base = resource(server, "customer", PATH, token_env="CUSTOMER_TOKEN")
    gw = open_gateway(make_config(server, data_dir, base), environ=env)
    kept = prepare(gw, status="customer")
    applied = prepare(gw, owner="grace")
    confirmed(gw, applied, Operation.APPLY)
    gw.ledger.close()
    gw.http.close()
    # Same identity, rotated token value: nothing is invalidated.
    env["CUSTOMER_TOKEN"] = "second-secret"
    gw2 = open_gateway(make_config(server, data_dir, base), environ=env)
    assert gw2.get_job(OWNER.owner_id, kept).state is JobState.PREPARED
    gw2.ledger.close()
    gw2.http.close()
    # The field allowlist changes: every unfinished job on the resource is invalidated.
    narrowed = {**base, "fields": ["status", "owner"]}
    gw3 = open_gateway(make_config(server, data_dir, narrowed), environ=env)
    for job_id in (kept, applied):
        job = gw3.get_job(OWNER.owner_id, job_id)
        assert job.state is JobState.INVALIDATED
        assert job.invalidated_reason and "identity" in job.invalidated_reason
        with pytest.raises(TransitionNotAllowed, match="invalidated"):
            gw3.preview(OWNER, job_id, Operation.UNDO if job_id == applied else Operation.APPLY)
    # Reopening the same ledger twice in a row must not invalidate anything new.
    assert gw3.recover()["invalidated"] == 0


def test_operation_ceiling_makes_the_write_in_flight_uncertain(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    gw = open_gateway(make_config(server, data_dir, http_timeout_s=1.5, request_timeout_s=8))
    job_id = prepare(gw, status="customer")
    server.arm("hang", PATH)
    started = time.monotonic()
    assert confirmed(gw, job_id, Operation.APPLY).job.state is JobState.NEEDS_REVIEW
    assert time.monotonic() - started < 6
    action = gw.get_job(OWNER.owner_id, job_id).actions[-1]
    assert action.status is ActionStatus.UNCERTAIN
    assert action.detail and "timed out" in action.detail


def test_request_timeout_makes_the_write_uncertain(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    gw = open_gateway(make_config(server, data_dir, request_timeout_s=0.5))
    job_id = prepare(gw, status="customer")
    server.arm("hang", PATH)
    assert confirmed(gw, job_id, Operation.APPLY).job.state is JobState.NEEDS_REVIEW
    assert gw.get_job(OWNER.owner_id, job_id).changes[0].state is ChangeState.UNCERTAIN


def test_job_count_limit_refuses_new_work_and_keeps_history(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    cfg = make_config(server, data_dir)
    cfg = type(cfg)(
        server=cfg.server,
        limits=cfg.limits.model_copy(update={"max_jobs": 2}),
        resources=cfg.resources,
        agents=cfg.agents,
    )
    gw = open_gateway(cfg)
    first = prepare(gw, status="a")
    prepare(gw, status="b")
    with pytest.raises(LimitReached) as info:
        prepare(gw, status="c")
    assert info.value.details["limit"] == "max_jobs"
    assert gw.get_job(OWNER.owner_id, first).state is JobState.PREPARED
    assert (
        confirmed(gw, first, Operation.APPLY).job.state is JobState.APPLIED
    )  # existing jobs still work


def test_job_size_and_confirm_attempt_limits(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    cfg = make_config(server, data_dir)
    cfg = type(cfg)(
        server=cfg.server,
        limits=cfg.limits.model_copy(update={"max_job_bytes": 200, "max_confirm_attempts": 2}),
        resources=cfg.resources,
        agents=cfg.agents,
    )
    gw = open_gateway(cfg)
    with pytest.raises(LimitReached, match="bytes"):
        prepare(gw, status="x" * 300)
    job_id = prepare(gw, status="customer")
    for _ in range(2):
        server.arm("status:412", PATH)
        assert confirmed(gw, job_id, Operation.APPLY).job.state is JobState.PREPARED
    token = gw.preview(OWNER, job_id, Operation.APPLY).token
    assert token
    with pytest.raises(LimitReached) as info:
        gw.confirm(OWNER, job_id, token)
    assert info.value.details["limit"] == "max_confirm_attempts"
    assert server.write_count(PATH) == 0


def test_a_refusal_mid_job_stops_the_rest_and_the_receipt_says_which_ran(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    gw, job_id = two_record_job(server, data_dir, open_gateway)
    server.arm("status:403", "/records/wrapped-7")
    assert confirmed(gw, job_id, Operation.APPLY).job.state is JobState.PARTIALLY_APPLIED
    job = gw.get_job(OWNER.owner_id, job_id)
    assert [(a.change_index, a.status) for a in job.actions] == [
        (0, ActionStatus.DONE),
        (1, ActionStatus.REFUSED),
    ]
    assert (
        confirmed(gw, job_id, Operation.APPLY).job.state is JobState.APPLIED
    )  # resume: only the pending one
    assert server.write_count(PATH) == 1


def test_reviewer_rechecked_before_each_dispatch(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    gw, job_id = two_record_job(server, data_dir, open_gateway)
    calls = []

    def revoked_after_first() -> None:
        calls.append(1)
        if len(calls) > 1:
            raise Forbidden("the reviewer's key was revoked")

    token = gw.preview(OWNER, job_id, Operation.APPLY).token
    assert token
    job = gw.confirm(OWNER, job_id, token, reauthorize=revoked_after_first).job
    assert job.state is JobState.PARTIALLY_APPLIED
    assert [a.change_index for a in job.actions] == [0]
    assert server.write_count("/records/wrapped-7") == 0
    ops = [e.operation for e in gw.ledger.events(job_id)]
    assert "dispatch_stopped" in ops

    # Refused before anything was recorded: the error surfaces and the token survives.
    job2 = gw.prepare(
        AGENT,
        "account-assistant",
        PrepareRequest("x", (ChangeRequest(resource_id="customer", set={"owner": "kim"}),)),
    ).job.id
    token2 = gw.preview(OWNER, job2, Operation.APPLY).token
    assert token2

    def always_revoked() -> None:
        raise Forbidden("revoked")

    with pytest.raises(Forbidden):
        gw.confirm(OWNER, job2, token2, reauthorize=always_revoked)
    assert gw.get_job(OWNER.owner_id, job2).state is JobState.PREPARED
    assert gw.confirm(OWNER, job2, token2).job.state is JobState.APPLIED


@pytest.mark.parametrize("same_token", [True, False])
def test_concurrent_confirms_dispatch_exactly_once(
    gateway: LocalGateway, server: ContractServer, same_token: bool
) -> None:
    job_id = prepare(gateway, status="customer")
    first = gateway.preview(OWNER, job_id, Operation.APPLY).token
    second = first if same_token else gateway.preview(OWNER, job_id, Operation.APPLY).token
    assert first and second
    both_checked = threading.Barrier(2, timeout=10)
    results: list[object] = []

    def checked() -> None:
        both_checked.wait()

    def confirm(token: str) -> None:
        try:
            # Both confirms pass every check, then race for the first intent commit.
            results.append(gateway.confirm(OWNER, job_id, token, reauthorize=checked))
        except UndogateError as exc:
            results.append(exc)

    threads = [threading.Thread(target=confirm, args=(t,)) for t in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    errors = [r for r in results if isinstance(r, UndogateError)]
    assert len(results) == 2 and len(errors) == 1, results
    assert errors[0].code == "preview_used"  # spent, or a newer operation ran first
    assert server.attempt_count(PATH) == 1
    job = gateway.get_job(OWNER.owner_id, job_id)
    assert job.state is JobState.APPLIED
    assert len(job.actions) == 1


def test_a_token_from_before_another_operation_never_runs_on_a_job_that_looks_the_same(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    for path in ("/records/r1", "/records/r2", "/records/r3"):
        server.set_record(path, {"status": "old"})
    gw = open_gateway(
        make_config(
            server, data_dir, *(resource(server, f"r{i}", f"/records/r{i}") for i in (1, 2, 3))
        )
    )
    req = PrepareRequest(
        summary="three",
        changes=tuple(ChangeRequest(resource_id=f"r{i}", set={"status": "new"}) for i in (1, 2, 3)),
    )
    job_id = gw.prepare(AGENT, "account-assistant", req).job.id
    server.arm("status:409", "/records/r2")
    assert confirmed(gw, job_id, Operation.APPLY).job.state is JobState.PARTIALLY_APPLIED
    undo_token = gw.preview(OWNER, job_id, Operation.UNDO).token
    apply_token = gw.preview(OWNER, job_id, Operation.APPLY).token
    assert undo_token and apply_token

    def another_reviewer_resumes_first() -> None:
        # Runs after the undo confirm's checks, before its first write: the resume
        # applies r2, r3 is refused, and the job is partially_applied again.
        server.arm("status:409", "/records/r3")
        resumed = gw.confirm(OWNER, job_id, apply_token).job
        assert resumed.state is JobState.PARTIALLY_APPLIED

    with pytest.raises(PreviewUsed, match="another operation"):
        gw.confirm(OWNER, job_id, undo_token, reauthorize=another_reviewer_resumes_first)
    job = gw.get_job(OWNER.owner_id, job_id)
    assert job.state is JobState.PARTIALLY_APPLIED
    assert [c.state for c in job.changes] == [
        ChangeState.APPLIED,
        ChangeState.APPLIED,
        ChangeState.PENDING,
    ]
    assert server.get_record("/records/r1")["status"] == "new"  # the stale undo sent nothing
    assert (
        confirmed(gw, job_id, Operation.UNDO).job.state is JobState.UNDONE
    )  # a fresh undo covers both
    assert all(server.get_record(f"/records/r{i}")["status"] == "old" for i in (1, 2, 3))


def test_a_quarantine_outlives_a_config_change_until_it_is_reconciled(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    base = resource(server, "customer", PATH, fields=["status", "owner"])
    gw = open_gateway(make_config(server, data_dir, base))
    uncertain = make_uncertain(gw, server)
    gw.ledger.close()
    gw.http.close()
    widened = {**base, "fields": ["status", "owner", "tier"]}  # a new identity
    gw2 = open_gateway(make_config(server, data_dir, widened))
    assert gw2.get_job(OWNER.owner_id, uncertain).state is JobState.NEEDS_REVIEW
    newer = prepare(gw2, status="vip")
    with pytest.raises(Quarantined):
        gw2.preview(OWNER, newer, Operation.APPLY)
    with pytest.raises(TransitionNotAllowed, match="Restore the configuration"):
        gw2.preview(OWNER, uncertain, Operation.ACCEPT_OBSERVED)
    assert server.get_record(PATH)["status"] == "customer"
    gw2.ledger.close()
    gw2.http.close()
    # Under the configuration it was prepared with, a reviewer reconciles it...
    gw3 = open_gateway(make_config(server, data_dir, base))
    assert confirmed(gw3, uncertain, Operation.ACCEPT_OBSERVED).job.state is JobState.APPLIED
    gw3.ledger.close()
    gw3.http.close()
    # ...and the new configuration then invalidates it (and the job prepared under the
    # widened identity in between, which the switch back invalidated): new work is free.
    gw4 = open_gateway(make_config(server, data_dir, widened))
    assert gw4.get_job(OWNER.owner_id, uncertain).state is JobState.INVALIDATED
    assert gw4.get_job(OWNER.owner_id, newer).state is JobState.INVALIDATED
    fresh = prepare(gw4, status="vip")
    assert confirmed(gw4, fresh, Operation.APPLY).job.state is JobState.APPLIED


def test_an_idempotency_key_lapses_after_its_window_and_never_names_two_jobs(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    now = [1_000_000.0]
    gw = open_gateway(make_config(server, data_dir), clock=lambda: now[0])
    req = PrepareRequest(
        summary="keyed",
        changes=(ChangeRequest(resource_id="customer", set={"status": "x"}),),
        idempotency_key="k-1",
    )
    first = gw.prepare(AGENT, "account-assistant", req)
    now[0] += 29 * 86400
    again = gw.prepare(AGENT, "account-assistant", req)
    assert again.replay and again.job.id == first.job.id
    now[0] += 2 * 86400
    with pytest.raises(IdempotencyKeyReused, match="no longer honoured"):
        gw.prepare(AGENT, "account-assistant", req)


def test_removing_a_field_twice_is_one_removal(
    gateway: LocalGateway, server: ContractServer
) -> None:
    req = PrepareRequest(
        summary="drop", changes=(ChangeRequest(resource_id="customer", remove=("owner", "owner")),)
    )
    job_id = gateway.prepare(AGENT, "account-assistant", req).job.id
    assert gateway.get_job(OWNER.owner_id, job_id).changes[0].fields == ("owner",)
    assert confirmed(gateway, job_id, Operation.APPLY).job.state is JobState.APPLIED
    assert "owner" not in server.get_record(PATH)
