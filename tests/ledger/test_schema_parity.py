"""The two engines keep one schema: the same tables, columns (name, type class, NOT NULL),
indexes (name, columns, uniqueness, partial or not) and append-only triggers. A SQLite
migration without its PostgreSQL twin fails here."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import psycopg

from undogate.jobs import RUNNING_STATES, TERMINAL_STATES, UNRESOLVED_STATES
from undogate.ledger import Ledger
from undogate.ledger.postgres import PostgresStore
from undogate.ledger.postgres_schema import TABLES

from ..postgres import PostgresCluster

_TYPES = {"INTEGER": "int", "REAL": "real", "TEXT": "text"}
_PG_TYPES = {"bigint": "int", "double precision": "real", "text": "text"}


def sqlite_schema(path: Path) -> dict[str, Any]:
    conn = sqlite3.connect(path)
    try:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        columns = {
            t: {
                (r[1], _TYPES[r[2]], bool(r[3]) or bool(r[5]))
                for r in conn.execute(f"PRAGMA table_info({t})")
            }
            for t in tables
        }
        indexes = {
            (r[0], r[1], r[2] is not None and " WHERE " in r[2].upper())
            for r in conn.execute(
                "SELECT name, tbl_name, sql FROM sqlite_master "
                "WHERE type = 'index' AND sql IS NOT NULL"
            )
        }
        triggers = {
            r[0] for r in conn.execute("SELECT tbl_name FROM sqlite_master WHERE type = 'trigger'")
        }
    finally:
        conn.close()
    return {"tables": tables, "columns": columns, "indexes": indexes, "triggers": triggers}


def postgres_schema(url: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        tables = {
            str(r[0])
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        }
        columns: dict[str, set[tuple[str, str, bool]]] = {t: set() for t in tables}
        for table, name, kind, nullable, key in conn.execute(
            "SELECT c.table_name, c.column_name, c.data_type, c.is_nullable, "
            "EXISTS (SELECT 1 FROM information_schema.key_column_usage k "
            "JOIN information_schema.table_constraints tc "
            "ON tc.constraint_name = k.constraint_name "
            "AND tc.constraint_type = 'PRIMARY KEY' "
            "WHERE k.table_name = c.table_name AND k.column_name = c.column_name) "
            "FROM information_schema.columns c WHERE c.table_schema = 'public'"
        ):
            columns[table].add((name, _PG_TYPES[kind], nullable == "NO" or key))
        indexes = {
            (str(r[0]), str(r[1]), " WHERE " in str(r[2]).upper())
            for r in conn.execute(
                "SELECT indexname, tablename, indexdef FROM pg_indexes WHERE schemaname = 'public' "
                "AND indexname NOT LIKE '%_pkey'"
            )
        }
        triggers = {
            str(r[0])
            for r in conn.execute(
                "SELECT DISTINCT event_object_table FROM information_schema.triggers"
            )
        }
    return {"tables": tables, "columns": columns, "indexes": indexes, "triggers": triggers}


def test_both_engines_hold_the_same_schema(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    Ledger.open(tmp_path / "data").close()
    mine = sqlite_schema(tmp_path / "data" / "ledger.sqlite3")
    url = postgres_cluster.fresh_database()
    PostgresStore.open(url).close()
    theirs = postgres_schema(url)
    assert mine["tables"] == theirs["tables"] == set(TABLES)
    for table in TABLES:
        assert mine["columns"][table] == theirs["columns"][table], table
    # SQLite names its UNIQUE constraints' indexes itself (sqlite_autoindex_...): compare
    # the indexes the migrations name, and PostgreSQL's unique constraints by table.
    named_pg = {i for i in theirs["indexes"] if not i[0].endswith("_key")}
    assert mine["indexes"] == named_pg
    assert mine["triggers"] <= theirs["triggers"]
    # A floor, not a count: migrations are appended (by several branches at once).
    assert len(mine["indexes"]) >= 14 and sum(map(len, mine["columns"].values())) > 80


def _states_in(definition: str) -> set[str]:
    return set(re.findall(r"'([a-z_]+)'", definition))


def test_the_job_state_indexes_list_the_state_tables_states(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    """A job state added to ``jobs.STATES`` and not to the partial indexes that select by
    state (both engines) fails here: quotas and recovery would read a stale index."""
    wanted = {
        "jobs_unresolved": {s.value for s in UNRESOLVED_STATES},
        "jobs_running": {s.value for s in RUNNING_STATES},
        "jobs_unfinished": {s.value for s in TERMINAL_STATES},  # NOT IN: the finished ones
    }
    Ledger.open(tmp_path / "data").close()
    conn = sqlite3.connect(tmp_path / "data" / "ledger.sqlite3")
    try:
        mine = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'"))
    finally:
        conn.close()
    url = postgres_cluster.fresh_database()
    PostgresStore.open(url).close()
    with psycopg.connect(url) as pg:
        theirs: dict[str, str] = dict(pg.execute("SELECT indexname, indexdef FROM pg_indexes"))
    for name, states in wanted.items():
        assert _states_in(mine[name]) == states, (name, mine[name])
        assert _states_in(theirs[name]) == states, (name, theirs[name])
