"""What the ledger knows about verified undos (SPEC §12), in the SQL both engines speak:
the latest endpoint check of a resource with its evidence, and the latest time a
reviewer accepted a verified undo of it (an ``undo_accepted`` event)."""

from __future__ import annotations

from ..jsonvalue import loads_object
from .records import StoredCheck, UndoAcceptance
from .sql_base import EngineHooks


class UndoVerbs(EngineHooks):
    """Reads for the verified-undo rule, on one connection inside the store's
    transaction (see ``store.Reader``)."""

    def latest_check(self, resource_id: str, fingerprint: str) -> StoredCheck | None:
        row = self.connection.execute(
            "SELECT id, passed, evidence, at FROM endpoint_checks WHERE resource_id = ? "
            "AND production_fingerprint = ? ORDER BY id DESC LIMIT 1",
            (resource_id, fingerprint),
        ).fetchone()
        if row is None:
            return None
        return StoredCheck(int(row[0]), bool(row[1]), loads_object(str(row[2])), float(row[3]))

    def latest_undo_acceptance(self, resource_id: str) -> UndoAcceptance | None:
        # Served by the partial index events_undo_accepted.
        row = self.connection.execute(
            "SELECT id, at, actor, detail FROM events "
            "WHERE operation = 'undo_accepted' AND target = ? ORDER BY id DESC LIMIT 1",
            (resource_id,),
        ).fetchone()
        if row is None:
            return None
        detail = loads_object(str(row[3])) if row[3] is not None else {}
        return UndoAcceptance(int(row[0]), float(row[1]), str(row[2]), detail)
