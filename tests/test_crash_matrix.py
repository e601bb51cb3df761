"""The crash harness: kill -9 a real gateway process at each point of a confirm.

For apply, undo and accept_observed, a gateway process (tests/crash_worker.py, the
engine in its own process with its own ledger ownership) is killed with SIGKILL at
each named point, then restarted. After each: the ledger passes integrity_check, no
receipt is lost, no write was sent twice (the contract server counts every attempt),
every interrupted action is ``uncertain`` and quarantines its fields, and
reconciliation then resolves it. The matrix is printed at the end of the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from undogate.contract_server import ContractServer
from undogate.engine import CRASH_ENV, CRASH_POINTS

from .conftest import REPORT

CUSTOMER = "/records/customer-123"
TICKET = "/records/wrapped-7"
ROOT = Path(__file__).resolve().parent.parent
INTERRUPTED = ("after_intent", "after_send", "after_response", "after_readback")


class Cell:
    def __init__(self, server: ContractServer, work: Path) -> None:
        self.server = server
        work.mkdir(parents=True)
        self.config = work / "undogate.yaml"
        self.config.write_text(
            yaml.safe_dump(
                {
                    "server": {"data_dir": str(work / "ledger"), "request_timeout_s": 5},
                    "resources": [
                        _res("customer", server.url(CUSTOMER), ["status", "owner"], ""),
                        _res("ticket", server.url(TICKET), ["status", "priority"], "/data"),
                    ],
                    "agents": [
                        {"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}
                    ],
                }
            )
        )

    def run(self, *args: str, crash: str | None = None) -> dict[str, Any]:
        env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
        if crash:
            env[CRASH_ENV] = crash
        proc = subprocess.run(
            [sys.executable, "-m", "tests.crash_worker", str(self.config), *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=60,
            check=False,
        )
        if crash:
            assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-2000:])
            return {}
        assert proc.returncode == 0, proc.stderr[-2000:]
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result

    def kill_while_sent(self, path: str, writes_before: int, *args: str) -> None:
        """Kill the gateway after its request reached the server (which applied it and
        is holding the response), i.e. after the request was sent."""
        self.server.arm("apply_then_hang", path)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.crash_worker", str(self.config), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        )
        try:
            deadline = time.monotonic() + 20
            while self.server.write_count(path) == writes_before:
                assert time.monotonic() < deadline, "the write never reached the server"
                time.sleep(0.01)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        self.server.clear_faults()


def _res(rid: str, url: str, fields: list[str], pointer: str) -> dict[str, Any]:
    return {
        "id": rid,
        "agent_id": "account-assistant",
        "name": rid,
        "kind": "json_record",
        "url": url,
        "fields": fields,
        "record_pointer": pointer,
        "conditional_writes": True,
        "allow_loopback_http": True,
    }


def _crash(cell: Cell, op: str, point: str, path: str, job: str) -> None:
    verb = {"apply": "apply", "undo": "undo", "accept_observed": "accept"}[op]
    if point == "after_send":
        cell.kill_while_sent(path, cell.server.write_count(path), verb, job)
    else:
        cell.run(verb, job, crash=f"{op}:{point}")


def _check_common(state: dict[str, Any]) -> None:
    assert state["integrity"] == "ok"
    assert state["changes"] and state["actions"] is not None


def _apply_cell(server: ContractServer, work: Path, point: str) -> str:
    cell = Cell(server, work)
    job = cell.run(
        "prepare", json.dumps({"customer": {"status": "customer"}, "ticket": {"status": "closed"}})
    )["job"]
    _crash(cell, "apply", point, CUSTOMER, job)
    state = cell.run("inspect", job)
    _check_common(state)
    sent = 0 if point == "after_intent" else 1
    assert server.attempt_count(CUSTOMER) == sent and server.attempt_count(TICKET) == 0
    if point in INTERRUPTED:
        assert state["actions"] == [[0, "apply", "uncertain"]]
        assert state["state"] == "needs_review"
        other = cell.run("prepare", json.dumps({"customer": {"status": "vip"}}))["job"]
        assert cell.run("preview-apply", other)["error"] == "quarantined"
        settled = cell.run("accept", job)
        expected = "looks_not_applied" if point == "after_intent" else "looks_applied"
        assert settled["observations"] == [expected], settled
        assert cell.run("preview-apply", other)["token"] is True  # quarantine lifted
    else:
        assert state["actions"] == [[0, "apply", "done"]]
        assert state["state"] == "partially_applied"
    final = cell.run("apply", job)
    assert final["state"] == "applied", final
    assert server.attempt_count(CUSTOMER) == 1  # never sent twice
    assert server.attempt_count(TICKET) == 1
    step = "reconciled → " if point in INTERRUPTED else "resumed → "
    return f"{state['state']} → {step}applied"


def _undo_cell(server: ContractServer, work: Path, point: str, start: dict[str, bytes]) -> str:
    cell = Cell(server, work)
    job = cell.run(
        "prepare", json.dumps({"customer": {"status": "customer"}, "ticket": {"status": "closed"}})
    )["job"]
    assert cell.run("apply", job)["state"] == "applied"
    _crash(cell, "undo", point, TICKET, job)  # undo runs in reverse: the ticket first
    state = cell.run("inspect", job)
    _check_common(state)
    assert server.attempt_count(TICKET) == (1 if point == "after_intent" else 2)
    assert server.attempt_count(CUSTOMER) == 1
    if point in INTERRUPTED:
        assert state["actions"][-1] == [1, "undo", "uncertain"]
        assert state["state"] == "needs_review"
        other = cell.run("prepare", json.dumps({"ticket": {"status": "vip"}}))["job"]
        assert cell.run("preview-apply", other)["error"] == "quarantined"
        settled = cell.run("accept", job)
        expected = "looks_applied" if point == "after_intent" else "looks_undone"
        assert settled["observations"] == [expected], settled
    else:
        assert state["actions"][-1] == [1, "undo", "done"]
        assert state["state"] == "partially_undone"
    final = cell.run("undo", job)
    assert final["state"] == "undone", final
    assert server.raw_bytes(CUSTOMER) == start[CUSTOMER]
    assert server.raw_bytes(TICKET) == start[TICKET]
    assert server.attempt_count(TICKET) == 2 and server.attempt_count(CUSTOMER) == 2
    step = "reconciled → " if point in INTERRUPTED else "undo again → "
    return f"{state['state']} → {step}undone"


def _accept_cell(server: ContractServer, work: Path, point: str) -> str:
    cell = Cell(server, work)
    job = cell.run("prepare", json.dumps({"customer": {"status": "customer"}}))["job"]
    cell.run("apply", job, crash="apply:after_response")
    _crash(cell, "accept_observed", point, CUSTOMER, job)
    state = cell.run("inspect", job)
    _check_common(state)
    if point == "after_readback":  # killed before the acceptance committed
        assert state["state"] == "needs_review"
        assert state["actions"] == [[0, "apply", "uncertain"]]
        assert cell.run("accept", job)["state"] == "applied"
    else:
        assert state["state"] == "applied"
        assert state["actions"] == [[0, "apply", "accepted"]]
    assert server.attempt_count(CUSTOMER) == 1
    return f"{state['state']} → applied"


def test_crash_matrix(server: ContractServer, tmp_path: Path) -> None:
    start = {CUSTOMER: server.raw_bytes(CUSTOMER), TICKET: server.raw_bytes(TICKET)}
    rows: list[tuple[str, str, str]] = []
    ran = passed = 0
    for op in ("apply", "undo", "accept_observed"):
        for point in CRASH_POINTS:
            if op == "accept_observed" and point not in ("after_readback", "after_outcome"):
                rows.append((op, point, "n/a (accept sends no request)"))
                continue
            server.reset()
            work = tmp_path / f"{op}-{point}"
            ran += 1
            if op == "apply":
                outcome = _apply_cell(server, work, point)
            elif op == "undo":
                outcome = _undo_cell(server, work, point, start)
            else:
                outcome = _accept_cell(server, work, point)
            passed += 1
            rows.append((op, point, outcome))
    REPORT.append("crash matrix (operation × kill point → state after restart):")
    REPORT.extend(f"  {op:<16} {point:<15} {outcome}" for op, point, outcome in rows)
    REPORT.append(f"crash matrix: {ran} cells run, {passed} passed")
    assert ran == passed == 12
