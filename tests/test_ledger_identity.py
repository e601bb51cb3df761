"""A lost, foreign or damaged ledger is refused, loudly, with what to do; never replaced.

Real files under tmp_path; the refusals a person meets are driven through the real CLI.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from undogate.auth import Keyring
from undogate.errors import LedgerDamaged
from undogate.ledger import DB_NAME, Ledger, Reader
from undogate.ledger.identity import MARKER_NAME, META_KEY
from undogate.ledger.sqlite import SQLiteTransaction
from undogate.ledger.sqlite_files import NEXT_WRITER_LOCK_NAME, WRITE_LOCK_NAME

from .serving import SERVE, cli, free_port, serve_log, wait_healthy
from .worlds import MASTER_KEY

PAGE = 4096
GARBAGE = bytes(range(256)) * (PAGE // 256)


def _config(tmp_path: Path, name: str = "a") -> Path:
    """A config whose data dir ``tmp_path/name`` holds a new ledger with an operator key
    (what `init` makes)."""
    config = tmp_path / f"{name}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": str(tmp_path / name)},
                "resources": [
                    {
                        "id": "customer",
                        "agent_id": "account-assistant",
                        "name": "Customer",
                        "kind": "json_record",
                        "url": "https://records.example.com/customers/123",
                        "fields": ["status"],
                    }
                ],
                "agents": [{"id": "account-assistant", "tools": ["prepare_changes"]}],
            }
        )
    )
    ledger = Ledger.open(tmp_path / name)
    Keyring(ledger).create_operator(label="first operator")
    ledger.close()
    return config


def _refused(config: Path, code: str, *command: str) -> str:
    """Run a command that must refuse to open the ledger; returns its stderr."""
    done = cli(*(command or ("serve",)), "--config", str(config), "--port", str(free_port()))
    assert done.returncode == 2, done.stderr
    assert f"error [{code}]" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


def _garbage_over_root_page(db: Path, table: str, start: int = 0, length: int = PAGE) -> int:
    """Overwrite ``length`` bytes of ``table``'s root page from ``start``; returns the page."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        (page,) = c.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
    with db.open("r+b") as f:
        f.seek((page - 1) * PAGE + start)
        f.write(GARBAGE[:length])
    return int(page)


# -- missing, empty, foreign ---------------------------------------------------------------


def test_serve_refuses_a_ledger_emptied_to_zero_bytes_and_replaces_nothing(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    data = tmp_path / "a"
    marker = (data / MARKER_NAME).read_text()
    os.truncate(data / DB_NAME, 0)

    said = _refused(config, "ledger_missing")
    assert "empty (0 bytes)" in said
    assert "undogate restore BACKUP" in said and "--new-ledger" in said
    assert (data / DB_NAME).stat().st_size == 0  # nothing made in its place
    assert (data / MARKER_NAME).read_text() == marker
    assert not list(data.glob("before-*"))


def test_every_command_that_opens_the_ledger_refuses_a_deleted_one(tmp_path: Path) -> None:
    config = _config(tmp_path)
    data = tmp_path / "a"
    (data / DB_NAME).unlink()

    said = _refused(config, "ledger_missing")
    assert "is missing" in said and "undogate restore BACKUP" in said
    done = cli("keys", "list", "--config", str(config))
    assert done.returncode == 2 and "error [ledger_missing]" in done.stderr
    done = cli("backup", str(tmp_path / "b.sqlite3"), "--config", str(config))
    assert done.returncode == 2 and "error [ledger_missing]" in done.stderr
    assert not (data / DB_NAME).exists()


def test_a_ledger_copied_in_from_another_data_dir_is_foreign(tmp_path: Path) -> None:
    mine, theirs = _config(tmp_path, "a"), _config(tmp_path, "b")
    (tmp_path / "b" / DB_NAME).replace(tmp_path / "a" / DB_NAME)

    said = _refused(mine, "ledger_foreign")
    assert (tmp_path / "a" / MARKER_NAME).read_text().strip() in said
    assert sorted(f.name for f in (tmp_path / "a").iterdir()) == [
        MARKER_NAME,
        "ledger.lock",
        "ledger.opening.lock",
        DB_NAME,
        WRITE_LOCK_NAME,  # these two made when the ledger was, as the two locks above
        NEXT_WRITER_LOCK_NAME,
    ]  # refused as found: not even an empty -wal or -shm left beside it
    assert "undogate restore BACKUP" in said
    done = cli("backup", str(tmp_path / "b.sqlite3"), "--config", str(mine))
    assert done.returncode == 2 and "error [ledger_foreign]" in done.stderr
    assert theirs.exists()


def test_new_ledger_starts_afresh_and_keeps_every_old_file_aside(tmp_path: Path) -> None:
    config = _config(tmp_path)
    data = tmp_path / "a"
    old_marker = (data / MARKER_NAME).read_text()
    old_bytes = (data / DB_NAME).read_bytes()
    (data / DB_NAME).write_bytes(old_bytes[:100])  # damaged beyond reading

    _refused(config, "ledger_error")
    fresh = cli("init", "--new-ledger", "--config", str(config))
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.strip().startswith("ugo_")  # a first operator key for the new ledger
    (aside,) = data.glob("before-new-ledger-*")
    assert str(aside) in fresh.stderr
    assert (aside / MARKER_NAME).read_text() == old_marker
    assert (aside / DB_NAME).read_bytes() == old_bytes[:100]
    new_marker = (data / MARKER_NAME).read_text()
    assert new_marker != old_marker
    assert stat.S_IMODE((data / MARKER_NAME).stat().st_mode) == 0o600

    # On a ledger that is whole the flag is refused: it never replaces good history.
    again = _refused(config, "invalid_request", "serve", "--new-ledger")
    assert "is whole" in again
    assert len(list(data.glob("before-new-ledger-*"))) == 1


def test_serve_new_ledger_replaces_a_foreign_ledger_and_serves(tmp_path: Path) -> None:
    config = _config(tmp_path, "a")
    _config(tmp_path, "b")
    (tmp_path / "b" / DB_NAME).replace(tmp_path / "a" / DB_NAME)
    port = free_port()
    proc = subprocess.Popen(
        [*SERVE, "--config", str(config), "--port", str(port), "--new-ledger"],
        env={**os.environ, "UNDOGATE_MASTER_KEY": MASTER_KEY},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=15)
    (aside,) = (tmp_path / "a").glob("before-new-ledger-*")
    assert f"the previous ledger files are in {aside}" in stderr
    assert (aside / DB_NAME).exists() and (aside / MARKER_NAME).exists()


def test_a_ledger_from_before_markers_adopts_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ledger = Ledger.open(data)
    with ledger.raw() as c:
        c.execute("DELETE FROM meta WHERE key = ?", (META_KEY,))
    ledger.close()
    (data / MARKER_NAME).unlink()  # now as undogate left every ledger before markers

    ledger = Ledger.open(data)
    try:
        assert ledger.identity.adopted and not ledger.identity.created
        ledger_id = ledger.identity.ledger_id
        with ledger.raw() as c:
            row = c.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
        assert row == (ledger_id,)
    finally:
        ledger.close()
    assert (data / MARKER_NAME).read_text().strip() == ledger_id
    assert stat.S_IMODE((data / MARKER_NAME).stat().st_mode) == 0o600
    ledger = Ledger.open(data)
    try:
        assert not ledger.identity.adopted and ledger.identity.ledger_id == ledger_id
    finally:
        ledger.close()


# -- damage at the start -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "length", "says"),
    [
        (0, PAGE, "is damaged (SQLite: database disk image is malformed)"),  # the whole page
        (8, 64, "failed its integrity check (quick_check: *** in database main ***"),
    ],
)
def test_a_garbage_page_fails_quick_check_and_serve_says_so(
    tmp_path: Path, start: int, length: int, says: str
) -> None:
    config = _config(tmp_path)
    db = tmp_path / "a" / DB_NAME
    page = _garbage_over_root_page(db, "credentials", start, length)
    damaged = db.read_bytes()

    said = _refused(config, "ledger_error")
    assert says in said
    assert length == PAGE or f"page {page}" in said
    assert "undogate restore BACKUP" in said
    done = cli("keys", "list", "--config", str(config))
    assert done.returncode == 2 and "error [ledger_error]" in done.stderr
    assert "Traceback" not in done.stderr
    assert db.read_bytes() == damaged  # refused as found: nothing rewritten


def test_a_garbage_header_is_a_ledger_error_not_a_traceback(tmp_path: Path) -> None:
    config = _config(tmp_path)
    db = tmp_path / "a" / DB_NAME
    with db.open("r+b") as f:
        f.write(GARBAGE[:100])
    said = _refused(config, "ledger_error")
    assert "file is not a database" in said


# -- damage found while serving -------------------------------------------------------------


def test_a_damaged_page_met_while_serving_is_a_ledger_error_in_the_api_shape(
    served: dict[str, Any],
) -> None:
    data = Path(str(served["config"])).parent / "data"
    url, headers = str(served["url"]), {"Content-Type": "application/json"}
    body = '{"summary": "s", "changes": [{"resource": "customer", "set": {"status": "x"}}]}'
    prepared = httpx.post(
        f"{url}/api/v1/jobs",
        content=body,
        headers={**headers, "Authorization": f"Bearer {served['agent']}"},
        timeout=30,
    )
    assert prepared.status_code == 201, prepared.text
    job_id = prepared.json()["job_id"]
    db = data / DB_NAME
    # Into the database file (the server's connections then read it from there), then
    # a page of it overwritten under the running server.
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    _garbage_over_root_page(db, "jobs")

    read = httpx.get(
        f"{url}/api/v1/jobs/{job_id}",
        headers={"Authorization": f"Bearer {served['operator']}"},
        timeout=30,
    )
    assert read.status_code == 503
    error = read.json()["error"]
    assert error["code"] == "ledger_error"
    assert "damaged" in error["message"] and "undogate restore" in error["message"]
    proc = served["proc"]
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=15)
    stderr = serve_log(proc)
    assert "Traceback" not in stderr
    # At its start it said which ledger it checked, and how long that took.
    marker = (data / MARKER_NAME).read_text().strip()
    assert f"checked: id {marker}, WAL and quick_check ok in " in stderr


def test_a_damaged_page_met_by_a_write_is_a_ledger_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Ledger.open(data).close()
    ledger = Ledger.open(data)  # checked whole; then a page goes bad under it
    try:
        _garbage_over_root_page(data / DB_NAME, "events")
        with pytest.raises(LedgerDamaged, match="damaged") as info:
            ledger.write(
                lambda tx: tx.add_event(job_id=None, actor="a", access_path="t", operation="note")
            )
        assert info.value.code == "ledger_error"
        with pytest.raises(LedgerDamaged):
            ledger.read(lambda tx: _connection(tx).execute("SELECT * FROM events").fetchall())
    finally:
        ledger.close()


# -- the write-ahead log ----------------------------------------------------------------------

_WRITE_THEN_DIE = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from undogate.ledger import Ledger
    ledger = Ledger.open(Path(sys.argv[1]))
    for n in range(int(sys.argv[2])):
        ledger.write(lambda tx: tx.add_event(
            job_id=None, actor="x" * 3000, access_path="t", operation=f"note {n}"))
    os._exit(0)  # no close: the WAL and the wal-index stay, as after a crash
    """
)


def _crashed_with_wal(tmp_path: Path, commits: int = 20) -> Path:
    data = tmp_path / "data"
    Ledger.open(data).close()
    subprocess.run(
        [sys.executable, "-c", _WRITE_THEN_DIE, str(data), str(commits)], check=True, timeout=60
    )
    assert (data / f"{DB_NAME}-wal").stat().st_size > 0
    return data


def _events(data: Path) -> int:
    ledger = Ledger.open(data)
    try:
        return ledger.read(
            lambda tx: int(_connection(tx).execute("SELECT COUNT(*) FROM events").fetchone()[0])
        )
    finally:
        ledger.close()


def test_a_crash_with_an_intact_wal_opens_with_every_commit(tmp_path: Path) -> None:
    assert _events(_crashed_with_wal(tmp_path)) == 20


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        ("truncated", "replays"),
        ("torn_frame", "replays"),
        ("shorter_than_header", "shorter than its header"),
        ("bad_header", "header that is not valid"),
        ("deleted", "is missing"),
    ],
)
def test_a_damaged_wal_is_refused_every_time_never_rolled_back(
    tmp_path: Path, damage: str, says: str
) -> None:
    data = _crashed_with_wal(tmp_path)
    wal = data / f"{DB_NAME}-wal"
    size = wal.stat().st_size
    if damage == "truncated":
        os.truncate(wal, size - PAGE)
    elif damage == "torn_frame":
        with wal.open("r+b") as f:
            f.seek(size // 2)
            f.write(GARBAGE[:64])
    elif damage == "shorter_than_header":
        os.truncate(wal, 20)
    elif damage == "bad_header":
        with wal.open("r+b") as f:
            f.write(b"\0" * 8)
    else:
        wal.unlink()
    for _ in range(2):  # a refusal changes nothing, so the next start refuses again
        with pytest.raises(LedgerDamaged, match=says):
            Ledger.open(data)


def test_what_the_wal_check_cannot_see_a_truncated_wal_without_its_index(
    tmp_path: Path,
) -> None:
    # docs/recovery.md: with the wal-index (-shm) gone too there is no record of what was
    # committed; SQLite replays what it can and the rest is lost without a word.
    data = _crashed_with_wal(tmp_path)
    wal = data / f"{DB_NAME}-wal"
    os.truncate(wal, wal.stat().st_size - PAGE)
    (data / f"{DB_NAME}-shm").unlink()
    assert _events(data) < 20


def _connection(tx: Reader) -> sqlite3.Connection:
    """The SQLite engine's own connection under a read: what only a test reaches into."""
    assert isinstance(tx, SQLiteTransaction)
    return tx.connection
