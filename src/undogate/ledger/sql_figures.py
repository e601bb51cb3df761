"""What a scrape reads of the ledger (``metrics.exposition``), in the SQL both engines
speak: each count through a partial index, so it costs what is open now, never the
ledger's history."""

from __future__ import annotations

from .records import OpenLease, OperatingFigures
from .sql_base import EngineHooks

# Spelled as the partial indexes spell them (changes_live, actions_in_flight,
# webhook_outbox_due, leases_open): SQLite uses one only for a query that repeats it.
_FIGURES = (
    "SELECT "
    "(SELECT COUNT(*) FROM changes WHERE state IN ('applied', 'uncertain') "
    "AND state = 'uncertain'), "
    "(SELECT COUNT(DISTINCT resource_id) FROM changes WHERE state IN ('applied', 'uncertain') "
    "AND state = 'uncertain'), "
    "(SELECT COUNT(*) FROM actions WHERE status = 'dispatching'), "
    "(SELECT COUNT(*) FROM webhook_outbox WHERE status = 'pending'), "
    "(SELECT MIN(created_at) FROM webhook_outbox WHERE status = 'pending')"
)


class FigureVerbs(EngineHooks):
    """The operating figures, on one connection inside the transaction the store opened."""

    def operating_figures(self) -> OperatingFigures:
        now = self._clock()
        counts = self.connection.execute(_FIGURES)
        leases = self.connection.execute(
            "SELECT id, holder, renewed_at FROM leases WHERE ended_at IS NULL ORDER BY id"
        )
        uncertain, quarantined, in_flight, pending, oldest = counts.fetchone()
        return OperatingFigures(
            uncertain_changes=int(uncertain),
            quarantined_resources=int(quarantined),
            writes_in_flight=int(in_flight),
            webhooks_pending=int(pending),
            oldest_webhook_s=max(0.0, now - float(oldest)) if oldest is not None else 0.0,
            leases=tuple(
                OpenLease(str(r[0]), str(r[1]), max(0.0, now - float(r[2])))
                for r in leases.fetchall()
            ),
        )


__all__ = ["FigureVerbs"]
