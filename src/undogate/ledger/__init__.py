"""The ledger: every job, change, action, preview, event and credential, and the one door
to them. Only this package knows SQL or a database driver.

- ``store``: the protocol (``Store``, and the ``Reader`` and ``Transaction`` verbs
  its ``read`` and ``write`` hand to a caller's function); no SQL in it.
- ``records``: the plain values the verbs return.
- ``sql_jobs``, ``sql_admin``, ``sql_undo``, ``sql_leases``, ``sql_sessions``,
  ``sql_inbox``, ``sql_export``, ``sql_outbox``, ``sql_passkeys``: the verbs, in the SQL
  both engines speak, listed once as ``sql_verbs.SqlVerbs``; ``sql_base``: what they ask
  of an engine (a connection, the locks); ``sql_chain``: the one insert into ``events``,
  hash-chained by ``undogate.chain`` (pure; docs/proof.md), and ``chain_source``: a ledger
  opened read-only to walk that chain.
- ``engines``: each engine described once (``Engine``: what names it, how it opens,
  reads its chain and checks its URL), and the one switch, ``engine_of``;
  ``open_store(settings)`` and ``open_chain(location)`` ask it.
- ``sqlite``: the SQLite engine (``SQLiteStore``), its schema in ``migrations``;
  ``sqlite_files``: who may open its files, and where; ``sqlite_leases``: its leases.
- ``leases``: a process's lease on a shared ledger, renewed by a heartbeat (both
  engines; ``postgres_leases``, ``sqlite_leases``).
- ``postgres``: the PostgreSQL engine (``PostgresStore``), its schema in
  ``postgres_schema``; ``postgres_copy`` moves a SQLite ledger into it.
- ``identity``: which ledger a data dir holds, and whether it is whole.
- ``backup``: a consistent copy of a SQLite ledger file, and its restore.

Callers import from here: ``open_store(config.server)`` opens the ledger the config
names (``Ledger.open(data_dir)``: the SQLite ledger of a data dir); code that only uses a
ledger takes a ``Store``; code that must know what the engine can do asks
``engine_of(config.server.ledger)``.
"""

from __future__ import annotations

from .engines import ENGINES, Engine, engine_of, ledger_url_problem, open_chain, open_store
from .migrations import SCHEMA_VERSION
from .records import (
    Admission,
    Answer,
    EarlierJob,
    Event,
    ExportedJob,
    InboxQuery,
    InboxRow,
    InFlightAction,
    JobSummary,
    LedgerUsage,
    OpenChange,
    OpenLease,
    OperatingFigures,
    OutboxMessage,
    StoredCheck,
    StoredCredential,
    StoredEnrolment,
    StoredPasskey,
    StoredPreview,
    StoredRewind,
    StoredWebPreview,
    StoredWebSession,
    UndoAcceptance,
    UnfinishedJob,
)
from .sqlite import DB_NAME, SQLiteStore
from .sqlite_files import LOCK_NAME
from .store import Reader, Store, Transaction

#: The default engine, under the name every caller knows: ``Ledger.open(data_dir)``.
Ledger = SQLiteStore

__all__ = [
    "DB_NAME",
    "ENGINES",
    "LOCK_NAME",
    "SCHEMA_VERSION",
    "Admission",
    "Answer",
    "EarlierJob",
    "Engine",
    "Event",
    "ExportedJob",
    "InFlightAction",
    "InboxQuery",
    "InboxRow",
    "JobSummary",
    "Ledger",
    "LedgerUsage",
    "OpenChange",
    "OpenLease",
    "OperatingFigures",
    "OutboxMessage",
    "Reader",
    "SQLiteStore",
    "Store",
    "StoredCheck",
    "StoredCredential",
    "StoredEnrolment",
    "StoredPasskey",
    "StoredPreview",
    "StoredRewind",
    "StoredWebPreview",
    "StoredWebSession",
    "Transaction",
    "UndoAcceptance",
    "UnfinishedJob",
    "engine_of",
    "ledger_url_problem",
    "open_chain",
    "open_store",
]
