"""The crash harness for a rewind plan (docs/rewind.md): a real ``undogate serve`` killed
with SIGKILL in the middle of a plan's run, then started again. After each: the ledger
passes its engine's own check and its chain verifies, the plan's report says exactly
which steps ran (read from the jobs' own actions), no write was sent twice, and a new
plan over the same window undoes the rest: every record byte for byte as before.

The cells run on a SQLite ledger and on a PostgreSQL one (a fresh database per cell), as
tests/test_crash_matrix.py's do: by default PostgreSQL runs a sample (the plan that
undoes one job in two parts, killed between them: a kill after an outcome, a partly
undone job and a plan made again); ``UNDOGATE_THOROUGH=1`` runs every cell on both.
"""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.contract_server import ContractServer

from .fixtures.report import REPORT
from .postgres import PostgresCluster
from .test_crash_matrix import CUSTOMER, THOROUGH, TICKET, Cell, _check_common, _res

pytestmark = pytest.mark.slow

WINDOW = {"agent": "account-assistant", "since": "1h"}
SUPPLIER = "/records/supplier-7"
#: PostgreSQL's cells by default; every cell with UNDOGATE_THOROUGH=1.
POSTGRES_SAMPLE = {"split"}
CELLS = ("after_intent", "after_outcome", "split")


def _engines(cell: str) -> list[Any]:
    """The engines ``cell`` runs on: SQLite always, PostgreSQL in the sample or thorough."""
    sampled = THOROUGH or cell in POSTGRES_SAMPLE
    skip = pytest.mark.skipif(not sampled, reason="sample; UNDOGATE_THOROUGH=1 runs it")
    return [pytest.param("sqlite", cell), pytest.param("postgres", cell, marks=skip)]


def _cell(server: ContractServer, work: Path, engine: str, request: pytest.FixtureRequest) -> Cell:
    """A cell with the customer, the ticket and a supplier record, on ``engine``."""
    cluster: PostgresCluster | None = (
        request.getfixturevalue("postgres_cluster") if engine == "postgres" else None
    )
    server.reset()
    server.set_record(SUPPLIER, {"name": "Acme", "status": "active", "owner": "kim"})
    supplier = _res("supplier", server.url(SUPPLIER), ["status", "owner"], "")
    return Cell(server, work, cluster.fresh_database() if cluster else None, [supplier])


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


def _killed_mid_plan(cell: Cell, point: str) -> str:
    """Two jobs on two records; the plan killed at ``point`` of its first step."""
    server = cell.server
    start = {CUSTOMER: server.raw_bytes(CUSTOMER), TICKET: server.raw_bytes(TICKET)}
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
    # No write twice: the ticket's apply, and its undo once (after_intent: the killed
    # attempt never left).
    assert server.attempt_count(TICKET) == 2 and server.attempt_count(CUSTOMER) == 2
    return f"{state['state']} → re-planned → whole"


def _killed_between_a_jobs_two_parts(cell: Cell) -> str:
    """Job J changes the customer and the ticket (its ticket write first refused, then
    applied again after job K changed the supplier): the plan undoes J's ticket, K's
    supplier, then J's customer. Killed once J's first part is recorded: J is partly
    undone, the report says so, and a new plan undoes the rest."""
    server = cell.server
    start = {p: server.raw_bytes(p) for p in (CUSTOMER, TICKET, SUPPLIER)}
    cell.start()
    j = cell.prepare({"customer": {"status": "customer"}, "ticket": {"status": "closed"}})
    server.arm("status:422", TICKET)  # refused: nothing written there
    assert cell.operate("apply", j)["state"] == "partially_applied"
    k = cell.prepare({"supplier": {"owner": "lee"}})
    assert cell.operate("apply", k)["state"] == "applied"
    assert cell.operate("apply", j)["state"] == "applied"
    cell.stop()
    report = _rewind(cell, crash="undo:after_outcome")
    steps = [(s["job"], s["resource"], s["outcome"]) for s in report["steps"]]
    assert steps == [
        (j, "ticket", "done"),
        (k, "supplier", "not_run"),
        (j, "customer", "not_run"),
    ], report
    assert report["jobs"] == {j: "partly_done", k: "not_run"}, report
    state = cell.inspect(j)
    _check_common(state)
    assert state["state"] == "partially_undone"
    assert state["changes"] == ["applied", "undone"]
    again = _rewind(cell, crash=None)
    verdicts = [(s["job"], s["verdict"], s["outcome"]) for s in again["steps"]]
    assert verdicts == [
        (j, "already_undone", "not_run"),
        (k, "undo", "done"),
        (j, "undo", "done"),
    ], again
    assert cell.inspect(j)["state"] == "undone"
    assert {p: server.raw_bytes(p) for p in start} == start
    # Each write once: the customer's apply and undo; the ticket's refused apply, its
    # apply and its undo; the supplier's apply and undo.
    assert server.attempt_count(CUSTOMER) == 2
    assert server.attempt_count(TICKET) == 3
    assert server.attempt_count(SUPPLIER) == 2
    return "partially_undone → re-planned → whole"


@pytest.mark.parametrize(("engine", "cell_name"), [p for c in CELLS for p in _engines(c)])
def test_a_plan_killed_mid_run_says_which_steps_ran_and_the_rest_is_planned_again(
    server: ContractServer,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    engine: str,
    cell_name: str,
) -> None:
    cell = _cell(server, tmp_path / cell_name, engine, request)
    try:
        if cell_name == "split":
            outcome = _killed_between_a_jobs_two_parts(cell)
        else:
            outcome = _killed_mid_plan(cell, cell_name)
    finally:
        cell.stop()
    REPORT.append(f"crash matrix on {engine}, rewind plan killed at {cell_name}: {outcome}")
