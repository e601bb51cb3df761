"""The ledger file itself: permissions, pragmas, append-only events (its sharing among
processes: test_ledger_sharing.py)."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from undogate.errors import LedgerError
from undogate.ledger import DB_NAME, Ledger, Transaction


def test_fresh_ledger_is_private_wal_full_sync_with_foreign_keys(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ledger = Ledger.open(data)
    try:
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        assert stat.S_IMODE((data / DB_NAME).stat().st_mode) == 0o600
        assert ledger.pragma("journal_mode") == "wal"
        assert ledger.pragma("synchronous") == 2  # FULL
        assert ledger.pragma("foreign_keys") == 1
        assert ledger.pragma("user_version") >= 1
    finally:
        ledger.close()


def test_open_refuses_a_world_readable_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)  # noqa: S103 - the point of the test
    with pytest.raises(LedgerError, match="must be private"):
        Ledger.open(data)


def test_events_are_append_only_in_the_database(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "data")
    try:
        ledger.write(
            lambda tx: tx.add_event(job_id=None, actor="test", access_path="test", operation="note")
        )
        with ledger.raw() as c:
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                c.execute("UPDATE events SET actor = 'someone else'")
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                c.execute("DELETE FROM events")
            assert c.execute("SELECT actor FROM events").fetchall() == [("test",)]
    finally:
        ledger.close()


def test_a_failed_write_rolls_back_whole(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "data")

    def half(tx: Transaction) -> None:
        tx.add_event(job_id=None, actor="a", access_path="t", operation="one")
        raise RuntimeError("boom")

    try:
        with pytest.raises(RuntimeError):
            ledger.write(half)
        with ledger.raw() as c:
            assert c.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 0
    finally:
        ledger.close()


def test_start_up_recovery_reads_through_indexes_never_every_job(tmp_path: Path) -> None:
    from undogate.ledger.sql_admin import IN_FLIGHT_ACTIONS, RUNNING_JOBS

    ledger = Ledger.open(tmp_path / "data")
    try:
        with ledger.raw() as c:
            for query in (IN_FLIGHT_ACTIONS, RUNNING_JOBS):
                plan = " ".join(row[-1] for row in c.execute("EXPLAIN QUERY PLAN " + query))
                assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, plan
                assert not plan.startswith("SCAN"), plan
    finally:
        ledger.close()


def test_a_key_is_held_to_its_events_through_an_index_never_every_event(tmp_path: Path) -> None:
    """Every authentication reads what the chain holds of the credential (seals.py): its
    issuing and revoking events, found by target through events_outside_jobs."""
    from undogate.ledger.sql_admin import CREDENTIAL_COLUMNS

    ledger = Ledger.open(tmp_path / "data")
    try:
        with ledger.raw() as c:
            query = f"SELECT {CREDENTIAL_COLUMNS} FROM credentials c WHERE c.id = 'op_1'"  # noqa: S608
            plan = [row[-1] for row in c.execute("EXPLAIN QUERY PLAN " + query)]
            searches = [step for step in plan if step.startswith("SEARCH e ")]
            assert len(searches) == 3, plan
            assert all("USING INDEX events_outside_jobs" in step for step in searches), plan
            assert not any(step.startswith("SCAN") for step in plan), plan
    finally:
        ledger.close()


def test_a_refused_open_keeps_no_handle_on_the_ledger(tmp_path: Path) -> None:
    """A ledger from a newer undogate is refused, and the refusal holds nothing open:
    no connection to the file and no lock, so the next open is refused the same way."""
    Ledger.open(tmp_path).close()
    with sqlite3.connect(tmp_path / DB_NAME) as raw:
        raw.execute("PRAGMA user_version = 999")
    raw.close()

    def handles() -> int:
        fds = Path("/proc/self/fd")
        return sum(1 for fd in fds.iterdir() if fd.resolve().name.startswith(DB_NAME))

    before = handles()
    for _ in range(2):
        with pytest.raises(LedgerError, match="newer than this undogate"):
            Ledger.open(tmp_path)
    assert handles() == before
