"""A ledger written by an older undogate opens with this one and keeps every value.

Migration 7 moved a change's sides from columns that flattened the two kinds
(``before_json``/``after_json`` for records, ``before_text``/``after_text`` for
documents) to kind-neutral ``before_side``/``after_side``. The ledger below is built the
way schema 6 stored it, row by row, then opened with today's code.

Migration 18 (PostgreSQL 12) let a webhook message be about an agent rather than a job:
SQLite rebuilt the outbox; a ledger of schema 17 with messages in every status, on each
engine, keeps every row and column, each message gains its job's owner, and the rows
that come after continue the sequence.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg

from undogate.jobs import ABSENT, AssertionKind, Change, ChangeState
from undogate.jsonvalue import JsonNumber
from undogate.ledger import DB_NAME, Ledger, Store, postgres_schema
from undogate.ledger import migrations as ledger_module
from undogate.ledger.postgres import PostgresStore
from undogate.views import change_receipt

from .postgres import PostgresCluster

BIG = "123456789012345678901234567890"  # 30 digits: no float holds it
DECIMAL = "0.1000000000000000055511151231257827"
# As schema 6 stored a record's sides: the lossless JSON text of the present touched
# fields ("tier" is added by the change, so the before side lacks it).
RECORD_BEFORE = '{"balance":' + BIG + ',"owner":"sam","ratio":' + DECIMAL + "}"
RECORD_AFTER = '{"balance":' + BIG[:-1] + '1,"owner":"grace","ratio":0.5,"tier":null}'
# Every character JSON must escape, and some it must not touch.
TEXT_BEFORE = 'line "one"\\\n\ttab\x00nul\x01\x7f\u2028 é 😀\r\n'
TEXT_AFTER = TEXT_BEFORE + "- a new line\n"
TEXT_MEDIA_TYPE = "text/markdown; charset=utf-8"


def _schema_6_ledger(data_dir: Path) -> None:
    data_dir.mkdir(mode=0o700)
    db = data_dir / DB_NAME
    os.close(os.open(db, os.O_CREAT | os.O_WRONLY, 0o600))
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        for script in ledger_module._MIGRATIONS[:6]:
            assert isinstance(script, str)  # the first six are SQL, none a function
            for statement in ledger_module._split_sql(script):
                conn.execute(statement)
        for job_id in ("job_record", "job_text"):
            conn.execute(
                "INSERT INTO jobs(id, owner_id, agent_id, summary, request_digest, state, "
                "payload_bytes, created_at, updated_at) VALUES (?, 'op', 'agent', 's', 'd', "
                "'applied', 10, 1.0, 2.0)",
                (job_id,),
            )
        conn.execute(
            "INSERT INTO changes(job_id, idx, resource_id, kind, fingerprint, fields, "
            "before_json, after_json, before_text, after_text, media_type, prepared_etag, "
            "assertion_kind, state, applied_etag, applied_seq) VALUES ('job_record', 0, "
            "'customer', 'json_record', 'sha256:r', '[\"balance\",\"owner\",\"ratio\",\"tier\"]', "
            "?, ?, NULL, NULL, 'application/json', '\"e1\"', 'supplied', 'applied', '\"e2\"', 3)",
            (RECORD_BEFORE, RECORD_AFTER),
        )
        conn.execute(
            "INSERT INTO changes(job_id, idx, resource_id, kind, fingerprint, fields, "
            "before_json, after_json, before_text, after_text, media_type, prepared_etag, "
            "assertion_kind, state) VALUES ('job_text', 0, 'notes', 'webdav_text', "
            "'sha256:t', '[]', NULL, NULL, ?, ?, ?, '\"t1\"', NULL, 'pending')",
            (TEXT_BEFORE, TEXT_AFTER, TEXT_MEDIA_TYPE),
        )
        conn.execute("PRAGMA user_version = 6")
        conn.execute("COMMIT")


def test_migration_7_keeps_both_kinds_changes_exactly(tmp_path: Path) -> None:
    data_dir = tmp_path / "ledger"
    _schema_6_ledger(data_dir)
    ledger = Ledger.open(data_dir)
    try:
        record = ledger.load_job("job_record")
        text = ledger.load_job("job_text")
        with ledger.raw() as c:
            columns = {row[1] for row in c.execute("PRAGMA table_info(changes)")}
            stored = c.execute(
                "SELECT before_side, after_side FROM changes WHERE job_id = 'job_record'"
            ).fetchone()
        version = ledger.pragma("user_version")
    finally:
        ledger.close()
    assert version >= 7
    assert record is not None and text is not None
    assert record.changes == (
        Change(
            index=0,
            resource_id="customer",
            kind="json_record",
            fingerprint="sha256:r",
            fields=("balance", "owner", "ratio", "tier"),
            before={"balance": JsonNumber(BIG), "owner": "sam", "ratio": JsonNumber(DECIMAL)},
            after={
                "balance": JsonNumber(BIG[:-1] + "1"),
                "owner": "grace",
                "ratio": JsonNumber("0.5"),
                "tier": None,
            },
            media_type="application/json",
            prepared_etag='"e1"',
            assertion_kind=AssertionKind.SUPPLIED,
            state=ChangeState.APPLIED,
            applied_etag='"e2"',
            applied_at=3,
        ),
    )
    assert text.changes == (
        Change(
            index=0,
            resource_id="notes",
            kind="webdav_text",
            fingerprint="sha256:t",
            fields=(),
            before={"text": TEXT_BEFORE, "media_type": TEXT_MEDIA_TYPE},
            after={"text": TEXT_AFTER, "media_type": TEXT_MEDIA_TYPE},
            media_type=TEXT_MEDIA_TYPE,
            prepared_etag='"t1"',
            assertion_kind=None,
        ),
    )
    # Lossless, not merely equal in value: the exact digits, and a record's stored text
    # exactly as schema 6 wrote it.
    before = record.changes[0].before
    assert before is not ABSENT
    assert isinstance(before["balance"], JsonNumber) and before["balance"].text == BIG
    assert isinstance(before["ratio"], JsonNumber) and before["ratio"].text == DECIMAL
    assert stored == (RECORD_BEFORE, RECORD_AFTER)
    assert not columns & {"before_json", "after_json", "before_text", "after_text"}
    # What the surfaces show of the migrated changes is what they showed before.
    assert change_receipt(text.changes[0])["before_text"] == TEXT_BEFORE
    assert change_receipt(text.changes[0])["after_text"] == TEXT_AFTER
    assert change_receipt(record.changes[0])["before"] == before


def test_a_migrated_ledger_opens_again_unchanged(tmp_path: Path) -> None:
    data_dir = tmp_path / "ledger"
    _schema_6_ledger(data_dir)
    first = Ledger.open(data_dir)
    try:
        jobs = (first.load_job("job_record"), first.load_job("job_text"))
    finally:
        first.close()
    again = Ledger.open(data_dir)
    try:
        assert (again.load_job("job_record"), again.load_job("job_text")) == jobs
    finally:
        again.close()


# -- migration 18 (PostgreSQL 12): a webhook message about an agent ----------------------

_OUTBOX_COLUMNS = (
    "seq, id, endpoint, event, job_id, agent_id, payload, status, attempts, "
    "next_attempt_at, last_response_status, last_error, created_at, updated_at"
)
# As schema 17 held them: one message per status, of two owners' jobs.
_OUTBOX_ROWS: list[tuple[Any, ...]] = [
    (1, "msg_a", "ops", "job.prepared", "job_a", "agent", '{"a":1}', "delivered", 1,
     10.5, 204, None, 10.0, 11.0),
    (2, "msg_b", "ops", "job.applied", "job_a", "agent", '{"b":"é"}', "failed", 8,
     20.25, 500, "the receiver answered HTTP 500", 20.0, 21.0),
    (3, "msg_c", "pager", "job.rejected", "job_b", "agent", '{"c":null}', "pending", 2,
     30.75, None, "not delivered: connection refused", 30.0, 31.0),
]  # fmt: skip
_OWNERS = {"job_a": "op_one", "job_b": "op_two"}
_JOB_INSERT = (
    "INSERT INTO jobs(id, owner_id, agent_id, summary, request_digest, state, "
    "payload_bytes, created_at, updated_at) VALUES (?, ?, 'agent', 's', 'd', 'applied', "
    "10, 1.0, 2.0)"
)
_OUTBOX_INSERT = f"INSERT INTO webhook_outbox({_OUTBOX_COLUMNS}) VALUES ({', '.join('?' * 14)})"  # noqa: S608


def _schema_17_ledger(data_dir: Path) -> None:
    data_dir.mkdir(mode=0o700)
    db = data_dir / DB_NAME
    os.close(os.open(db, os.O_CREAT | os.O_WRONLY, 0o600))
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        for step in ledger_module._MIGRATIONS[:17]:
            if callable(step):
                step(conn)
            else:
                for statement in ledger_module._split_sql(step):
                    conn.execute(statement)
        for job_id, owner in _OWNERS.items():
            conn.execute(_JOB_INSERT, (job_id, owner))
        conn.executemany(_OUTBOX_INSERT, _OUTBOX_ROWS)
        conn.execute("PRAGMA user_version = 17")
        conn.execute("COMMIT")


def _schema_11_postgres_ledger(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for step in postgres_schema._MIGRATIONS[:11]:
            if callable(step):
                step(conn)
            else:
                conn.execute(step.encode())
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('schema_version', '11'), "
            "('ledger_id', 'ldg_from_schema_11')"
        )
        pg = _JOB_INSERT.replace("?", "%s")
        for job_id, owner in _OWNERS.items():
            conn.execute(pg.encode(), (job_id, owner))
        # Each seq from the identity, as the engine issued them (1, 2, 3 in order).
        without_seq = _OUTBOX_COLUMNS.removeprefix("seq, ")
        insert = f"INSERT INTO webhook_outbox({without_seq}) VALUES ({', '.join(['%s'] * 13)})"  # noqa: S608
        for row in _OUTBOX_ROWS:
            conn.execute(insert.encode(), row[1:])


def _outbox_kept(store: Store, rows: list[tuple[Any, ...]]) -> None:
    """Every row exactly as it was, with its job's owner; an owner lists their own; a
    message about an agent now fits, and its seq continues after the kept ones."""
    assert [r[:14] for r in rows] == _OUTBOX_ROWS
    assert [r[14] for r in rows] == ["op_one", "op_one", "op_two"]
    mine = store.read(lambda r: r.webhook_messages("op_one", ("agent",)))
    assert [(m.id, m.job_id, m.status, m.attempts) for m in mine] == [
        ("msg_b", "job_a", "failed", 8),
        ("msg_a", "job_a", "delivered", 1),
    ]
    [pending] = store.read(lambda r: r.due_webhooks(1000.0, 10))
    assert (pending.id, pending.last_error) == ("msg_c", "not delivered: connection refused")
    store.write(
        lambda tx: tx.add_webhook(
            message_id="msg_stop",
            endpoint="ops",
            event="agent.stopped",
            owner_id="op_two",
            job_id=None,
            agent_id="agent",
            payload="{}",
        )
    )
    theirs = store.read(lambda r: r.webhook_messages("op_two", ("agent",)))
    assert [(m.id, m.job_id) for m in theirs] == [("msg_stop", None), ("msg_c", "job_b")]


def test_migration_18_keeps_every_outbox_row_and_names_its_owner(tmp_path: Path) -> None:
    data_dir = tmp_path / "ledger"
    _schema_17_ledger(data_dir)
    ledger = Ledger.open(data_dir)
    try:
        with ledger.raw() as c:
            rows = c.execute(
                f"SELECT {_OUTBOX_COLUMNS}, owner_id FROM webhook_outbox ORDER BY seq"  # noqa: S608
            ).fetchall()
            indexes = {
                r[0]
                for r in c.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'index' "
                    "AND tbl_name = 'webhook_outbox' AND sql IS NOT NULL"
                )
            }
            columns = {r[1]: r for r in c.execute("PRAGMA table_info(webhook_outbox)")}
        _outbox_kept(ledger, rows)
        with ledger.raw() as c:
            [(seq,)] = c.execute("SELECT seq FROM webhook_outbox WHERE id = 'msg_stop'")
            plan = " ".join(
                str(r[-1])
                for r in c.execute(
                    "EXPLAIN QUERY PLAN SELECT id FROM webhook_outbox "
                    "WHERE owner_id = 'op_one' AND agent_id IN ('agent') ORDER BY seq DESC"
                )
            )
        version = ledger.pragma("user_version")
    finally:
        ledger.close()
    assert version >= 18
    assert seq == 4
    assert indexes == {"webhook_outbox_due", "webhook_outbox_by_owner"}
    assert columns["job_id"][3] == 0 and columns["owner_id"][3] == 1  # notnull
    assert "webhook_outbox_by_owner" in plan  # the listing no longer reads every row
    assert "webhook_outbox_18" not in plan


def test_postgres_migration_12_keeps_every_outbox_row_and_names_its_owner(
    postgres_cluster: PostgresCluster,
) -> None:
    url = postgres_cluster.fresh_database()
    _schema_11_postgres_ledger(url)
    store = PostgresStore.open(url)
    try:
        with store.raw() as c:
            rows = c.execute(
                f"SELECT {_OUTBOX_COLUMNS}, owner_id FROM webhook_outbox ORDER BY seq".encode()  # noqa: S608
            ).fetchall()
        _outbox_kept(store, [tuple(r) for r in rows])
        with store.raw() as c:
            [(seq,)] = c.execute("SELECT seq FROM webhook_outbox WHERE id = 'msg_stop'")
            # An undogate from before this step, still running beside the one that took
            # it, adds a job's message without its owner: the ledger names it.
            c.execute(
                "INSERT INTO webhook_outbox(id, endpoint, event, job_id, agent_id, payload, "
                "status, attempts, next_attempt_at, created_at, updated_at) VALUES "
                "('msg_old', 'ops', 'job.undone', 'job_b', 'agent', '{}', 'pending', 0, "
                "1.0, 1.0, 1.0)"
            )
            [(owner,)] = c.execute("SELECT owner_id FROM webhook_outbox WHERE id = 'msg_old'")
            [(version,)] = c.execute("SELECT value FROM meta WHERE key = 'schema_version'")
    finally:
        store.close()
    assert int(version) >= 12
    assert seq > 3
    assert owner == "op_two"
