"""Rewind plans and stopped agents (docs/rewind.md), in the SQL both engines speak.

A plan's row keeps what it selected, its steps as last walked, the one preview token
that may confirm it (by hash) and the versions that preview read; confirming claims the
token once. What the plan's steps did is the jobs' own history (their actions and
events): the row never duplicates it. A stopped agent is one row per owner and agent;
resuming clears ``stopped_at`` (both acts are events in the chain).
"""

from __future__ import annotations

import time

from ..errors import PreviewUsed
from ..jsonvalue import JsonObject, JsonValue, dumps, loads, loads_object
from .records import StoredRewind
from .sql_base import EngineHooks

_COLUMNS = (
    "id, owner_id, agent_id, created_by, selection, steps, state, token_hash, expires_at, "
    "versions, skip_blocked, confirmed_at, stopped, created_at, updated_at"
)


class RewindVerbs(EngineHooks):
    """Plans and stops, on one connection inside the store's transaction (see
    ``store.Reader`` and ``store.Transaction``)."""

    def rewind_jobs(
        self,
        owner_id: str,
        agent_id: str,
        since: float,
        until: float | None,
        label: str | None,
        session: str | None,
    ) -> list[str]:
        terms = ["owner_id = ?", "agent_id = ?", "created_at >= ?"]
        params: list[object] = [owner_id, agent_id, since]
        for term, value in (
            ("created_at < ?", until),
            ("attribution_label = ?", label),
            ("session = ?", session),
        ):
            if value is not None:
                terms.append(term)
                params.append(value)
        # Served by jobs_by_agent; each term is a constant above, never input.
        rows = self.connection.execute(
            "SELECT id FROM jobs WHERE "  # noqa: S608
            + " AND ".join(terms)
            + " AND EXISTS (SELECT 1 FROM changes ch WHERE ch.job_id = jobs.id "
            "AND (ch.applied_seq IS NOT NULL OR ch.state = 'uncertain')) ORDER BY seq DESC",
            params,
        ).fetchall()
        return [str(r[0]) for r in rows]

    def insert_rewind(self, rewind: StoredRewind) -> None:
        self.connection.execute(
            f"INSERT INTO rewinds({_COLUMNS}) "  # noqa: S608 - constant column list
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rewind.id,
                rewind.owner_id,
                rewind.agent_id,
                rewind.created_by,
                dumps(rewind.selection),
                dumps(rewind.steps),
                rewind.state,
                rewind.token_hash,
                rewind.expires_at,
                dumps(rewind.versions),
                int(rewind.skip_blocked),
                rewind.confirmed_at,
                dumps(rewind.stopped) if rewind.stopped is not None else None,
                rewind.created_at,
                rewind.updated_at,
            ),
        )

    def load_rewind(self, rewind_id: str) -> StoredRewind | None:
        row = self.connection.execute(
            f"SELECT {_COLUMNS} FROM rewinds WHERE id = ?"  # noqa: S608 - constant columns
            + self.for_update,
            (rewind_id,),
        ).fetchone()
        if row is None:
            return None
        return StoredRewind(
            id=row[0],
            owner_id=row[1],
            agent_id=row[2],
            created_by=row[3],
            selection=loads_object(row[4]),
            steps=_list(loads(row[5])),
            state=row[6],
            token_hash=row[7],
            expires_at=row[8],
            versions=loads_object(row[9]),
            skip_blocked=bool(row[10]),
            confirmed_at=row[11],
            stopped=loads_object(row[12]) if row[12] is not None else None,
            created_at=row[13],
            updated_at=row[14],
        )

    def save_rewind_preview(
        self,
        rewind_id: str,
        *,
        steps: list[JsonValue],
        token_hash: str,
        expires_at: float,
        versions: JsonObject,
    ) -> None:
        self.connection.execute(
            "UPDATE rewinds SET steps = ?, token_hash = ?, expires_at = ?, versions = ?, "
            "updated_at = ? WHERE id = ? AND state = 'planned'",
            (dumps(steps), token_hash, expires_at, dumps(versions), time.time(), rewind_id),
        )

    def claim_rewind(self, rewind_id: str, token_hash: str, *, skip_blocked: bool) -> None:
        row = self.connection.execute(
            "SELECT state, token_hash FROM rewinds WHERE id = ?"  # noqa: S608
            + self.for_update,
            (rewind_id,),
        ).fetchone()
        if row is None or row[0] != "planned" or row[1] != token_hash:
            raise PreviewUsed(
                "this plan's preview was used by another confirm, or a newer preview "
                "replaced it; preview the plan again",
                rewind=rewind_id,
            )
        now = time.time()
        self.connection.execute(
            "UPDATE rewinds SET state = 'running', skip_blocked = ?, confirmed_at = ?, "
            "updated_at = ? WHERE id = ?",
            (int(skip_blocked), now, now, rewind_id),
        )

    def finish_rewind(self, rewind_id: str, *, stopped: JsonObject | None) -> None:
        self.connection.execute(
            "UPDATE rewinds SET state = 'finished', stopped = ?, updated_at = ? WHERE id = ?",
            (dumps(stopped) if stopped is not None else None, time.time(), rewind_id),
        )

    # -- stopped agents --------------------------------------------------------------

    def agent_stopped_at(self, owner_id: str, agent_id: str) -> float | None:
        row = self.connection.execute(
            "SELECT stopped_at FROM agent_stops WHERE owner_id = ? AND agent_id = ?",
            (owner_id, agent_id),
        ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def set_agent_stopped(self, owner_id: str, agent_id: str, *, stopped: bool, by: str) -> bool:
        self._lock(f"agent:{owner_id}:{agent_id}")
        was = self.agent_stopped_at(owner_id, agent_id)
        if (was is not None) == stopped:
            return False
        self.connection.execute(
            "INSERT INTO agent_stops(owner_id, agent_id, stopped_at, stopped_by) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (owner_id, agent_id) "
            "DO UPDATE SET stopped_at = excluded.stopped_at, stopped_by = excluded.stopped_by",
            (owner_id, agent_id, time.time() if stopped else None, by),
        )
        return True


def _list(value: JsonValue) -> list[JsonValue]:
    return list(value) if isinstance(value, list) else []


__all__ = ["RewindVerbs"]
