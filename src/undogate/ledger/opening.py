"""The one place that picks the ledger's engine: what ``server.ledger`` names.

Absent: the embedded SQLite ledger under ``server.data_dir`` (one owner, its identity
checked). ``postgresql://user@host:port/db``: a PostgreSQL ledger, the password from the
environment (libpq reads ``PGPASSWORD``, or ``~/.pgpass``); config.py refused a URL that
carries one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..errors import InvalidRequest
from .sqlite import SQLiteStore
from .store import Store


class LedgerSettings(Protocol):
    """What ``open_store`` reads of ``config.ServerSettings`` (ledger/ imports no config)."""

    @property
    def data_dir(self) -> Path: ...

    @property
    def ledger(self) -> str | None: ...

    @property
    def lease_s(self) -> float: ...


def open_store(settings: LedgerSettings, *, new_ledger: bool = False) -> Store:
    """Open the ledger the settings name.

    Raises:
        LedgerError (LedgerInUse, LedgerMissing, LedgerForeign on SQLite): it cannot be
            opened; InvalidRequest: ``new_ledger`` for a PostgreSQL ledger, or on a SQLite
            ledger that is whole.
    """
    if settings.ledger is None:
        return SQLiteStore.open(settings.data_dir, new_ledger=new_ledger)
    if new_ledger:
        raise InvalidRequest(
            "--new-ledger replaces a lost SQLite ledger; a PostgreSQL ledger is new when its "
            "database is empty: create a new database and point server.ledger at it"
        )
    from .postgres import PostgresStore  # only a PostgreSQL ledger loads its driver

    return PostgresStore.open(settings.ledger, lease_s=settings.lease_s)
