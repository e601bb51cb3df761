"""Backup and restore of a PostgreSQL ledger with the exact commands docs/scaling.md
gives: ``pg_dump --format=custom`` of a live ledger, ``pg_restore`` into a new, empty
database; the restored ledger is the same ledger, its history whole and still
append-only."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest

from undogate.ledger.postgres import PostgresStore

from ..postgres import PostgresCluster
from .test_copy import fill


def test_pg_dump_and_pg_restore_bring_the_ledger_back_whole(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    url = postgres_cluster.fresh_database()
    live = PostgresStore.open(url)
    try:
        fill(live)
        dump = tmp_path / "undogate.dump"
        # The documented backup: online, one consistent snapshot, the server keeps writing.
        subprocess.run(
            [str(postgres_cluster.bin / "pg_dump"), "--format=custom", f"--file={dump}", url],
            check=True,
            capture_output=True,
        )
        expected = (
            live.ledger_id,
            [live.load_job(j) for j in ("job_1", "job_2")],
            live.events("job_1"),
            live.read(lambda tx: tx.credentials()),
            live.read(lambda tx: tx.usage()),
            live.counter("op_seq"),
        )
    finally:
        live.close()

    target = postgres_cluster.fresh_database()  # new and empty, as createdb makes one
    subprocess.run(
        [
            str(postgres_cluster.bin / "pg_restore"),
            "--exit-on-error",
            "--single-transaction",
            "--no-owner",
            f"--dbname={target}",
            str(dump),
        ],
        check=True,
        capture_output=True,
    )
    restored = PostgresStore.open(target)
    try:
        assert not restored.created
        assert (
            restored.ledger_id,
            [restored.load_job(j) for j in ("job_1", "job_2")],
            restored.events("job_1"),
            restored.read(lambda tx: tx.credentials()),
            restored.read(lambda tx: tx.usage()),
            restored.counter("op_seq"),
        ) == expected
        assert restored.write(lambda tx: tx.next_seq()) == expected[5] + 1
    finally:
        restored.close()
    with psycopg.connect(target, autocommit=True) as raw, pytest.raises(psycopg.Error):
        raw.execute("DELETE FROM events")  # still append-only


def test_undogate_backup_and_restore_point_a_postgresql_ledger_to_pg_dump(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from undogate.cli import main

    config = tmp_path / "undogate.yaml"
    config.write_text("server:\n  ledger: postgresql://undogate@db.internal:5432/undogate\n")
    for args in (["backup", str(tmp_path / "b.sqlite3")], ["restore", str(config)]):
        result = CliRunner().invoke(main, [*args, "--config", str(config)])
        assert result.exit_code == 2 and "pg_dump" in result.output, result.output
