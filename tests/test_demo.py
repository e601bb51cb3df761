"""`undogate demo` as a person runs it: a subprocess, exit 0 only when all is restored."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from undogate.errors import LedgerInUse
from undogate.ledger import DB_NAME, Ledger


def test_demo_restores_everything_and_leaves_a_sound_ledger(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "undogate.cli", "demo", "--data-dir", str(work)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "restored byte-for-byte" in result.stdout
    assert "the created contact is gone" in result.stdout
    assert "agent sees tools ['list_resources', 'prepare_changes']" in result.stdout
    # Never a line break inside a value, at the 80 columns of a pipe (issue 17, item 5).
    assert result.stdout.count("123456789012345678901234567891") == 3  # planned, after, undo
    assert '"balance":123456789012345678901234567890,"ratio"' in result.stdout
    ledger_dir = work / "ledger"
    db = ledger_dir / DB_NAME
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE(ledger_dir.stat().st_mode) == 0o700
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        states = conn.execute("SELECT state FROM jobs").fetchall()
        assert states == [("undone",)]
        rows = conn.execute(
            "SELECT operation, access_path FROM events WHERE job_id IS NOT NULL ORDER BY id"
        ).fetchall()
        assert rows[0] == ("prepare", "mcp")  # the agent prepared through the MCP tools
        assert rows[-1][0] == "finish_undo"
        methods = conn.execute("SELECT method FROM actions ORDER BY id").fetchall()
        assert methods == [("PATCH",), ("PUT",), ("PUT",), ("DELETE",), ("PUT",), ("PATCH",)]
        accepted = conn.execute(
            "SELECT target FROM events WHERE operation = 'undo_accepted'"
        ).fetchall()
        assert accepted == [("contacts",)]  # the create's undo was verified and accepted
    owner = Ledger.open(ledger_dir)
    try:
        with pytest.raises(LedgerInUse):
            Ledger.open(ledger_dir)
    finally:
        owner.close()
