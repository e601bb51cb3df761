"""The hash chain over the events (docs/proof.md): every row carries the hash
of the one before it; ``undogate ledger verify`` recomputes it offline and names the
first row an attacker with the file touched; a receipt checks without the ledger and
fails after any edit.

The attacker here works on the file with ``sqlite3`` directly, as one would: the
append-only triggers refuse the edit, so they drop them first.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from undogate.chain import GENESIS, ChainedRow, row_hash
from undogate.contract_server import ContractServer
from undogate.jobs import Operation
from undogate.ledger import DB_NAME, Ledger
from undogate.ledger.migrations import _MIGRATIONS, _chain_events, _split_sql

from .serving import cli
from .worlds import OWNER, LocalGateway, two_record_job

ATTACKER_DROPS = (
    "DROP TRIGGER events_append_only_update",
    "DROP TRIGGER events_append_only_delete",
)


@pytest.fixture
def history(server: ContractServer, data_dir: Path, open_gateway: Any) -> tuple[Path, str]:
    """A closed ledger with a job applied and undone (and a second job prepared after
    it): (its file, the first job's id)."""
    gw: LocalGateway
    gw, job_id = two_record_job(server, data_dir, open_gateway)
    for operation in (Operation.APPLY, Operation.UNDO):
        preview = gw.preview(OWNER, job_id, operation)
        assert preview.token is not None
        gw.confirm(OWNER, job_id, preview.token)
    gw.ledger.close()
    return data_dir / DB_NAME, job_id


def verify(target: Path | str) -> tuple[int, str]:
    done = cli("ledger", "verify", str(target))
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, done.stdout


def attack(db: Path, *statements: tuple[str, tuple[Any, ...]]) -> None:
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        for drop in ATTACKER_DROPS:
            conn.execute(drop)
        for statement, parameters in statements:
            conn.execute(statement, parameters)


def event_ids(db: Path) -> list[int]:
    with closing(sqlite3.connect(db)) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM events ORDER BY id")]


def head(db: Path) -> str:
    with closing(sqlite3.connect(db)) as conn:
        return str(conn.execute("SELECT hash FROM events ORDER BY id DESC LIMIT 1").fetchone()[0])


def test_an_untouched_ledger_verifies_and_prints_its_head(history: tuple[Path, str]) -> None:
    db, _ = history
    code, out = verify(db)
    assert code == 0
    assert out.strip() == f"ledger verified: {len(event_ids(db))} events; head {head(db)}"
    assert verify(db.parent)[0] == 0  # the data dir names it too


def test_every_row_links_to_the_one_before(history: tuple[Path, str]) -> None:
    db, _ = history
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT prev_hash, hash, job_id, at, actor, access_path, operation, target, "
            "from_state, to_state, detail FROM events ORDER BY id"
        ).fetchall()
    prev = GENESIS
    for row in rows:
        assert row[0] == prev
        assert row[1] == row_hash(prev, ChainedRow(*row[2:]))
        prev = row[1]
    assert len(rows) > 6


def test_flipping_one_byte_of_one_event_is_named(history: tuple[Path, str]) -> None:
    db, _ = history
    victim = event_ids(db)[3]
    attack(db, ("UPDATE events SET actor = 'operator:mallory' WHERE id = ?", (victim,)))
    code, out = verify(db)
    assert code == 1
    assert f"event {victim}: its content does not match its hash" in out


def test_a_detail_edited_by_a_single_byte_is_named(history: tuple[Path, str]) -> None:
    db, _ = history
    with closing(sqlite3.connect(db)) as conn:
        victim, detail = conn.execute(
            "SELECT id, detail FROM events WHERE detail IS NOT NULL ORDER BY id LIMIT 1"
        ).fetchone()
    edited = detail[:-2] + chr(ord(detail[-2]) ^ 1) + detail[-1]
    attack(db, ("UPDATE events SET detail = ? WHERE id = ?", (edited, victim)))
    code, out = verify(db)
    assert code == 1 and f"event {victim}:" in out


def test_a_deleted_row_is_named_by_the_row_after_it(history: tuple[Path, str]) -> None:
    db, _ = history
    ids = event_ids(db)
    attack(db, ("DELETE FROM events WHERE id = ?", (ids[2],)))
    code, out = verify(db)
    assert code == 1
    assert f"event {ids[3]}: its prev_hash does not match" in out


def test_rows_deleted_from_the_end_are_named_by_the_last_id_issued(
    history: tuple[Path, str],
) -> None:
    """No row after them names their hash; SQLite's AUTOINCREMENT counter still says
    which ids it issued (an attacker who also rewinds it is past this check)."""
    db, _ = history
    ids = event_ids(db)
    attack(db, ("DELETE FROM events WHERE id >= ?", (ids[-2],)))
    code, out = verify(db)
    assert code == 1
    assert f"event {ids[-1]}: the ledger issued event ids up to {ids[-1]}" in out


def test_two_reordered_rows_are_named(history: tuple[Path, str]) -> None:
    db, _ = history
    a, b = event_ids(db)[1:3]
    attack(
        db,
        ("UPDATE events SET id = -1 WHERE id = ?", (a,)),
        ("UPDATE events SET id = ? WHERE id = ?", (a, b)),
        ("UPDATE events SET id = ? WHERE id = -1", (b,)),
    )
    code, out = verify(db)
    assert code == 1 and f"event {a}: its prev_hash does not match" in out


def test_a_rehashed_row_still_breaks_the_next_link(history: tuple[Path, str]) -> None:
    """An attacker who recomputes the edited row's own hash moves the break one row on."""
    db, _ = history
    ids = event_ids(db)
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute(
            "SELECT prev_hash, job_id, at, actor, access_path, operation, target, "
            "from_state, to_state, detail FROM events WHERE id = ?",
            (ids[2],),
        ).fetchone()
    forged = row_hash(row[0], ChainedRow(row[1], row[2], "operator:mallory", *row[4:]))
    attack(
        db,
        ("UPDATE events SET actor = 'operator:mallory', hash = ? WHERE id = ?", (forged, ids[2])),
    )
    code, out = verify(db)
    assert code == 1 and f"event {ids[3]}: its prev_hash does not match" in out


def test_verify_without_a_ledger_is_refused(tmp_path: Path) -> None:
    done = cli("ledger", "verify", str(tmp_path / "nothing"))
    assert done.returncode == 2 and "error [invalid_request]" in done.stderr


def test_the_migration_chains_the_rows_written_before_it(data_dir: Path) -> None:
    """A ledger from before the chain: its events get links in id order, and a write
    after the migration continues the chain."""
    data_dir.mkdir(mode=0o700)
    db = data_dir / DB_NAME
    chain_at = _MIGRATIONS.index(_chain_events)
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        for step in _MIGRATIONS[:chain_at]:
            assert isinstance(step, str)
            for statement in _split_sql(step):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {chain_at}")
        for i in range(3):
            conn.execute(
                "INSERT INTO events(job_id, at, actor, access_path, operation, detail) "
                "VALUES (?, ?, 'operator:ada', 'cli', 'prepare', ?)",
                (f"job_{i}", 1700000000.25 + i, json.dumps({"n": i})),
            )
    db.chmod(0o600)
    ledger = Ledger.open(data_dir)
    try:
        ledger.write(
            lambda tx: tx.add_event(job_id="job_3", actor="a", access_path="cli", operation="x")
        )
    finally:
        ledger.close()
    code, out = verify(db)
    assert code == 0 and "4 events" in out


def test_a_receipt_verifies_and_fails_after_any_edit(
    history: tuple[Path, str], tmp_path: Path
) -> None:
    db, job_id = history
    receipt = tmp_path / "receipt.json"
    done = cli("export-receipt", job_id, "--ledger", str(db), "-o", str(receipt))
    assert done.returncode == 0, done.stderr
    bundle = json.loads(receipt.read_text())
    checked = cli("verify-receipt", str(receipt))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"receipt of {job_id} verified" in checked.stdout
    assert bundle["segment"][-1]["hash"] in checked.stdout

    def edited(change: Any) -> str:
        copy = json.loads(json.dumps(bundle))
        change(copy)
        target = tmp_path / "edited.json"
        target.write_text(json.dumps(copy))
        result = cli("verify-receipt", str(target))
        assert result.returncode == 1, (result.stdout, result.stderr)
        return result.stdout

    own = [e for e in bundle["segment"] if "event" in e]
    assert len(own) == len(bundle["segment"]) > 4

    def set_actor(b: Any) -> None:
        b["segment"][2]["event"]["actor"] = "operator:mallory"

    def drop_row(b: Any) -> None:
        del b["segment"][2]

    def swap_rows(b: Any) -> None:
        b["segment"][1], b["segment"][2] = b["segment"][2], b["segment"][1]

    def hide_own_row(b: Any) -> None:
        entry = b["segment"][2]
        row = ChainedRow(**entry.pop("event"))
        from undogate.chain import body_digest

        entry.update(job_id=row.job_id, body_digest=body_digest(row))

    def add_field(b: Any) -> None:
        b["note"] = "trust me"

    def other_job(b: Any) -> None:
        b["job_id"] = "job_someone_else"

    assert "does not match its hash" in edited(set_actor)
    assert "prev_hash does not match" in edited(drop_row)
    assert "prev_hash does not match" in edited(swap_rows)
    assert "shown only as a digest" in edited(hide_own_row)
    assert "fields no receipt has" in edited(add_field)
    assert "belongs to job" in edited(other_job)


def test_receipt_refusals_name_what_is_wrong(history: tuple[Path, str], tmp_path: Path) -> None:
    db, _ = history
    missing = cli("export-receipt", "job_nobody", "--ledger", str(db), "-o", str(tmp_path / "x"))
    assert missing.returncode == 2 and "error [not_found]" in missing.stderr
    not_json = tmp_path / "not.json"
    not_json.write_text("{")
    refused = cli("verify-receipt", str(not_json))
    assert refused.returncode == 2 and "error [invalid_request]" in refused.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something/else"}))
    refused = cli("verify-receipt", str(other))
    assert refused.returncode == 2 and "not an undogate receipt" in refused.stderr
