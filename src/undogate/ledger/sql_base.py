"""What the shared verbs (sql_jobs, sql_admin) ask of an engine: a connection that runs
a statement with ``?`` placeholders, and the locks a verb takes before it reads for a
decision (nothing on SQLite, where ``BEGIN IMMEDIATE`` runs one write at a time)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from .records import Answer

T = TypeVar("T")


class Cursor(Protocol):
    """What the verbs read from a statement (sqlite3's cursor, psycopg's)."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """What the verbs ask of a connection: a statement with ``?`` placeholders."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...


class EngineHooks:
    """The locks a verb takes before it reads for a decision; nothing on SQLite."""

    connection: Connection
    #: appended to a SELECT whose rows the write goes on to change
    for_update: str = ""
    #: appended to a SELECT of rows to claim, passing over those another write holds
    skip_locked: str = ""
    #: the lease of the process this transaction runs in (None: opened without one)
    lease_id: str | None = None

    def _clock(self) -> float:
        """Now, in seconds since the epoch, by the clock every process of this ledger
        shares (the database's; a SQLite ledger's processes share one machine's)."""
        return time.time()

    def _lock(self, *names: str) -> None:
        """Hold each of ``names`` until the write commits (a write only)."""

    def _lock_job(self, job_id: str) -> None:
        """Hold the job's row until the write commits (a write only)."""

    def _answer(self, cursor: Cursor, read: Callable[[Cursor], T]) -> Answer[T]:
        """``read(cursor)``, now (SQLite: a library call, and a statement left unread
        would hold up the commit); PostgreSQL reads it when asked (``Answer``)."""
        value = read(cursor)
        return Answer(lambda: value)

    def check_before_commit(self, check: Callable[[], None]) -> None:
        """Run ``check`` (which raises to roll the write back) before the commit, at the
        latest: now here; PostgreSQL runs it at the commit, once the chain's head is
        asked for, so the answers it reads share that round trip."""
        check()

    def lock_resources(self, resource_ids: Iterable[str]) -> None:
        self._lock(*(f"resource:{r}" for r in sorted(set(resource_ids))))
