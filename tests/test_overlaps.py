"""Another job holds a resource while its write is in flight, and a confirm already running
re-checks quarantine and in-flight writes in each action's intent transaction (issue 13)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.errors import Quarantined
from undogate.jobs import (
    ActionStatus,
    ChangeRequest,
    ChangeState,
    JobState,
    Operation,
)

from .worlds import OWNER, LocalGateway, make_config, prepare, resource

R1 = "/records/customer-123"
S1 = "/records/wrapped-7"


@pytest.fixture
def two_records(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> LocalGateway:
    return open_gateway(
        make_config(
            server,
            data_dir,
            resource(server, "r1", R1),
            resource(server, "s1", S1, record_pointer="/data", fields=["status"]),
        )
    )


def previewed(gw: LocalGateway, job_id: str) -> str:
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token is not None, preview.blockers
    return preview.token


def in_background(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Run ``fn`` in a thread; its result or exception lands in the returned list."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # the test inspects it
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_a_write_in_flight_holds_its_fields_like_a_quarantine(
    two_records: LocalGateway, server: ContractServer
) -> None:
    gw = two_records
    first = prepare(gw, ChangeRequest(resource_id="r1", set={"status": "customer"}))
    second = prepare(gw, ChangeRequest(resource_id="r1", set={"status": "vip"}))
    unrelated = prepare(gw, ChangeRequest(resource_id="r1", set={"owner": "grace"}))
    both = prepare(
        gw,
        ChangeRequest(resource_id="s1", set={"status": "closed"}),
        ChangeRequest(resource_id="r1", set={"status": "vip"}),
    )
    token = previewed(gw, first)
    gate = server.hold_next_write(R1)
    thread, out = in_background(lambda: gw.confirm(OWNER, first, token))
    try:
        assert gate.arrived.wait(10), "the first job's write never reached the server"
        with pytest.raises(Quarantined) as info:
            gw.preview(OWNER, second, Operation.APPLY)
        assert info.value.details["blocking_job"] == first
        assert "right now" in info.value.message
        assert [b["change"] for b in info.value.details["blockers"]] == [0]
        # Another field of the same record is not held.
        assert gw.preview(OWNER, unrelated, Operation.APPLY).token is not None
        # Of a job on both records (their holders read at once), only the change of the
        # record being written is held.
        with pytest.raises(Quarantined) as info:
            gw.preview(OWNER, both, Operation.APPLY)
        assert [b["change"] for b in info.value.details["blockers"]] == [1]
    finally:
        gate.release()
        thread.join(20)
    assert gw.get_job(OWNER.owner_id, first).state is JobState.APPLIED, out
    # Once the outcome is recorded, the later job is only prepared over a moved value.
    assert gw.preview(OWNER, second, Operation.APPLY).blockers[0]["code"] == "conflict"


def test_a_running_confirm_stops_at_a_quarantine_that_began_after_it_planned(
    two_records: LocalGateway, server: ContractServer
) -> None:
    """Job Y = [a slow write to s1, then r1.status] is confirming when job X on r1.status
    goes uncertain (without applying, so Y's If-Match would still match): Y must not
    write r1.status."""
    gw = two_records
    y = prepare(
        gw,
        ChangeRequest(resource_id="s1", set={"status": "closed"}),
        ChangeRequest(resource_id="r1", set={"status": "customer"}),
    )
    x = prepare(gw, ChangeRequest(resource_id="r1", set={"status": "vip"}))
    y_token = previewed(gw, y)
    x_token = previewed(gw, x)
    r1_attempts = server.attempt_count(R1)
    gate = server.hold_next_write(S1)
    thread, out = in_background(lambda: gw.confirm(OWNER, y, y_token))
    try:
        assert gate.arrived.wait(10), "Y's first write never reached the server"
        server.arm("ok_without_apply", R1)
        assert gw.confirm(OWNER, x, x_token).job.state is JobState.NEEDS_REVIEW
    finally:
        gate.release()
        thread.join(20)
    assert not thread.is_alive()
    assert server.attempt_count(R1) == r1_attempts + 1  # X's write only, never Y's
    data = server.get_record(S1)["data"]
    assert isinstance(data, dict) and data["status"] == "closed"
    job = gw.get_job(OWNER.owner_id, y)
    assert job.state is JobState.PARTIALLY_APPLIED, out
    assert [c.state for c in job.changes] == [ChangeState.APPLIED, ChangeState.PENDING]
    assert [a.status for a in job.actions] == [ActionStatus.DONE]
    stopped = [e for e in gw.ledger.events(y) if e.operation == "dispatch_stopped"]
    assert stopped and stopped[0].detail is not None
    assert stopped[0].detail["code"] == "quarantined"
    assert stopped[0].target == "r1"


def test_a_confirm_refused_by_a_write_in_flight_records_nothing(
    two_records: LocalGateway, server: ContractServer
) -> None:
    gw = two_records
    y = prepare(gw, ChangeRequest(resource_id="r1", set={"status": "customer"}))
    x = prepare(gw, ChangeRequest(resource_id="r1", set={"status": "vip"}))
    y_token = previewed(gw, y)
    x_token = previewed(gw, x)
    gate = server.hold_next_write(R1)
    thread, out = in_background(lambda: gw.confirm(OWNER, x, x_token))
    try:
        assert gate.arrived.wait(10)
        with pytest.raises(Quarantined):
            gw.confirm(OWNER, y, y_token)
    finally:
        gate.release()
        thread.join(20)
    job = gw.get_job(OWNER.owner_id, y)
    assert job.state is JobState.PREPARED and not job.actions, out
