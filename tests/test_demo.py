"""`undogate demo` as a person runs it: a subprocess, exit 0 only when all is restored."""

from __future__ import annotations

import re
import sqlite3
import stat
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from undogate.errors import LedgerInUse
from undogate.ledger import DB_NAME, Ledger
from undogate.testing.launcher import run

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def test_demo_restores_everything_and_leaves_a_sound_ledger(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    result = run(
        [sys.executable, "-m", "undogate.cli", "demo", "--data-dir", str(work)], timeout=120
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "restored byte-for-byte" in result.stdout
    assert "the created contact is gone" in result.stdout
    assert "the agent sees tools: list_resources, prepare_changes" in result.stdout
    # Never a line break inside a value, at the 80 columns of a pipe (issue 17, item 5);
    # no line wider than those 80 columns, and no Python list printed as such.
    assert result.stdout.count("123456789012345678901234567891") == 3  # planned, after, undo
    assert "  balance: 123456789012345678901234567890\n" in result.stdout
    wide = [line for line in result.stdout.splitlines() if len(line) > 80]
    assert wide == []
    assert "['" not in result.stdout and "[]" not in result.stdout
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
    # The README's "Inspect what the demo left", as written there, on this data dir.
    inspect = re.search(r"Inspect what the demo left.*?```sh\n(.*?)\n```", README, re.S)
    assert inspect, "the README no longer says how to inspect the demo's ledger"
    command = inspect.group(1).replace("/tmp/ug", str(work))
    shown = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "|prepare|" in shown.stdout and "|finish_undo|" in shown.stdout
    serving = Ledger.open(ledger_dir)  # the demo let go of it
    try:
        with pytest.raises(LedgerInUse):
            Ledger.open(ledger_dir, alone=True)
    finally:
        serving.close()
