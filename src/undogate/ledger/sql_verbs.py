"""The verbs of ``store.Transaction``, listed once: the eleven mixins, by topic, in the SQL
both engines speak. An engine's transaction class is ``SqlVerbs`` plus its connection
and its locks (``sql_base.EngineHooks``)."""

from __future__ import annotations

from .sql_admin import AdminVerbs
from .sql_export import ExportVerbs
from .sql_figures import FigureVerbs
from .sql_inbox import InboxVerbs
from .sql_jobs import JobVerbs
from .sql_leases import LeaseVerbs
from .sql_outbox import OutboxVerbs
from .sql_passkeys import PasskeyVerbs
from .sql_rewinds import RewindVerbs
from .sql_sessions import SessionVerbs
from .sql_undo import UndoVerbs


class SqlVerbs(
    JobVerbs,
    AdminVerbs,
    LeaseVerbs,
    SessionVerbs,
    UndoVerbs,
    InboxVerbs,
    ExportVerbs,
    OutboxVerbs,
    PasskeyVerbs,
    RewindVerbs,
    FigureVerbs,
):
    """Every verb a transaction offers, over the engine's ``connection``."""


__all__ = ["SqlVerbs"]
