"""``undogate ledger copy``: a SQLite ledger, whole, into an empty PostgreSQL ledger.

The SQLite ledger is opened as its owner (a running server refuses the copy: stop it
first, so nothing is written while it is copied), checked and brought to the current
schema as at every start. The
PostgreSQL ledger is made (or migrated) and must be empty. Every table is copied in one
PostgreSQL transaction, the identity columns are moved past the copied ids, and each
table is verified, still inside that transaction, by its row count and a digest
computed the same way on both sides: SHA-256 over each row's values in primary-key
order, as JSON (integers as integers, reals by their shortest exact repr). A mismatch
rolls everything back. Nothing else of the SQLite ledger changes.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from ..errors import InvalidRequest, LedgerError
from .postgres import PostgresStore, failure
from .postgres_schema import META_KEY, TABLES, VERSION_KEY
from .sql_sessions import WEB_SECRET_KEY
from .sqlite import DB_NAME, SQLiteStore

#: Each table's primary key: the order rows are digested in.
_KEYS = {
    "meta": ("key",),
    "jobs": ("seq",),
    "changes": ("job_id", "idx"),
    "actions": ("id",),
    "previews": ("token_hash",),
    "events": ("id",),
    "resource_identities": ("resource_id",),
    "credentials": ("id",),
    "endpoint_checks": ("id",),
    "leases": ("id",),
    "web_sessions": ("id_hash",),
    "web_session_previews": ("session_hash", "handle"),
    "webhook_outbox": ("seq",),
    "passkeys": ("id",),
    "passkey_uses": ("challenge",),
    "passkey_enrolments": ("code_sha256",),
    "rewinds": ("id",),
    "agent_stops": ("owner_id", "agent_id"),
}
#: Identity columns whose sequences must continue after the copied ids.
_IDENTITIES = (
    ("jobs", "seq"),
    ("actions", "id"),
    ("events", "id"),
    ("endpoint_checks", "id"),
    ("webhook_outbox", "seq"),
)
#: Meta rows that belong to one ledger, not to its history: never copied, never compared.
_OWN_META = frozenset({META_KEY, VERSION_KEY, "copied_from", WEB_SECRET_KEY})


@dataclass(frozen=True)
class CopiedTable:
    name: str
    rows: int
    digest: str  # hex SHA-256, the same on both sides


@dataclass(frozen=True)
class Copied:
    source_id: str
    target_id: str
    tables: tuple[CopiedTable, ...]


def copy_sqlite_to_postgres(source: Path, url: str) -> Copied:
    """Copy the SQLite ledger at ``source`` (its data dir, or its ``ledger.sqlite3``)
    into the empty PostgreSQL ledger at ``url``, verified.

    Raises:
        LedgerInUse: a process serves the SQLite ledger (stop every one first).
        InvalidRequest: the target ledger is not empty.
        LedgerError: either ledger cannot be opened, or the copy did not verify
            (nothing was kept in PostgreSQL).
    """
    data_dir = source.parent if source.name == DB_NAME else source
    if not (data_dir / DB_NAME).is_file():
        raise InvalidRequest(f"no SQLite ledger at {source} (expected {data_dir / DB_NAME})")
    # To itself: nothing may change while it is copied, and the copy takes part in
    # nothing (no lease).
    sqlite_store = SQLiteStore.open(data_dir, alone=True, lease_s=None)
    try:
        target = PostgresStore.open(url, pool_size=1, lease_s=None)
        try:
            with sqlite_store.raw() as src, target.raw() as dst:
                tables = _copy(src, dst, sqlite_store.identity.ledger_id)
            return Copied(sqlite_store.identity.ledger_id, target.ledger_id, tables)
        finally:
            target.close()
    finally:
        sqlite_store.close()


def _copy(
    src: sqlite3.Connection, dst: psycopg.Connection[Any], source_id: str
) -> tuple[CopiedTable, ...]:
    try:
        with dst.transaction():
            # No gateway may write the target while it is filled.
            dst.execute(("LOCK TABLE " + ", ".join(TABLES) + " IN EXCLUSIVE MODE").encode())
            _refuse_non_empty(dst)
            for table in TABLES:
                _copy_table(src, dst, table)
            for table, column in _IDENTITIES:
                dst.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "  # noqa: S608
                    f"COALESCE(MAX({column}), 0) + 1, false) FROM {table}".encode()
                )
            dst.execute("INSERT INTO meta(key, value) VALUES ('copied_from', %s)", (source_id,))
            return tuple(_verify(src, dst, table) for table in TABLES)
    except psycopg.Error as exc:
        raise failure("copy the ledger", exc) from None


def _refuse_non_empty(dst: psycopg.Connection[Any]) -> None:
    for table in TABLES:
        if table == "meta":
            row = dst.execute(
                "SELECT COUNT(*) FROM meta WHERE NOT (key = ANY(%s)) "
                "AND NOT (key IN ('job_count', 'payload_bytes') AND value = '0')",
                (list(_OWN_META),),
            ).fetchone()
        else:
            row = dst.execute(f"SELECT COUNT(*) FROM {table}".encode()).fetchone()  # noqa: S608
        if row is not None and row[0]:
            raise InvalidRequest(
                f"the PostgreSQL ledger is not empty ({table} holds {row[0]} row(s)); "
                "copy only into a new, empty database",
                table=table,
            )


def _columns(src: sqlite3.Connection, dst: psycopg.Connection[Any], table: str) -> list[str]:
    """The table's columns, the same on both sides (else the schemas differ)."""
    mine = [str(r[1]) for r in src.execute(f"PRAGMA table_info({table})").fetchall()]
    theirs = [
        str(r[0])
        for r in dst.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s",
            (table,),
        ).fetchall()
    ]
    if sorted(mine) != sorted(theirs):
        raise LedgerError(
            f"the ledgers' {table} tables differ (SQLite {sorted(mine)}, PostgreSQL "
            f"{sorted(theirs)}): update undogate and open the SQLite ledger once first",
            table=table,
        )
    return mine


def _copy_table(src: sqlite3.Connection, dst: psycopg.Connection[Any], table: str) -> None:
    columns = _columns(src, dst, table)
    names = ", ".join(columns)
    # In key order: an event is refused below an id already issued (migration 9).
    order = ", ".join(_KEYS[table])
    rows = src.execute(f"SELECT {names} FROM {table} ORDER BY {order}")  # noqa: S608
    if table == "meta":
        kept = [r for r in rows if r[0] not in _OWN_META]
        dst.execute(b"DELETE FROM meta WHERE key IN ('job_count', 'payload_bytes')")
        rows_iter: Iterable[Sequence[Any]] = kept
    else:
        rows_iter = rows
    with dst.cursor().copy(f"COPY {table} ({names}) FROM STDIN".encode()) as copy:
        for row in rows_iter:
            copy.write_row(row)


def _verify(src: sqlite3.Connection, dst: psycopg.Connection[Any], table: str) -> CopiedTable:
    columns = _columns(src, dst, table)
    select = f"SELECT {', '.join(columns)} FROM {table}"  # noqa: S608
    keys = [columns.index(k) for k in _KEYS[table]]
    mine = _digest(src.execute(select).fetchall(), keys, table)
    theirs = _digest(dst.execute(select.encode()).fetchall(), keys, table)
    if mine != theirs:
        raise LedgerError(
            f"the copy of {table} does not match (SQLite {mine[0]} rows {mine[1][:12]}, "
            f"PostgreSQL {theirs[0]} rows {theirs[1][:12]}); nothing was kept",
            table=table,
        )
    return CopiedTable(table, mine[0], mine[1])


def _digest(rows: list[Any], keys: list[int], table: str) -> tuple[int, str]:
    """(row count, SHA-256) of a table's rows in primary-key order, each as JSON."""
    if table == "meta":
        rows = [r for r in rows if r[0] not in _OWN_META]
    rows.sort(key=lambda r: tuple(r[k] for k in keys))
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(list(row), ensure_ascii=False, allow_nan=False).encode())
        digest.update(b"\n")
    return len(rows), digest.hexdigest()
