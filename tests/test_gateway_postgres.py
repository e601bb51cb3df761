"""The operations on a PostgreSQL ledger: prepare, preview, confirm, a racing confirm,
undo and a restart's recovery, through the Gateway against the contract server."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.engine import Gateway
from undogate.errors import UndogateError
from undogate.jobs import ActionStatus, ChangeRequest, JobState, Operation, PrepareRequest
from undogate.ledger.postgres import PostgresStore
from undogate.ledger.postgres_schema import SCHEMA_VERSION

from .conftest import AGENT, OWNER, free_port, make_config
from .postgres import PostgresCluster

PATH = "/records/customer-123"


def test_a_job_is_applied_and_undone_on_a_postgresql_ledger(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], Gateway],
    postgres_cluster: PostgresCluster,
) -> None:
    url = postgres_cluster.fresh_database()
    config = make_config(server, data_dir, ledger=url)
    gw = open_gateway(config)
    assert isinstance(gw.ledger, PostgresStore)
    before = server.get_record(PATH)

    request = PrepareRequest(
        summary="make them a customer",
        changes=(ChangeRequest(resource_id="customer", set={"status": "customer"}),),
        idempotency_key="once",
    )
    job_id = gw.prepare(AGENT, "account-assistant", request).job.id
    assert gw.prepare(AGENT, "account-assistant", request).job.id == job_id  # a replay

    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token is not None, preview.blockers
    # Two confirms of one preview race: exactly one write reaches the endpoint.
    writes = server.write_count(PATH)
    outcomes: list[object] = []

    def confirm() -> None:
        try:
            outcomes.append(gw.confirm(OWNER, job_id, preview.token or "").job.state)
        except UndogateError as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=confirm) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert outcomes.count(JobState.APPLIED) == 1, outcomes
    assert server.write_count(PATH) == writes + 1
    assert server.get_record(PATH)["status"] == "customer"

    undo = gw.preview(OWNER, job_id, Operation.UNDO)
    assert undo.token is not None, undo.blockers
    job = gw.confirm(OWNER, job_id, undo.token).job
    assert job.state is JobState.UNDONE
    assert [a.status for a in job.actions] == [ActionStatus.DONE, ActionStatus.DONE]
    operations = [e.operation for e in gw.ledger.events(job_id)]
    assert operations[0] == "prepare" and operations.count("prepare") == 1
    assert "confirm_apply" in operations and "confirm_undo" in operations
    assert server.get_record(PATH) == before

    # A restart on the same database: the job is there, nothing is in flight.
    gw.http.close()
    gw.ledger.close()
    again = open_gateway(config)
    reopened = again.ledger.load_job(job_id)
    assert reopened is not None and reopened.state is JobState.UNDONE
    assert again.ledger.read(lambda tx: tx.in_flight_actions()) == []


def test_undogate_serve_on_a_postgresql_ledger_owns_it(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """``init`` makes the ledger in the database, ``serve`` says which ledger it serves,
    and a second ``serve`` on the same ledger is refused, naming the first."""
    url = postgres_cluster.fresh_database()
    config = tmp_path / "undogate.yaml"
    config.write_text(f"server:\n  ledger: {url}\n  data_dir: {tmp_path / 'data'}\n")
    command = [sys.executable, "-m", "undogate.cli"]
    init = subprocess.run(
        [*command, "init", "--config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert init.returncode == 0, init.stderr
    assert f"ledger {url} (PostgreSQL, schema {SCHEMA_VERSION}): new" in init.stderr
    assert not (tmp_path / "data" / "ledger.sqlite3").exists()

    port = free_port()
    first = subprocess.Popen(
        [*command, "serve", "--config", str(config), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        second = subprocess.run(
            [*command, "serve", "--config", str(config), "--port", str(free_port())],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2
        assert f"[ledger_in_use]: the PostgreSQL ledger at {url} is owned by" in second.stderr
        assert f"pid {first.pid}" in second.stderr
    finally:
        first.terminate()
        _, err = first.communicate(timeout=30)
    assert f"ledger {url} (PostgreSQL, schema {SCHEMA_VERSION}): opened" in err
    assert f"(ledger {url})" in err
