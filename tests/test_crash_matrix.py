"""The crash harness: kill -9 a real ``undogate serve`` at each point of a confirm.

For apply, undo and accept_observed, a served gateway is killed with SIGKILL at each
named point of a confirm, then started again. After each: the ledger passes
integrity_check, no receipt is lost, no write was sent twice (the contract server counts
every attempt), every interrupted action is ``uncertain`` and quarantines its fields,
and reconciliation through the API then resolves it. The process started again settles
the dead one's writes once its lease expired, on either engine (another live process
may share the ledger: a restart is never proof that the writer is gone). The matrix is
printed at the end.

The matrix runs on a SQLite ledger and on a PostgreSQL one (a fresh database per cell;
the check after each kill is amcheck's instead of SQLite's integrity_check). By default
PostgreSQL runs a sample (each operation, both ways of dying); ``UNDOGATE_THOROUGH=1``
runs every cell on both.
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
import psycopg
import pytest
import yaml

from undogate.auth import Keyring
from undogate.config import parse_config
from undogate.contract_server import ContractServer
from undogate.jobs import ActionStatus, JobState
from undogate.ledger import DB_NAME, Store, open_store
from undogate.operations.context import CRASH_ENV, CRASH_POINTS
from undogate.testing.launcher import Child, popen

from .fixtures.report import REPORT
from .postgres import PostgresCluster
from .serving import cli, free_port, wait_healthy

pytestmark = pytest.mark.slow

CUSTOMER = "/records/customer-123"
TICKET = "/records/wrapped-7"
INTERRUPTED = ("after_intent", "after_send", "after_response", "after_readback")
OPERATIONS = {"apply": "apply", "undo": "undo", "accept": "accept_observed"}
THOROUGH = os.environ.get("UNDOGATE_THOROUGH") == "1"
#: PostgreSQL's cells by default: each operation, killed by its own hook and by the
#: harness mid-write (after_send). Every cell with UNDOGATE_THOROUGH=1.
POSTGRES_SAMPLE = {
    ("apply", "after_intent"),
    ("apply", "after_send"),
    ("undo", "after_response"),
    ("accept_observed", "after_readback"),
}
#: amcheck's verdict on every index (and the heap it points at) of the ledger's tables.
AMCHECK = """
SELECT c.relname, amcheck.bt_index_check(c.oid, true)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE a.amname = 'btree' AND n.nspname = 'public'
"""
HEAP_CHECK = """
SELECT c.relname, v.msg
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace,
LATERAL amcheck.verify_heapam(c.oid) v
WHERE c.relkind = 'r' AND n.nspname = 'public'
"""


class Cell:
    """One gateway, served as a subprocess, against the shared contract server."""

    def __init__(
        self,
        server: ContractServer,
        work: Path,
        ledger_url: str | None = None,
        extra: list[dict[str, Any]] | None = None,
    ) -> None:
        """``ledger_url``: a PostgreSQL database for the ledger (else SQLite in ``work``);
        ``extra``: more resources for the config."""
        self.server = server
        work.mkdir(parents=True)
        self.data_dir = work / "ledger"
        self.ledger_url = ledger_url
        self.config = work / "undogate.yaml"
        # A killed process's writes are settled only once its lease expired, on either
        # engine: the shortest lease keeps each cell quick.
        settings: dict[str, Any] = {
            "data_dir": str(self.data_dir),
            "request_timeout_s": 5,
            "lease_s": 1.0,
        }
        if ledger_url:
            settings["ledger"] = ledger_url
        config = {
            "server": settings,
            "resources": [
                _res("customer", server.url(CUSTOMER), ["status", "owner"], ""),
                _res("ticket", server.url(TICKET), ["status", "priority"], "/data"),
                *(extra or []),
            ],
            "agents": [{"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}],
        }
        self.config.write_text(yaml.safe_dump(config))
        ledger = open_store(parse_config(config).server)
        try:
            keyring = Keyring(ledger, known_agents=lambda: {"account-assistant"})
            operator = keyring.create_operator(label="reviewer")
            self.operator_key = operator.key
            self.agent_key = keyring.create_agent_token(
                owner_id=operator.credential.id, agent_id="account-assistant", label="agent"
            ).key
            self.ledger_ready(ledger)
        finally:
            ledger.close()
        self.url = ""
        self.proc: Child | None = None

    def ledger_ready(self, ledger: Store) -> None:
        """What a cell needs in its ledger before serving (keys aside): nothing here."""

    # -- the served process --------------------------------------------------------------

    def start(self, crash: str | None = None) -> None:
        # A free port can be taken by another process before serve binds it (the
        # machine is shared): serve then refuses at once, and another port is tried.
        for attempt in range(3):
            try:
                self._start_once(crash)
                return
            except AssertionError as exc:
                if "port is in use" not in str(exc) or attempt == 2:
                    raise

    def _start_once(self, crash: str | None) -> None:
        self.stop()
        self._wait_for_the_dead()
        env = {k: v for k, v in os.environ.items() if not k.startswith("UNDOGATE_")}
        if crash:
            env[CRASH_ENV] = crash
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.proc = popen(
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

    def _wait_for_the_dead(self) -> None:
        """On PostgreSQL, wait until the database has no session left from an earlier
        process: a killed client's backend exits only once it notices, and until then
        it still holds what that process held."""
        if not self.ledger_url:
            return
        with psycopg.connect(self.ledger_url, autocommit=True) as c:
            deadline = time.monotonic() + 20
            while c.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone() != (0,):
                assert time.monotonic() < deadline, "a dead gateway's session stayed"
                time.sleep(0.01)  # poll interval of a bounded loop

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
        return self.prepare_changes(
            [{"resource": rid, "set": values} for rid, values in changes.items()]
        )

    def prepare_changes(self, changes: list[dict[str, Any]]) -> str:
        body = {"summary": "crash test", "changes": changes}
        made = self.call("POST", "/api/v1/jobs", self.agent_key, body)
        assert "job_id" in made, made
        return str(made["job_id"])

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
        assert "job" in done, done
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
        # The next step starts from what a live process made of the dead one's work: a
        # gateway started within the dead one's lease would refuse to touch the job yet.
        self._settled(job)

    def _confirm_quietly(self, verb: str, job: str) -> None:
        with suppress(httpx.TransportError, json.JSONDecodeError):
            done = self.operate(verb, job)  # the gateway dies mid-request: that is the point
            assert "error" not in done, f"refused before its crash point: {done['error']}"

    def inspect(self, job: str) -> dict[str, Any]:
        receipt = self._settled(job)
        return {
            "integrity": self.integrity(),
            "chain": _chain_verdict(self.ledger_url or str(self.data_dir)),
            "state": receipt["state"],
            "changes": [ch["state"] for ch in receipt["changes"]],
            "actions": [
                [int(a["change"]), a["operation"], a["status"]] for a in receipt["actions"]
            ],
        }

    def _settled(self, job: str) -> dict[str, Any]:
        """The job's receipt once nothing a dead process was doing is still running (no
        write in flight, the job not applying or undoing): once the dead one's lease
        expired and a live process settled its work."""
        deadline = time.monotonic() + 30
        while True:
            receipt = self.call("GET", f"/api/v1/jobs/{job}", self.operator_key)
            statuses = {a["status"] for a in receipt["actions"]}
            running = receipt["state"] in (JobState.APPLYING.value, JobState.UNDOING.value)
            if ActionStatus.DISPATCHING.value not in statuses and not running:
                return receipt
            assert time.monotonic() < deadline, "a dead process's write was never settled"
            time.sleep(0.05)  # poll interval of a bounded loop

    def integrity(self) -> str:
        """ "ok", or what the engine's own check found wrong with the ledger."""
        if not self.ledger_url:
            path = f"file:{self.data_dir / DB_NAME}?mode=ro"
            with closing(sqlite3.connect(path, uri=True)) as c:
                return str(c.execute("PRAGMA integrity_check").fetchone()[0])
        with psycopg.connect(self.ledger_url, autocommit=True) as c:
            c.execute("CREATE SCHEMA IF NOT EXISTS amcheck")
            c.execute("CREATE EXTENSION IF NOT EXISTS amcheck SCHEMA amcheck")
            indexes = c.execute(AMCHECK).fetchall()  # raises on a damaged index
            damaged = c.execute(HEAP_CHECK).fetchall()
        assert indexes, "amcheck found no index to check"
        return "ok" if not damaged else repr(damaged)

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


# Each killed process's writes are settled only once its lease expired (lease_s=1, a
# sweep every third of it): on a loaded machine the twelve SQLite cells outlast the
# default five minutes.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_crash_matrix(
    engine: str, server: ContractServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    cluster: PostgresCluster | None = (
        request.getfixturevalue("postgres_cluster") if engine == "postgres" else None
    )
    everything = cluster is None or THOROUGH
    start = {CUSTOMER: server.raw_bytes(CUSTOMER), TICKET: server.raw_bytes(TICKET)}
    rows: list[tuple[str, str, str]] = []
    ran = passed = 0
    for op in ("apply", "undo", "accept_observed"):
        for point in CRASH_POINTS:
            if op == "accept_observed" and point not in ("after_readback", "after_outcome"):
                rows.append((op, point, "n/a (accept sends no request)"))
                continue
            if not everything and (op, point) not in POSTGRES_SAMPLE:
                rows.append((op, point, "not run (sample; UNDOGATE_THOROUGH=1 runs it)"))
                continue
            server.reset()
            url = cluster.fresh_database() if cluster else None
            cell = Cell(server, tmp_path / f"{op}-{point}", url)
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
    REPORT.append(f"crash matrix on {engine} (operation × kill point → state after restart):")
    REPORT.extend(f"  {op:<16} {point:<15} {outcome}" for op, point, outcome in rows)
    REPORT.append(f"crash matrix on {engine}: {ran} cells run, {passed} passed")
    assert ran == passed == (12 if everything else len(POSTGRES_SAMPLE))
