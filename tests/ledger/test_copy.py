"""``undogate ledger copy``: a SQLite ledger, whole and verified, into an empty
PostgreSQL ledger; a ledger that is not empty is refused, and so is a SQLite ledger a
server still owns."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from undogate.cli import main
from undogate.errors import InvalidRequest, LedgerInUse
from undogate.jobs import ActionStatus, ChangeState, JobState, Observation
from undogate.jsonvalue import JsonNumber
from undogate.ledger import Ledger, Store, Transaction, open_chain
from undogate.ledger.postgres import PostgresStore
from undogate.ledger.postgres_copy import copy_sqlite_to_postgres
from undogate.ledger.postgres_schema import TABLES
from undogate.proof.ledger_check import verify_ledger

from ..postgres import PostgresCluster
from .conftest import begin, change, credential, event, insert, job, preview, seals_of
from .test_store_passkeys import enrolment, passkey


def fill(store: Store) -> None:
    """One of everything a ledger holds, with values a lossy copy would change, and the
    events that vouch for them (``ledger verify`` holds every row to its event)."""
    jobs = (job("job_1", change(0), change(1, "ticket"), key="k1"), job("job_2"))
    insert(store, *jobs)
    for prepared in jobs:
        store.write(
            partial(
                event,
                job_id=prepared.id,
                operation="prepare",
                to_state="prepared",
                detail=seals_of(prepared),
            )
        )
    store.write(lambda tx: preview(tx, "hash-1"))
    store.write(lambda tx: preview(tx, "hash-2", "job_2"))

    def history(tx: Transaction) -> None:
        tx.claim_preview("hash-1", "job_1", "prepared")
        tx.count_confirm_attempt("job_1")
        tx.set_job_state("job_1", JobState.APPLIED)
        action = begin(tx)
        tx.finish_action(
            action, ActionStatus.DONE, response_status=200, observation=Observation.LOOKS_APPLIED
        )
        tx.set_change_state("job_1", 0, ChangeState.APPLIED, applied_etag='"v2"', stamp_seq=True)
        event(tx, "job_1", "finish_apply", to_state="applied")
        tx.add_event(
            job_id="job_1",
            actor="operator:op",
            access_path="api",
            operation="note",
            detail={"z": JsonNumber("1"), "a": [JsonNumber("1.10"), "é"], "n": None},
        )
        credential(tx, "op_1")
        credential(tx, "at_1", "agent", owner="op_1")
        tx.revoke_credential("at_1", at=time.time() + 0.123456789, reason="lost")
        event(tx, None, "credential_revoke", target="at_1")
        tx.replace_resource_identities({"customer": "fp-1", "ticket": "fp-t"})
        tx.record_endpoint_check(
            resource_id="customer",
            test_copy_id="copy",
            production_fingerprint="fp-1",
            test_copy_fingerprint="fp-c",
            passed=True,
            evidence='{"b": 2, "a": 1.50}',
            actor="operator:tester",
            access_path="test",
        )
        tx.insert_passkey(passkey("pk_1"))
        tx.record_passkey_use(challenge="c1", passkey_id="pk_1", job_id="job_1", sign_count=4)
        tx.insert_passkey(passkey("pk_2"))
        tx.revoke_passkey("pk_2")
        tx.insert_passkey_enrolment(enrolment("sha-spent"))
        tx.spend_passkey_enrolment("sha-spent", passkey_id="pk_1", at=time.time())
        tx.insert_passkey_enrolment(enrolment("sha-live", owner="op_2"))

    store.write(history)


def test_a_sqlite_ledger_is_copied_whole_and_verified(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    data = tmp_path / "data"
    source = Ledger.open(data)
    beside = Ledger.open(data)  # a second process on the file, with a lease of its own
    leases = {source.lease.id, beside.lease.id}  # type: ignore[union-attr]
    try:
        fill(source)
        beside.write(lambda tx: event(tx, None, "written_beside"))
        expected = (
            [source.load_job(j) for j in ("job_1", "job_2")],
            source.events("job_1"),
            source.read(lambda tx: tx.credentials()),
            source.read(lambda tx: tx.load_preview("hash-1")),
            source.read(lambda tx: tx.resource_identities()),
            source.read(lambda tx: tx.usage()),
            source.counter("op_seq"),
        )
        ledger_id = source.identity.ledger_id
    finally:
        beside.close()
        source.close()
    with open_chain(str(data)) as chain:
        head = verify_ledger(chain)
    assert head.ok and head.rows >= 2
    url = postgres_cluster.fresh_database()

    result = CliRunner().invoke(main, ["ledger", "copy", "--from", f"sqlite:{data}", "--to", url])
    assert result.exit_code == 0, result.output
    assert f"copied ledger {ledger_id}" in result.output
    for table in TABLES:
        assert table in result.output
    assert " 2 rows" in result.output  # jobs, and the other two-row tables

    copied = PostgresStore.open(url)
    try:
        assert (
            [copied.load_job(j) for j in ("job_1", "job_2")],
            copied.events("job_1"),
            copied.read(lambda tx: tx.credentials()),
            copied.read(lambda tx: tx.load_preview("hash-1")),
            copied.read(lambda tx: tx.resource_identities()),
            copied.read(lambda tx: tx.usage()),
            copied.counter("op_seq"),
        ) == expected
        assert copied.read(lambda tx: tx.latest_check_passed("customer", "fp-1"))
        copied_leases = copied.read(
            lambda tx: tx.connection.execute(  # type: ignore[attr-defined]
                "SELECT id FROM leases WHERE ended_reason = 'closed'"
            ).fetchall()
        )
        assert {row[0] for row in copied_leases} == leases  # both processes', as they ended
        # The copy goes on: new rows take ids after the copied ones.
        insert(copied, job("job_3"))
        copied.write(lambda tx: event(tx, "job_3", "prepare", to_state="prepared"))
        assert copied.events("job_3")[0].id > expected[1][-1].id
        assert copied.write(lambda tx: tx.next_seq()) == expected[6] + 1
        assert [p.id for p in copied.read(lambda tx: tx.passkeys("op_1"))] == ["pk_1", "pk_2"]
        assert copied.read(lambda tx: tx.passkey_challenge_used("c1"))
    finally:
        copied.close()
    # The chain came over whole, and the copy's next event links onto its head.
    with open_chain(url) as chain:
        links = list(chain.links())
        after = verify_ledger(chain)
    assert after.ok, after.reason
    assert after.rows == head.rows + 1 and links[head.rows - 1].hash == head.head
    # The lossless JSON is the very text SQLite held.
    with psycopg.connect(url) as raw:
        row = raw.execute("SELECT evidence FROM endpoint_checks").fetchone()
    assert row == ('{"b": 2, "a": 1.50}',)

    with pytest.raises(InvalidRequest, match="not empty"):
        copy_sqlite_to_postgres(data, url)
    again = CliRunner().invoke(main, ["ledger", "copy", "--from", f"sqlite:{data}", "--to", url])
    assert again.exit_code == 2 and "not empty" in again.output


def test_a_ledger_a_process_has_open_is_not_copied(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    serving = Ledger.open(tmp_path / "data")
    try:
        with pytest.raises(LedgerInUse):
            copy_sqlite_to_postgres(tmp_path / "data", postgres_cluster.fresh_database())
    finally:
        serving.close()


def test_the_copy_refuses_a_url_with_a_password(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["ledger", "copy", "--from", f"sqlite:{tmp_path}", "--to", "postgresql://u:pw@h/db"],
    )
    assert result.exit_code == 2 and "PGPASSWORD" in result.output
    assert "pw@" not in result.output
