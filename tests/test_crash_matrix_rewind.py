"""The crash harness for a rewind plan (docs/rewind.md): a real ``undogate serve`` killed
with SIGKILL in the middle of a plan's run, then started again. After each: the ledger
passes integrity_check and its chain verifies, the plan's report says exactly which
steps ran (read from the jobs' own actions), no write was sent twice, and a new plan
over the same window undoes the rest: every record byte for byte as before."""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.contract_server import ContractServer

from .fixtures.report import REPORT
from .test_crash_matrix import CUSTOMER, TICKET, Cell, _check_common

WINDOW = {"agent": "account-assistant", "since": "1h"}


def _rewind(cell: Cell, *, crash: str | None) -> dict[str, Any]:
    """Plan and preview on a clean gateway, then confirm on one that dies at ``crash``
    (None: it does not); returns the plan's report after a clean restart."""
    cell.start()
    plan = cell.call("POST", "/api/v1/rewinds", cell.operator_key, WINDOW)
    assert "rewind_id" in plan, plan
    base = f"/api/v1/rewinds/{plan['rewind_id']}"
    preview = cell.call("POST", base + "/preview", cell.operator_key)
    token = {"preview_token": preview["preview_token"]}
    if crash is None:
        cell.call("POST", base + "/confirm", cell.operator_key, token)
        return cell.call("GET", base, cell.operator_key)
    cell.stop()
    cell.start(crash=crash)
    with suppress(httpx.TransportError, json.JSONDecodeError):  # it dies mid-request
        cell.call("POST", base + "/confirm", cell.operator_key, token)
    cell.killed()
    cell.start()
    return cell.call("GET", base, cell.operator_key)


@pytest.mark.parametrize("point", ["after_intent", "after_outcome"])
def test_a_plan_killed_mid_run_says_which_steps_ran_and_the_rest_is_planned_again(
    server: ContractServer, tmp_path: Path, point: str
) -> None:
    server.reset()
    start = {CUSTOMER: server.raw_bytes(CUSTOMER), TICKET: server.raw_bytes(TICKET)}
    cell = Cell(server, tmp_path / point, None)
    try:
        cell.start()
        older = cell.prepare({"customer": {"status": "customer"}})
        assert cell.operate("apply", older)["state"] == "applied"
        newer = cell.prepare({"ticket": {"status": "closed"}})
        assert cell.operate("apply", newer)["state"] == "applied"
        cell.stop()
        report = _rewind(cell, crash=f"undo:{point}")
        outcomes = {s["job"]: s["outcome"] for s in report["steps"]}
        state = cell.inspect(newer)
        _check_common(state)
        if point == "after_intent":  # the first step's write may or may not have left
            assert outcomes == {newer: "uncertain", older: "not_run"}, report
            assert state["state"] == "needs_review"
            assert cell.operate("accept", newer)["state"] == "applied"
        else:  # the first step's outcome was recorded, the second never began
            assert outcomes == {newer: "done", older: "not_run"}, report
            assert state["state"] == "undone"
        assert server.attempt_count(CUSTOMER) == 1  # only its apply: never sent
        again = _rewind(cell, crash=None)
        verdicts = {s["job"]: (s["verdict"], s["outcome"]) for s in again["steps"]}
        first = ("undo", "done") if point == "after_intent" else ("already_undone", "not_run")
        assert verdicts == {newer: first, older: ("undo", "done")}, again
        assert server.raw_bytes(CUSTOMER) == start[CUSTOMER]
        assert server.raw_bytes(TICKET) == start[TICKET]
        # No write twice: the ticket's apply, and its undo once (after_intent: the
        # killed attempt never left).
        assert server.attempt_count(TICKET) == 2 and server.attempt_count(CUSTOMER) == 2
    finally:
        cell.stop()
    REPORT.append(f"crash matrix, rewind plan killed at undo:{point}: reported, re-planned, whole")
