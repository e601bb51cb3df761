"""The crash harness: kill -9 a real ``undogate serve`` at each point of a confirm.

For apply, undo and accept_observed, a served gateway is killed with SIGKILL at each
named point of a confirm, then started again. After each: the ledger passes
integrity_check, no receipt is lost, no write was sent twice (the contract server counts
every attempt), every interrupted action is ``uncertain`` and quarantines its fields,
and reconciliation through the API then resolves it. The matrix is printed at the end.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

import httpx
import yaml

from undogate.auth import Keyring
from undogate.contract_server import ContractServer
from undogate.engine import CRASH_ENV, CRASH_POINTS
from undogate.ledger import DB_NAME, Ledger

from .conftest import REPORT, cli, free_port, wait_healthy

CUSTOMER = "/records/customer-123"
TICKET = "/records/wrapped-7"
INTERRUPTED = ("after_intent", "after_send", "after_response", "after_readback")
OPERATIONS = {"apply": "apply", "undo": "undo", "accept": "accept_observed"}


class Cell:
    """One gateway, served as a subprocess, against the shared contract server."""

    def __init__(self, server: ContractServer, work: Path) -> None:
        self.server = server
        work.mkdir(parents=True)
        self.data_dir = work / "ledger"
        self.config = work / "undogate.yaml"
        self.config.write_text(
            yaml.safe_dump(
                {
                    "server": {"data_dir": str(self.data_dir), "request_timeout_s": 5},
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
        ledger = Ledger.open(self.data_dir)
        try:
            keyring = Keyring(ledger, known_agents=lambda: {"account-assistant"})
            operator = keyring.create_operator(label="reviewer")
            self.operator_key = operator.key
            self.agent_key = keyring.create_agent_token(
                owner_id=operator.credential.id, agent_id="account-assistant", label="agent"
            ).key
        finally:
            ledger.close()
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None

    # -- the served process --------------------------------------------------------------

    def start(self, crash: str | None = None) -> None:
        self.stop()
        env = {k: v for k, v in os.environ.items() if not k.startswith("UNDOGATE_")}
        if crash:
            env[CRASH_ENV] = crash
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "undogate.cli",
                "serve",
                "--config",
                str(self.config),
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        wait_healthy(self.url, self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        self.proc = None

    def killed(self) -> None:
        """Assert the served gateway died of SIGKILL (the crash hook or the harness)."""
        assert self.proc is not None
        code = self.proc.wait(timeout=30)
        assert code == -signal.SIGKILL, code
        self.stop()

    # -- the API ----------------------------------------------------------------------------

    def call(self, method: str, path: str, key: str, body: Any = None) -> dict[str, Any]:
        r = httpx.request(
            method,
            self.url + path,
            json=body,
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        data: dict[str, Any] = r.json()
        return data

    def prepare(self, changes: dict[str, dict[str, str]]) -> str:
        body = {
            "summary": "crash test",
            "changes": [{"resource": rid, "set": values} for rid, values in changes.items()],
        }
        return str(self.call("POST", "/api/v1/jobs", self.agent_key, body)["job_id"])

    def preview(self, job: str, verb: str) -> dict[str, Any]:
        body = {"operation": OPERATIONS[verb]}
        return self.call("POST", f"/api/v1/jobs/{job}/previews", self.operator_key, body)

    def operate(self, verb: str, job: str) -> dict[str, Any]:
        """Preview and confirm; the result names the observations and the new state."""
        preview = self.preview(job, verb)
        observations = [c.get("observation") for c in preview.get("changes", [])]
        token = preview.get("preview_token")
        if not token:
            return {"observations": observations, "error": preview}
        done = self.call(
            "POST", f"/api/v1/jobs/{job}/confirm", self.operator_key, {"preview_token": token}
        )
        return {"observations": observations, "state": done["job"]["state"]}

    def crash(self, verb: str, job: str, point: str, path: str) -> None:
        """Run ``verb`` on a gateway that dies at ``point``; then start a clean one."""
        if point == "after_send":
            self.start()
            writes_before = self.server.write_count(path)
            self.server.arm("apply_then_hang", path)
            worker = threading.Thread(target=self._confirm_quietly, args=(verb, job))
            worker.start()
            deadline = time.monotonic() + 20
            while self.server.write_count(path) == writes_before:
                assert time.monotonic() < deadline, "the write never reached the server"
                time.sleep(0.01)  # poll interval of a bounded loop
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            worker.join(timeout=30)
            self.server.clear_faults()
        else:
            self.start(crash=f"{OPERATIONS[verb]}:{point}")
            self._confirm_quietly(verb, job)
        self.killed()
        self.start()

    def _confirm_quietly(self, verb: str, job: str) -> None:
        with suppress(httpx.TransportError, json.JSONDecodeError):
            self.operate(verb, job)  # the gateway dies mid-request: that is the point

    def inspect(self, job: str) -> dict[str, Any]:
        receipt = self.call("GET", f"/api/v1/jobs/{job}", self.operator_key)
        with closing(sqlite3.connect(f"file:{self.data_dir / DB_NAME}?mode=ro", uri=True)) as c:
            integrity = c.execute("PRAGMA integrity_check").fetchone()[0]
        return {
            "integrity": integrity,
            "chain": _chain_verdict(str(self.data_dir)),
            "state": receipt["state"],
            "changes": [ch["state"] for ch in receipt["changes"]],
            "actions": [
                [int(a["change"]), a["operation"], a["status"]] for a in receipt["actions"]
            ],
        }

    def quarantined(self, job: str) -> bool:
        preview = self.preview(job, "apply")
        return bool(preview.get("error", {}).get("code") == "quarantined")


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


def _chain_verdict(ledger: str) -> str:
    """``undogate ledger verify`` on the ledger as the crash left it (and recovery after)."""
    done = cli("ledger", "verify", ledger)
    return "verified" if done.returncode == 0 else done.stdout + done.stderr


def _check_common(state: dict[str, Any]) -> None:
    assert state["integrity"] == "ok"
    assert state["chain"] == "verified"  # a crash never leaves a broken link
    assert state["changes"], "the receipt lost its changes"


def _apply_cell(cell: Cell, point: str) -> str:
    server = cell.server
    cell.start()
    job = cell.prepare({"customer": {"status": "customer"}, "ticket": {"status": "closed"}})
    cell.crash("apply", job, point, CUSTOMER)
    state = cell.inspect(job)
    _check_common(state)
    sent = 0 if point == "after_intent" else 1
    assert server.attempt_count(CUSTOMER) == sent and server.attempt_count(TICKET) == 0
    if point in INTERRUPTED:
        assert state["actions"] == [[0, "apply", "uncertain"]]
        assert state["state"] == "needs_review"
        other = cell.prepare({"customer": {"status": "vip"}})
        assert cell.quarantined(other)
        settled = cell.operate("accept", job)
        expected = "looks_not_applied" if point == "after_intent" else "looks_applied"
        assert settled["observations"] == [expected], settled
        assert not cell.quarantined(other)  # the quarantine is lifted
    else:
        assert state["actions"] == [[0, "apply", "done"]]
        assert state["state"] == "partially_applied"
    final = cell.operate("apply", job)
    assert final["state"] == "applied", final
    assert server.attempt_count(CUSTOMER) == 1  # never sent twice
    assert server.attempt_count(TICKET) == 1
    step = "reconciled → " if point in INTERRUPTED else "resumed → "
    return f"{state['state']} → {step}applied"


def _undo_cell(cell: Cell, point: str, start: dict[str, bytes]) -> str:
    server = cell.server
    cell.start()
    job = cell.prepare({"customer": {"status": "customer"}, "ticket": {"status": "closed"}})
    assert cell.operate("apply", job)["state"] == "applied"
    cell.crash("undo", job, point, TICKET)  # undo runs in reverse: the ticket first
    state = cell.inspect(job)
    _check_common(state)
    assert server.attempt_count(TICKET) == (1 if point == "after_intent" else 2)
    assert server.attempt_count(CUSTOMER) == 1
    if point in INTERRUPTED:
        assert state["actions"][-1] == [1, "undo", "uncertain"]
        assert state["state"] == "needs_review"
        other = cell.prepare({"ticket": {"status": "vip"}})
        assert cell.quarantined(other)
        settled = cell.operate("accept", job)
        expected = "looks_applied" if point == "after_intent" else "looks_undone"
        assert settled["observations"] == [expected], settled
    else:
        assert state["actions"][-1] == [1, "undo", "done"]
        assert state["state"] == "partially_undone"
    final = cell.operate("undo", job)
    assert final["state"] == "undone", final
    assert server.raw_bytes(CUSTOMER) == start[CUSTOMER]
    assert server.raw_bytes(TICKET) == start[TICKET]
    assert server.attempt_count(TICKET) == 2 and server.attempt_count(CUSTOMER) == 2
    step = "reconciled → " if point in INTERRUPTED else "undo again → "
    return f"{state['state']} → {step}undone"


def _accept_cell(cell: Cell, point: str) -> str:
    cell.start()
    job = cell.prepare({"customer": {"status": "customer"}})
    cell.crash("apply", job, "after_response", CUSTOMER)
    cell.crash("accept", job, point, CUSTOMER)
    state = cell.inspect(job)
    _check_common(state)
    if point == "after_readback":  # killed before the acceptance committed
        assert state["state"] == "needs_review"
        assert state["actions"] == [[0, "apply", "uncertain"]]
        assert cell.operate("accept", job)["state"] == "applied"
    else:
        assert state["state"] == "applied"
        assert state["actions"] == [[0, "apply", "accepted"]]
    assert cell.server.attempt_count(CUSTOMER) == 1
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
            cell = Cell(server, tmp_path / f"{op}-{point}")
            ran += 1
            try:
                if op == "apply":
                    outcome = _apply_cell(cell, point)
                elif op == "undo":
                    outcome = _undo_cell(cell, point, start)
                else:
                    outcome = _accept_cell(cell, point)
            finally:
                cell.stop()
            passed += 1
            rows.append((op, point, outcome))
    REPORT.append("crash matrix (operation × kill point → state after restart):")
    REPORT.extend(f"  {op:<16} {point:<15} {outcome}" for op, point, outcome in rows)
    REPORT.append(f"crash matrix: {ran} cells run, {passed} passed")
    assert ran == passed == 12
