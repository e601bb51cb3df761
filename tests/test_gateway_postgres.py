"""The operations on a PostgreSQL ledger: prepare, preview, confirm, a racing confirm,
undo and a restart's recovery, through the LocalGateway against the contract server."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.errors import UndogateError
from undogate.jobs import ActionStatus, ChangeRequest, JobState, Operation, PrepareRequest
from undogate.ledger.postgres import PostgresStore
from undogate.ledger.postgres_schema import SCHEMA_VERSION
from undogate.operations.recovery import settle_expired

from .postgres import PostgresCluster
from .serving import cli, serve_log, serving
from .worlds import AGENT, OWNER, LocalGateway, make_config, resource

PATH = "/records/customer-123"


def test_a_job_is_applied_and_undone_on_a_postgresql_ledger(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
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


def test_undogate_serve_processes_share_a_postgresql_ledger(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """``init`` makes the ledger in the database; two ``serve`` processes then share it,
    each saying which ledger it serves and the lease it holds."""
    url = postgres_cluster.fresh_database()
    config = tmp_path / "undogate.yaml"
    config.write_text(f"server:\n  ledger: {url}\n  data_dir: {tmp_path / 'data'}\n")
    init = cli("init", "--config", str(config))
    assert init.returncode == 0, init.stderr
    assert f"ledger {url} (PostgreSQL, schema {SCHEMA_VERSION}): new" in init.stderr
    assert not (tmp_path / "data" / "ledger.sqlite3").exists()

    env = dict(os.environ)
    with serving(config, env) as (first_url, first), serving(config, env) as (second_url, second):
        for served_url in (first_url, second_url):
            assert httpx.get(f"{served_url}/healthz", timeout=5).status_code == 200
        listed = cli("keys", "list", "--config", str(config))  # a third process, direct
        assert listed.returncode == 0, listed.stderr
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
            "undogate serving" in serve_log(p) for p in (first, second)
        ):
            time.sleep(0.05)  # poll interval of a bounded loop: the drain thread catches up
        logs = [serve_log(first), serve_log(second)]
    leases = [re.search(r"lease (lse_[0-9a-f]+)", log) for log in logs]
    assert all(leases) and leases[0] != leases[1], logs
    assert all(f"ledger {url} (PostgreSQL, schema {SCHEMA_VERSION}): opened" in log for log in logs)


def test_a_late_outcome_of_a_process_whose_lease_expired_is_refused(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    postgres_cluster: PostgresCluster,
) -> None:
    """A process that stalls past its lease while its write hangs: another process
    settles that write as uncertain; the stalled one's outcome, when it comes, is
    refused and recorded nowhere, and it goes on under a new lease."""
    config = make_config(server, data_dir, ledger=postgres_cluster.fresh_database(), lease_s=3600)
    stalled, live = open_gateway(config), open_gateway(config)
    assert isinstance(stalled.ledger, PostgresStore) and stalled.ledger.lease is not None
    request = PrepareRequest(
        summary="s", changes=(ChangeRequest(resource_id="customer", set={"status": "x"}),)
    )
    job_id = stalled.prepare(AGENT, "account-assistant", request).job.id
    token = stalled.preview(OWNER, job_id, Operation.APPLY).token
    assert token is not None
    gate = server.hold_next_write(PATH)
    failure: list[UndogateError] = []

    def confirm() -> None:
        try:
            stalled.confirm(OWNER, job_id, token)
        except UndogateError as exc:
            failure.append(exc)

    confirming = threading.Thread(target=confirm)
    confirming.start()
    assert gate.arrived.wait(30)
    lost = stalled.ledger.lease.id
    # Its lease runs out (as if it had stalled for lease_s) and the live process sweeps.
    assert isinstance(live.ledger, PostgresStore)
    with live.ledger.raw() as conn:
        conn.execute("UPDATE leases SET expires_at = 0 WHERE id = %s", (lost,))
    assert settle_expired(live.ledger, live.live.jobs, live.live.notifier) == {
        "uncertain": 1,
        "settled": 1,
    }
    gate.release()
    confirming.join(30)

    assert len(failure) == 1 and failure[0].code == "ledger_error"
    assert "lease on the ledger expired" in failure[0].message
    job = live.ledger.load_job(job_id)
    assert job is not None and job.state is JobState.NEEDS_REVIEW
    assert [a.status for a in job.actions] == [ActionStatus.UNCERTAIN]
    assert server.write_count(PATH) >= 1  # it did land: only a person can say so
    stalled.ledger.lease.renew()
    assert stalled.ledger.lease.id != lost  # the process goes on under a new lease
    assert stalled.ledger.lease.id in live.ledger.read(lambda tx: tx.open_leases())


def test_a_process_started_with_a_changed_identity_leaves_a_running_job_to_its_process(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    postgres_cluster: PostgresCluster,
) -> None:
    url = postgres_cluster.fresh_database()
    running = open_gateway(make_config(server, data_dir, ledger=url))
    request = PrepareRequest(
        summary="s", changes=(ChangeRequest(resource_id="customer", set={"status": "x"}),)
    )
    job_id = running.prepare(AGENT, "account-assistant", request).job.id
    token = running.preview(OWNER, job_id, Operation.APPLY).token
    assert token is not None
    gate = server.hold_next_write(PATH)
    confirming = threading.Thread(target=lambda: running.confirm(OWNER, job_id, token))
    confirming.start()
    try:
        assert gate.arrived.wait(30)
        changed = resource(server, "customer", PATH, fields=["status", "owner"])
        started = open_gateway(make_config(server, data_dir, changed, ledger=url))  # recovers
        job = started.ledger.load_job(job_id)
        assert job is not None and job.state is JobState.APPLYING
    finally:
        gate.release()
        confirming.join(30)
    done = running.ledger.load_job(job_id)
    assert done is not None and done.state is JobState.APPLIED
