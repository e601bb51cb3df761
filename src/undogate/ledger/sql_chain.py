"""The hash chain over the events table, in the SQL both engines speak: the one insert
every event goes through, the migration that chains the rows written before the chain
existed, and the reads ``undogate ledger verify`` and a receipt's export walk.

One chain per ledger. A row's ``prev_hash`` is the ``hash`` of the row before it (by
id); both are computed inside the write that inserts the row, so an event and its link
commit together or not at all. Two writers can never fork the chain: SQLite runs one
write at a time, PostgreSQL writers take a transaction-scoped lock on the chain head
first, as the last lock of the write (``_lock``, ``flush_chain``), and
``events_chain_prev`` (a unique index on ``prev_hash``) refuses
a second successor even if something skipped that lock. On PostgreSQL the insert reads
the head itself and the database hashes the link (``postgres.py``), byte for byte what
``chain.row_hash`` computes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..chain import GENESIS, ChainedRow, row_hash
from .sql_base import Cursor, EngineHooks

#: The lock PostgreSQL writers hold from reading the head to their commit.
CHAIN_LOCK = "events:chain"
#: The columns the chain covers, in ``row_values`` order.
ROW_COLUMNS = "job_id, at, actor, access_path, operation, target, from_state, to_state, detail"
_SELECT_ROWS = f"SELECT id, prev_hash, hash, {ROW_COLUMNS} FROM events"  # noqa: S608


@dataclass(frozen=True)
class StoredLink:
    """One event row as stored: its id, its links, and the columns the chain covers."""

    id: int
    prev_hash: str | None
    hash: str | None
    row: ChainedRow


class ChainVerbs(EngineHooks):
    """The one insert into ``events``, chained (see the module docstring).

    Where writes run at once (PostgreSQL: ``defer_chain``), a write's events wait in
    ``pending`` until the engine calls ``flush_chain`` just before its COMMIT: the chain
    lock is then the last lock the write takes, so it can never be part of a deadlock,
    and it is held only for the inserts and the commit. The write's deferred checks
    (``check_before_commit``) run there too, under that lock. An engine that hashes
    the link in the database overrides ``_insert_chained``."""

    #: set by an engine whose writes run at once; it then calls ``flush_chain``
    defer_chain: bool = False
    pending: list[ChainedRow]
    checks: list[Callable[[], None]]

    def append_event(self, row: ChainedRow) -> None:
        """Insert ``row`` after the chain's head (at the commit, where deferred)."""
        if self.defer_chain:
            self.pending.append(row)
            return
        self._insert_chained([row])

    def flush_chain(self) -> None:
        """Run the deferred checks and insert the deferred events, in order, after the
        chain's head."""
        if not self.defer_chain:
            return
        if self.pending:
            rows, self.pending = self.pending, []
            self._insert_chained(rows)
        else:
            self._run_checks()

    def _run_checks(self) -> None:
        checks, self.checks = self.checks, []
        for check in checks:
            check()

    def _insert_chained(self, rows: list[ChainedRow]) -> None:
        """Lock the chain, insert ``rows`` after its head, linked, and run the deferred
        checks (asked before the head is read: one round trip answers them all)."""
        self._lock(CHAIN_LOCK)
        asked = self.connection.execute("SELECT hash FROM events ORDER BY id DESC LIMIT 1")
        if self.defer_chain:
            self._run_checks()
        prev = _head(asked)
        for row in rows:
            digest = row_hash(prev, row)
            self.connection.execute(
                f"INSERT INTO events({ROW_COLUMNS}, prev_hash, hash) "  # noqa: S608
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*row_values(row), prev, digest),
            )
            prev = digest


def _head(asked: Cursor) -> str:
    found = asked.fetchone()
    return str(found[0]) if found is not None and found[0] is not None else GENESIS


def new_row(
    *,
    job_id: str | None,
    actor: str,
    access_path: str,
    operation: str,
    target: str | None,
    from_state: str | None,
    to_state: str | None,
    detail: str | None,
) -> ChainedRow:
    """A row stamped now."""
    return ChainedRow(
        job_id=job_id,
        at=time.time(),
        actor=actor,
        access_path=access_path,
        operation=operation,
        target=target,
        from_state=from_state,
        to_state=to_state,
        detail=detail,
    )


def row_values(row: ChainedRow) -> tuple[Any, ...]:
    """The row's columns in ``ROW_COLUMNS`` order."""
    return (
        row.job_id,
        row.at,
        row.actor,
        row.access_path,
        row.operation,
        row.target,
        row.from_state,
        row.to_state,
        row.detail,
    )


def _link_from(r: Sequence[Any]) -> StoredLink:
    return StoredLink(
        id=int(r[0]),
        prev_hash=r[1],
        hash=r[2],
        row=ChainedRow(
            job_id=r[3],
            at=float(r[4]),
            actor=r[5],
            access_path=r[6],
            operation=r[7],
            target=r[8],
            from_state=r[9],
            to_state=r[10],
            detail=r[11],
        ),
    )


Execute = Callable[[str, Sequence[Any]], Cursor]


def stored_links(
    execute: Execute, *, from_id: int | None = None, to_id: int | None = None
) -> Iterator[StoredLink]:
    """The event rows in id order, as stored: every one, whatever its id (a row someone
    inserted with an id the ledger never issues is a row like any other), or those with
    ``from_id`` ≤ id ≤ ``to_id`` (either bound left out: open on that side)."""
    bounds = [("id >= ?", from_id), ("id <= ?", to_id)]
    where = " AND ".join(term for term, value in bounds if value is not None)
    cursor = execute(
        _SELECT_ROWS + (f" WHERE {where}" if where else "") + " ORDER BY id",
        tuple(value for _, value in bounds if value is not None),
    )
    for r in cursor:
        yield _link_from(r)


def job_event_span(execute: Execute, job_id: str) -> tuple[int, int] | None:
    """The ids of a job's first and last events (None when it has none)."""
    found = execute("SELECT MIN(id), MAX(id) FROM events WHERE job_id = ?", (job_id,)).fetchone()
    if found is None or found[0] is None:
        return None
    return int(found[0]), int(found[1])


def target_event_span(execute: Execute, target: str) -> tuple[int, int] | None:
    """The ids of the first and last events outside any job on ``target`` (a rewind
    plan's), through events_outside_jobs; None when there are none."""
    found = execute(
        "SELECT MIN(id), MAX(id) FROM events WHERE job_id IS NULL AND target = ?", (target,)
    ).fetchone()
    if found is None or found[0] is None:
        return None
    return int(found[0]), int(found[1])


def first_event(execute: Execute, operation: str, target: str) -> StoredLink | None:
    """The first event of ``operation`` on ``target`` (a passkey's registration)."""
    for r in execute(
        _SELECT_ROWS + " WHERE operation = ? AND target = ? ORDER BY id LIMIT 1",
        (operation, target),
    ):
        return _link_from(r)
    return None


def chain_existing_events(execute: Execute) -> None:
    """The migration's step: link every row written before the chain, in id order.
    The caller drops the append-only update trigger around it and restores it after."""
    prev = GENESIS
    rows = [_link_from(r) for r in execute(_SELECT_ROWS + " ORDER BY id", ()).fetchall()]
    for stored in rows:
        digest = row_hash(prev, stored.row)
        execute("UPDATE events SET prev_hash = ?, hash = ? WHERE id = ?", (prev, digest, stored.id))
        prev = digest


__all__ = [
    "CHAIN_LOCK",
    "ROW_COLUMNS",
    "ChainVerbs",
    "StoredLink",
    "chain_existing_events",
    "first_event",
    "job_event_span",
    "new_row",
    "row_values",
    "stored_links",
]
