"""A ledger opened for reading its chain only, with no server and no ownership: the
SQLite file read-only (``mode=ro``; a running server may keep writing, the walk reads
one snapshot), or a PostgreSQL URL in one ``REPEATABLE READ READ ONLY`` transaction.
``undogate ledger verify`` and ``undogate export-receipt`` read through it
(``engines.open_chain`` picks the opener the location's engine names)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

from ..errors import InvalidRequest, LedgerError
from ..jobs import Change
from ..jsonvalue import JsonObject, loads_object
from .records import StoredCredential
from .sql_admin import CREDENTIAL_COLUMNS, credential_from_row
from .sql_base import Cursor
from .sql_chain import (
    Execute,
    StoredLink,
    first_event,
    job_event_span,
    stored_links,
    target_event_span,
)
from .sql_jobs import CHANGE_COLUMNS, change_from_row
from .sqlite import DB_NAME


@dataclass(frozen=True)
class ChainSource:
    """One snapshot of a ledger's events."""

    location: str
    execute: Execute
    #: the highest event id the ledger ever issued, where it keeps one exactly: SQLite's
    #: AUTOINCREMENT counter moves only with the insert's own transaction, so a smaller
    #: last row means rows at the end were deleted. None on PostgreSQL, whose sequence
    #: also moves for inserts that rolled back.
    issued: int | None = None

    def links(
        self, *, from_id: int | None = None, to_id: int | None = None
    ) -> Iterator[StoredLink]:
        """The event rows in id order, as stored (every one, unless bounded)."""
        return stored_links(self.execute, from_id=from_id, to_id=to_id)

    def first_event(self, operation: str, target: str) -> StoredLink | None:
        """The first event of ``operation`` on ``target``, or None."""
        return first_event(self.execute, operation, target)

    def job_span(self, job_id: str) -> tuple[int, int] | None:
        """The ids of the job's first and last events, or None."""
        return job_event_span(self.execute, job_id)

    def target_span(self, target: str) -> tuple[int, int] | None:
        """The ids of the first and last events outside any job on ``target``, or None."""
        return target_event_span(self.execute, target)

    # -- the rows outside the chain that it vouches for (seals.py) -----------------------

    def job_states(self) -> Iterator[tuple[str, str]]:
        """Every job's (id, state)."""
        for r in self.execute("SELECT id, state FROM jobs ORDER BY seq", ()):
            yield str(r[0]), str(r[1])

    def changes(self) -> Iterator[tuple[str, list[Change]]]:
        """Every job's changes, in index order, one job at a time: (job id, changes)."""
        rows = self.execute(
            f"SELECT job_id, {CHANGE_COLUMNS} FROM changes ORDER BY job_id, idx",  # noqa: S608
            (),
        )
        for job_id, group in groupby(rows, key=lambda r: str(r[0])):
            yield job_id, [change_from_row(r[1:]) for r in group]

    def credentials(self) -> Iterator[StoredCredential]:
        """Every credential, with what the chain holds of it."""
        for r in self.execute(f"SELECT {CREDENTIAL_COLUMNS} FROM credentials c ORDER BY c.id", ()):  # noqa: S608
            yield credential_from_row(r)

    def endpoint_checks(self) -> Iterator[tuple[int, str, bool, JsonObject]]:
        """Every endpoint check: (id, resource, passed, evidence)."""
        for r in self.execute(
            "SELECT id, resource_id, passed, evidence FROM endpoint_checks ORDER BY id", ()
        ):
            yield int(r[0]), str(r[1]), bool(r[2]), loads_object(str(r[3]))


@contextmanager
def sqlite_chain(location: str) -> Iterator[ChainSource]:
    """The chain of the SQLite ledger at ``location`` (a data dir, its
    ``ledger.sqlite3``, or ``sqlite:PATH``), read-only.

    Raises:
        InvalidRequest: no ledger there.
        LedgerError: it cannot be opened or read (not a ledger, no chain yet).
    """
    path = Path(location.removeprefix("sqlite:"))
    db = path if path.name == DB_NAME or path.is_file() else path / DB_NAME
    if not db.is_file():
        raise InvalidRequest(f"no SQLite ledger at {location} (expected {db})")
    try:
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot open {db} read-only: {exc}") from None
    try:
        conn.execute("BEGIN")  # one snapshot for the whole walk

        def execute(sql: str, parameters: Sequence[Any]) -> Cursor:
            try:
                return conn.execute(sql, parameters)
            except sqlite3.Error as exc:
                raise LedgerError(f"cannot read the events of {db}: {exc}") from None

        found = execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'", ()).fetchone()
        yield ChainSource(str(db), execute, int(found[0]) if found is not None else 0)
    finally:
        conn.close()


@contextmanager
def postgres_chain(url: str) -> Iterator[ChainSource]:
    """The chain of the PostgreSQL ledger at ``url``, in one read-only snapshot.

    Raises: LedgerError: it cannot be reached or read."""
    import psycopg  # only a PostgreSQL ledger loads its driver

    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise LedgerError(f"cannot connect to the PostgreSQL ledger: {exc}") from None
    try:
        conn.execute(b"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

        def execute(sql: str, parameters: Sequence[Any]) -> Cursor:
            try:
                return conn.execute(sql.replace("?", "%s").encode(), parameters)
            except psycopg.Error as exc:
                raise LedgerError(f"cannot read the PostgreSQL ledger's events: {exc}") from None

        yield ChainSource(url, execute)
    finally:
        conn.close()


__all__ = ["ChainSource", "postgres_chain", "sqlite_chain"]
