"""The review inbox's reads, in the SQL both engines speak: one owner's jobs across the
agents a key sees, filtered, newest first, a page at a time; and the counts the
navigation shows.

Pages are keyset, never offset: the next page starts below the last job shown
(``jobs.seq < the seq of InboxQuery.after``), so page 1,000 costs what page 1 does, and
a job prepared meanwhile never shifts a page. ``jobs_by_owner`` (the inbox's migration)
serves the order across agents; ``jobs_unresolved`` the counts.

Every statement is built from constants and placeholders only: a filter adds a fixed
term and its ``?``, never its value.
"""

from __future__ import annotations

from typing import Any

from ..jobs import UNRESOLVED_STATES, ChangeState, JobState
from .records import InboxQuery, InboxRow
from .sql_base import EngineHooks

# Spelled as the partial index ``jobs_unresolved`` spells it (see sql_jobs._UNRESOLVED).
_UNRESOLVED = "j.state IN (" + ", ".join(f"'{s.value}'" for s in UNRESOLVED_STATES) + ")"
_UNCERTAIN = (
    "EXISTS (SELECT 1 FROM changes q WHERE q.job_id = j.id "  # noqa: S608 - a constant
    f"AND q.state = '{ChangeState.UNCERTAIN.value}')"
)
MAX_PAGE = 200


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _like_prefix(prefix: str) -> str:
    """``prefix`` as a LIKE pattern (``!`` escapes ``_``, which job ids contain)."""
    return prefix.lower().replace("!", "!!").replace("_", "!_").replace("%", "!%") + "%"


class InboxVerbs(EngineHooks):
    """The inbox reads, on the connection of the store's transaction."""

    def inbox(self, query: InboxQuery) -> list[InboxRow]:
        if not query.agents:
            return []
        terms = ["j.owner_id = ?", f"j.agent_id IN ({_marks(len(query.agents))})"]
        params: list[Any] = [query.owner_id, *query.agents]
        if query.states:
            terms.append(f"j.state IN ({_marks(len(query.states))})")
            params.extend(s.value for s in query.states)
        if query.quarantined:
            terms += [_UNRESOLVED, _UNCERTAIN]
        if query.resource_id is not None:
            terms.append(
                "EXISTS (SELECT 1 FROM changes r WHERE r.job_id = j.id AND r.resource_id = ?)"
            )
            params.append(query.resource_id)
        if query.since is not None:
            terms.append("j.created_at >= ?")
            params.append(query.since)
        if query.until is not None:
            terms.append("j.created_at < ?")
            params.append(query.until)
        if query.id_prefix:
            terms.append("j.id LIKE ? ESCAPE '!'")
            params.append(_like_prefix(query.id_prefix))
        if query.after is not None:
            # The page before ended at ``after``; a job id of another owner (or none)
            # starts nothing: the subquery is NULL and no row compares below it.
            terms.append("j.seq < (SELECT a.seq FROM jobs a WHERE a.id = ? AND a.owner_id = ?)")
            params += [query.after, query.owner_id]
        params.append(max(1, min(query.limit, MAX_PAGE)))
        rows = self.connection.execute(
            "SELECT j.id, j.agent_id, j.state, j.summary, j.created_at, j.updated_at, "  # noqa: S608 - constant terms
            f"(SELECT COUNT(*) FROM changes ch WHERE ch.job_id = j.id), {_UNCERTAIN} "
            f"FROM jobs j WHERE {' AND '.join(terms)} ORDER BY j.seq DESC LIMIT ?",
            params,
        ).fetchall()
        resources = self._resources([r[0] for r in rows])
        return [
            InboxRow(
                id=r[0],
                agent_id=r[1],
                state=JobState(r[2]),
                summary=r[3],
                created_at=r[4],
                updated_at=r[5],
                change_count=int(r[6]),
                resources=resources.get(r[0], ()),
                quarantined=bool(r[7]),
            )
            for r in rows
        ]

    def _resources(self, job_ids: list[str]) -> dict[str, tuple[str, ...]]:
        """Each job's resources, in change order (one statement for the whole page)."""
        if not job_ids:
            return {}
        found: dict[str, list[str]] = {}
        for job_id, resource_id in self.connection.execute(
            f"SELECT job_id, resource_id FROM changes WHERE job_id IN ({_marks(len(job_ids))}) "  # noqa: S608 - placeholders only
            "ORDER BY job_id, idx",
            job_ids,
        ):
            seen = found.setdefault(job_id, [])
            if resource_id not in seen:
                seen.append(resource_id)
        return {job_id: tuple(ids) for job_id, ids in found.items()}

    def inbox_counts(self, owner_id: str, agents: tuple[str, ...]) -> dict[str, int]:
        """Jobs per unresolved state, and ``quarantined`` (holding an uncertain change),
        for the owner's jobs of ``agents``; states with none are absent."""
        if not agents:
            return {}
        base = f"FROM jobs j WHERE j.owner_id = ? AND j.agent_id IN ({_marks(len(agents))}) AND {_UNRESOLVED}"  # noqa: E501
        params = (owner_id, *agents)
        counts = {
            str(state): int(n)
            for state, n in self.connection.execute(
                f"SELECT j.state, COUNT(*) {base} GROUP BY j.state",
                params,
            )
        }
        row = self.connection.execute(
            f"SELECT COUNT(*) {base} AND {_UNCERTAIN}",
            params,
        ).fetchone()
        if row and int(row[0]):
            counts["quarantined"] = int(row[0])
        return counts


__all__ = ["MAX_PAGE", "InboxVerbs"]
