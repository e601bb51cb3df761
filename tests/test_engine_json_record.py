"""json_record end to end against the real contract server and a real SQLite ledger."""

from __future__ import annotations

from undogate.contract_server import ContractServer
from undogate.engine import Gateway, PrepareRequest
from undogate.jobs import ChangeRequest, ChangeState, JobState, Operation
from undogate.jsonvalue import JsonNumber

from .conftest import AGENT, OWNER

PATH = "/records/customer-123"


def prepare(gw: Gateway, **set_: object) -> str:
    req = PrepareRequest(
        summary="Promote the lead",
        changes=(ChangeRequest(resource_id="customer", set=dict(set_)),),  # type: ignore[arg-type]
    )
    return gw.prepare(AGENT, "account-assistant", req).job.id


def test_happy_path_apply_then_undo_restores_the_record(
    gateway: Gateway, server: ContractServer
) -> None:
    start = server.raw_bytes(PATH)
    job_id = prepare(gateway, status="customer", owner="ada")
    preview = gateway.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token and not preview.blockers
    done = gateway.confirm(OWNER, job_id, preview.token).job
    assert done.state is JobState.APPLIED
    assert server.get_record(PATH)["status"] == "customer"
    assert server.write_count(PATH) == 1
    undo = gateway.preview(OWNER, job_id, Operation.UNDO)
    assert undo.token
    undone = gateway.confirm(OWNER, job_id, undo.token).job
    assert undone.state is JobState.UNDONE
    assert [c.state for c in undone.changes] == [ChangeState.UNDONE]
    assert server.get_record(PATH) == __import__("undogate.jsonvalue").jsonvalue.loads(start)
    assert server.write_count(PATH) == 2


def test_big_numbers_survive_byte_exact(gateway: Gateway, server: ContractServer) -> None:
    big = "987654321098765432109876543210"
    dec = "0.1000000000000000055511151231257827"
    job_id = prepare(gateway, balance=JsonNumber(big), ratio=JsonNumber(dec))
    token = gateway.preview(OWNER, job_id, Operation.APPLY).token
    assert token
    gateway.confirm(OWNER, job_id, token)
    assert big.encode() in server.raw_bytes(PATH)
    assert dec.encode() in server.raw_bytes(PATH)
