"""The ledger's engines, each described once, and the one switch between them.

``server.ledger`` names the engine: absent, the embedded SQLite ledger under
``server.data_dir`` (its identity checked), shared by the processes that serve it on
this machine; ``postgresql://user@host:port/db``, a PostgreSQL ledger shared by every
process that serves it, on any machine, its password from the environment (libpq reads
``PGPASSWORD``, or ``~/.pgpass``), never from the config. On either, each process holds
a lease (``leases``).

Everything that depends on the engine asks its ``Engine`` here: opening the store
(``open_store``), reading the chain (``open_chain``), checking a config's URL
(``ledger_url_problem``) and whether ``undogate backup`` copies its file. An
engine's module (its store, its transaction: ``sql_verbs.SqlVerbs`` and its
connection) is imported only when that engine is opened, so a SQLite ledger never loads
a PostgreSQL driver.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from ..errors import InvalidRequest
from .chain_source import ChainSource, postgres_chain, sqlite_chain
from .store import Store


class LedgerSettings(Protocol):
    """What an engine reads of ``config.ServerSettings`` (ledger/ imports no config)."""

    @property
    def data_dir(self) -> Path: ...

    @property
    def ledger(self) -> str | None: ...

    @property
    def lease_s(self) -> float: ...


@dataclass(frozen=True)
class Engine:
    """One engine, as the rest of the house needs to know it."""

    name: str
    #: the URL schemes of ``server.ledger`` that name it (none: the default, no URL)
    schemes: tuple[str, ...]
    #: how its ledger is backed up and restored when ``undogate backup`` cannot copy
    #: its file (None: ``undogate backup`` and ``restore`` copy it)
    own_backup: str | None
    open_store: Callable[[LedgerSettings, bool], Store]
    open_chain: Callable[[str], AbstractContextManager[ChainSource]]
    #: why a URL of its schemes cannot name a ledger (None when it can)
    url_problem: Callable[[str], str | None]
    #: a URL that names one (None: no URL names it)
    example: str | None = None


def _open_sqlite(settings: LedgerSettings, new_ledger: bool) -> Store:
    from .sqlite import SQLiteStore

    return SQLiteStore.open(settings.data_dir, new_ledger=new_ledger, lease_s=settings.lease_s)


def _open_postgres(settings: LedgerSettings, new_ledger: bool) -> Store:
    if new_ledger:
        raise InvalidRequest(
            "--new-ledger replaces a lost SQLite ledger; a PostgreSQL ledger is new when its "
            "database is empty: create a new database and point server.ledger at it"
        )
    from .postgres import PostgresStore  # only a PostgreSQL ledger loads its driver

    assert settings.ledger is not None
    return PostgresStore.open(settings.ledger, lease_s=settings.lease_s)


POSTGRES_EXAMPLE = "postgresql://user@host:5432/database"


def _postgres_url_problem(url: str) -> str | None:
    """The message never repeats the URL: it may carry the very password it refuses."""
    parts = urlsplit(url)
    port = parts.port  # ledger_url_problem checked it parses
    if parts.password is not None or "password" in parts.query.lower():
        return (
            "must not carry a password: give it in the PGPASSWORD environment variable "
            "(or a ~/.pgpass file), never in the config"
        )
    if not parts.hostname or not parts.path.strip("/"):
        return f"must name a host and a database: {POSTGRES_EXAMPLE}"
    if port is not None and not 0 < port < 65536:
        return "has a port out of range"
    return None


SQLITE = Engine(
    name="SQLite",
    schemes=(),
    own_backup=None,
    open_store=_open_sqlite,
    open_chain=sqlite_chain,
    url_problem=lambda url: None,
)
POSTGRESQL = Engine(
    name="PostgreSQL",
    schemes=("postgresql", "postgres"),
    own_backup="pg_dump and pg_restore (docs/scaling.md)",
    open_store=_open_postgres,
    open_chain=postgres_chain,
    url_problem=_postgres_url_problem,
    example=POSTGRES_EXAMPLE,
)
#: Every engine; the first is the default, which no URL names.
ENGINES = (SQLITE, POSTGRESQL)


def engine_of(location: str | None) -> Engine:
    """The engine ``location`` names: ``server.ledger`` (None: the default), or where
    a ledger is read from (a URL of an engine's scheme, else a path of the default's).
    A URL no engine's scheme names is the default's too; config refused it already
    (``ledger_url_problem``)."""
    scheme = urlsplit(location).scheme if location is not None else None
    return next((e for e in ENGINES if scheme in e.schemes), ENGINES[0])


def ledger_url_problem(url: str) -> str | None:
    """Why ``url`` cannot name the ledger (None when it can). The message never repeats
    the URL: it may carry the very password it refuses."""
    examples = [e.example for e in ENGINES if e.example is not None]
    try:
        parts = urlsplit(url)
        scheme, _ = parts.scheme, parts.port  # the port too: a bad one is a bad URL
    except ValueError:
        return "must be a URL like " + " or ".join(examples)
    for engine in ENGINES:
        if scheme in engine.schemes:
            return engine.url_problem(url)
    named = " or ".join(f"{e.schemes[0]}://" for e in ENGINES if e.schemes)
    return (
        f"must be a {named} URL (leave server.ledger out for the embedded "
        f"{ENGINES[0].name} ledger under data_dir)"
    )


def open_store(settings: LedgerSettings, *, new_ledger: bool = False) -> Store:
    """Open the ledger the settings name.

    Raises:
        LedgerError (LedgerInUse, LedgerMissing, LedgerForeign on SQLite): it cannot be
            opened; InvalidRequest: ``new_ledger`` for a PostgreSQL ledger, or on a SQLite
            ledger that is whole.
    """
    return engine_of(settings.ledger).open_store(settings, new_ledger)


def open_chain(location: str) -> AbstractContextManager[ChainSource]:
    """Open ``location`` (a data dir, its ``ledger.sqlite3``, ``sqlite:PATH``, or a
    ``postgresql://`` URL) to read its chain.

    Raises:
        InvalidRequest: no ledger there.
        LedgerError: it cannot be opened or read (not a ledger, no chain yet).
    """
    return engine_of(location).open_chain(location)


__all__ = [
    "ENGINES",
    "Engine",
    "LedgerSettings",
    "engine_of",
    "ledger_url_problem",
    "open_chain",
    "open_store",
]
