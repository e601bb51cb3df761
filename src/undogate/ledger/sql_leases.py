"""The ledger's verbs on leases, in the SQL both engines speak (docs/scaling.md).

A gateway process holds a lease: a row it renews every few seconds (``leases``). Every
action it starts and every job it moves to ``applying`` or ``undoing`` names that lease,
so recovery can tell a write whose process is gone (its lease expired, or ended when it
closed) from a live process's write in flight, and settles only the first. Rows from a
ledger of one owner (before leases) name none (NULL): that owner is gone.

Time is the database's (``_clock``), never a process's, so the expiry of a process on
another machine is judged by one clock (on SQLite every process is on one machine).
"""

from __future__ import annotations

from .records import Answer
from .sql_base import EngineHooks

_RUNNING = "('applying', 'undoing')"
_HOLDS_JOB = (
    "SELECT 1 FROM jobs WHERE id = ? AND state IN "  # noqa: S608 - constants only
    + _RUNNING
    + " AND runner_lease IS NOT DISTINCT FROM ?"
)
_RUNNER_EXPIRY = (
    "SELECT leases.expires_at FROM jobs JOIN leases ON leases.id = jobs.runner_lease "  # noqa: S608 - constants only
    "WHERE jobs.id = ? AND leases.ended_at IS NULL AND jobs.state IN " + _RUNNING
)


class LeaseVerbs(EngineHooks):
    """Leases and what recovery asks of them, inside the transaction the store opened."""

    @property
    def own_lease(self) -> str | None:
        return self.lease_id

    def open_leases(self) -> frozenset[str]:
        rows = self.connection.execute("SELECT id FROM leases WHERE ended_at IS NULL").fetchall()
        return frozenset(str(r[0]) for r in rows)

    def runner_lease_expiry(self, job_id: str) -> float | None:
        row = self.connection.execute(_RUNNER_EXPIRY, (job_id,)).fetchone()
        return None if row is None else float(row[0])

    def end_expired_leases(self) -> list[str]:
        now = self._clock()
        # Never this process's own: it is alive (it is asking), so its writes in flight
        # are still in flight; its heartbeat renews the lease.
        rows = self.connection.execute(
            "SELECT id FROM leases WHERE ended_at IS NULL AND expires_at <= ? "  # noqa: S608
            "AND id IS DISTINCT FROM ?" + self.skip_locked,
            (now, self.lease_id),
        ).fetchall()
        ended = [str(r[0]) for r in rows]
        self.connection.executemany(
            "UPDATE leases SET ended_at = ?, ended_reason = 'expired' WHERE id = ?",
            [(now, lease) for lease in ended],
        )
        return ended

    def job_runners(self) -> dict[str, str | None]:
        return {
            str(r[0]): r[1]
            for r in self.connection.execute(
                "SELECT id, runner_lease FROM jobs WHERE state IN " + _RUNNING  # noqa: S608
            ).fetchall()
        }

    def holds_job(self, job_id: str) -> Answer[bool]:
        # The check locks the row it finds (``for_update``). Under READ COMMITTED a row
        # another write holds is checked again once that write commits.
        found = self.connection.execute(_HOLDS_JOB + self.for_update, (job_id, self.lease_id))
        return self._answer(found, lambda cursor: cursor.fetchone() is not None)
