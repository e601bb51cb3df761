"""The audit export's reads (``undogate export``), in the SQL both engines speak: events
and jobs since a time, a page at a time, keyset by the events' id and the jobs' order of
preparation (never offset), so a long history streams in bounded pages."""

from __future__ import annotations

from ..jobs import JobState
from ..jsonvalue import loads_object
from .records import Event, ExportedJob
from .sql_base import EngineHooks

MAX_EXPORT_PAGE = 5000


class ExportVerbs(EngineHooks):
    """The export reads, on the connection of the store's transaction."""

    def events_since(self, since: float, after_id: int, limit: int) -> list[Event]:
        rows = self.connection.execute(
            "SELECT id, job_id, at, actor, access_path, operation, target, from_state, "
            "to_state, detail FROM events WHERE id > ? AND at >= ? ORDER BY id LIMIT ?",
            (after_id, since, max(1, min(limit, MAX_EXPORT_PAGE))),
        ).fetchall()
        return [
            Event(
                id=r[0],
                job_id=r[1],
                at=r[2],
                actor=r[3],
                access_path=r[4],
                operation=r[5],
                target=r[6],
                from_state=r[7],
                to_state=r[8],
                detail=loads_object(r[9]) if r[9] else None,
            )
            for r in rows
        ]

    def jobs_since(self, since: float, after: str | None, limit: int) -> list[ExportedJob]:
        """Jobs that moved at or after ``since`` (``updated_at``), in the order they were
        prepared, after the job ``after``."""
        cursor = "AND j.seq > (SELECT a.seq FROM jobs a WHERE a.id = ?) " if after else ""
        params: tuple[object, ...] = (since, after) if after else (since,)
        rows = self.connection.execute(
            "SELECT j.id, j.owner_id, j.agent_id, j.state, j.summary, j.attribution_label, "  # noqa: S608 - constant terms
            "j.created_at, j.updated_at, "
            "(SELECT COUNT(*) FROM changes ch WHERE ch.job_id = j.id), j.invalidated_reason "
            f"FROM jobs j WHERE j.updated_at >= ? {cursor}ORDER BY j.seq LIMIT ?",
            (*params, max(1, min(limit, MAX_EXPORT_PAGE))),
        ).fetchall()
        return [
            ExportedJob(
                id=r[0],
                owner_id=r[1],
                agent_id=r[2],
                state=JobState(r[3]),
                summary=r[4],
                attribution_label=r[5],
                created_at=r[6],
                updated_at=r[7],
                change_count=int(r[8]),
                invalidated_reason=r[9],
            )
            for r in rows
        ]


__all__ = ["MAX_EXPORT_PAGE", "ExportVerbs"]
