"""A ledger written by an older undogate opens with this one and keeps every value.

Migration 7 moved a change's sides from columns that flattened the two kinds
(``before_json``/``after_json`` for records, ``before_text``/``after_text`` for
documents) to kind-neutral ``before_side``/``after_side``. The ledger below is built the
way schema 6 stored it, row by row, then opened with today's code.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

from undogate.jobs import ABSENT, AssertionKind, Change, ChangeState
from undogate.jsonvalue import JsonNumber
from undogate.ledger import DB_NAME, Ledger
from undogate.ledger import migrations as ledger_module
from undogate.views import change_receipt

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
