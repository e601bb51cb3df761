"""The review inbox (docs/operating.md): every job a reviewer may act on, across agents, in one
list: waiting, needs review, quarantined, recent; filtered by state, agent, resource and
time; searched by id; a keyset page at a time. And bulk reject of stale jobs.

What a filter means is decided here once, for the web page, the API and the CLI; who
may see which jobs is decided by the service, which builds the ``InboxQuery``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ..errors import InvalidRequest, UndogateError
from ..jobs import WAITING_VIEWS, Actor, JobState
from ..jsonvalue import JsonNumber, JsonObject, JsonValue
from ..ledger import InboxQuery, InboxRow
from ..views import review_path
from .context import Context
from .reject import check_reason, reject_job

#: The inbox's views, in the order the navigation shows them: the states each keeps
#: (none: every state), and whether it keeps only jobs holding an uncertain change.
VIEWS: dict[str, tuple[tuple[JobState, ...], bool]] = {
    **{view: (states, False) for view, states in WAITING_VIEWS.items()},
    "quarantined": ((), True),
    "recent": ((), False),
}
VIEW_WORDS = {
    "waiting": "Waiting for review",
    "needs_review": "Needs review",
    "quarantined": "Quarantined",
    "recent": "Recent",
}
PAGE = 100
MAX_SEARCH = 64
MAX_BULK = 100
_DURATION = re.compile(r"(\d{1,6})([mhd])")
_UNIT_S = {"m": 60, "h": 3600, "d": 86400}
_SEARCH = re.compile(r"[a-z0-9_]{1,64}")


@dataclass(frozen=True)
class InboxFilter:
    """What a reviewer asked for, parsed and checked; visibility is not its concern."""

    view: str = "recent"
    states: tuple[JobState, ...] = ()
    agent: str | None = None
    resource: str | None = None
    since: float | None = None
    until: float | None = None
    search: str | None = None
    after: str | None = None
    limit: int = PAGE

    def to_reject(self) -> InboxFilter:
        """The waiting jobs these filters select, the first ``MAX_BULK`` (bulk reject)."""
        return replace(self, view="waiting", after=None, limit=MAX_BULK)

    def query(self, owner_id: str, agents: tuple[str, ...]) -> InboxQuery:
        """The ledger's query for these filters over ``agents`` (those the key sees)."""
        view_states, quarantined = VIEWS[self.view]
        states = self.states or view_states
        if self.states and view_states:
            states = tuple(s for s in self.states if s in view_states)
            if not states:  # "waiting" and state=applied: nothing, not everything
                agents = ()
        return InboxQuery(
            owner_id=owner_id,
            agents=agents,
            states=states,
            quarantined=quarantined,
            resource_id=self.resource,
            since=self.since,
            until=self.until,
            id_prefix=self.search,
            after=self.after,
            limit=self.limit + 1,  # one more, to know whether another page follows
        )


@dataclass(frozen=True)
class InboxPage:
    rows: tuple[InboxRow, ...]
    next_after: str | None  # the ``after`` of the next page; None: this is the last
    counts: Mapping[str, int]


def parse_time(text: str, now: float, *, name: str) -> float:
    """A time as a reviewer types it: ``7d``, ``12h``, ``30m`` ago, or an ISO 8601
    date or time (UTC unless it says otherwise).

    Raises:
        InvalidRequest: neither.
    """
    text = text.strip()
    relative = _DURATION.fullmatch(text)
    if relative:
        return now - int(relative.group(1)) * _UNIT_S[relative.group(2)]
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequest(
            f"{name} must be a duration ago (30m, 12h, 7d) or an ISO 8601 date or time "
            "(2026-12-01, 2026-12-01T09:30Z)",
            field=name,
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def parse_filter(params: Mapping[str, list[str]], now: float) -> InboxFilter:
    """Query parameters (each name to its values), as the API and the web page read
    them: ``view``, ``state`` (repeatable), ``agent``, ``resource``, ``since``, ``until``,
    ``id``, ``after``, ``limit``.

    Raises:
        InvalidRequest: an unknown view or state, a bad time, search or limit.
    """

    def one(name: str) -> str | None:
        values = [v.strip() for v in params.get(name, []) if v.strip()]
        if len(values) > 1:
            raise InvalidRequest(f"give {name} once", field=name)
        if values and len(values[0]) > 200:
            raise InvalidRequest(f"{name} is too long", field=name)
        return values[0] if values else None

    view = one("view") or "recent"
    if view not in VIEWS:
        raise InvalidRequest(f"view must be one of {', '.join(VIEWS)}", field="view")
    states = []
    for name in params.get("state", []):
        if not name.strip():  # a form's "any"
            continue
        try:
            states.append(JobState(name.strip()))
        except ValueError:
            raise InvalidRequest(
                f"state must be one of {', '.join(s.value for s in JobState)}", field="state"
            ) from None
    search = one("id")
    if search is not None:
        search = search.lower()
        if not _SEARCH.fullmatch(search):
            raise InvalidRequest("search a job id by its start: letters, digits, _", field="id")
    limit_text = one("limit")
    limit = PAGE
    if limit_text is not None:
        if not (limit_text.isascii() and limit_text.isdigit()) or not 1 <= int(limit_text) <= PAGE:
            raise InvalidRequest(f"limit must be 1 to {PAGE}", field="limit")
        limit = int(limit_text)
    since, until = one("since"), one("until")
    return InboxFilter(
        view=view,
        states=tuple(dict.fromkeys(states)),
        agent=one("agent"),
        resource=one("resource"),
        since=parse_time(since, now, name="since") if since else None,
        until=parse_time(until, now, name="until") if until else None,
        search=search,
        after=one("after"),
        limit=limit,
    )


def read_inbox(gw: Context, query: InboxQuery, limit: int, counted: tuple[str, ...]) -> InboxPage:
    """One page (``query`` asks for ``limit`` + 1 rows), and the counts per state of the
    owner's jobs of the ``counted`` agents, from one snapshot."""
    rows, counts = gw.ledger.read(
        lambda tx: (tx.inbox(query), tx.inbox_counts(query.owner_id, counted))
    )
    more = len(rows) > limit
    shown = tuple(rows[:limit])
    return InboxPage(shown, shown[-1].id if more and shown else None, counts)


@dataclass(frozen=True)
class BulkOutcome:
    job_id: str
    rejected: bool
    code: str | None = None  # why not
    message: str | None = None


def check_bulk(job_ids: tuple[str, ...], reason: str | None) -> None:
    """Raises: InvalidRequest: no job, more than ``MAX_BULK``, or a bad reason (checked
    once, before any job is rejected)."""
    if not job_ids or len(job_ids) > MAX_BULK:
        raise InvalidRequest(f"name 1 to {MAX_BULK} jobs to reject")
    check_reason(reason)


def reject_many(
    gw: Context, actor: Actor, job_ids: tuple[str, ...], reason: str | None
) -> list[BulkOutcome]:
    """Reject each job (the caller decided it may see each); one that moved on since the
    reviewer confirmed the list is left as it is, with why. Never stops half-way on one
    job's refusal.

    Raises:
        InvalidRequest: as ``check_bulk``.
    """
    check_bulk(job_ids, reason)
    out = []
    for job_id in dict.fromkeys(job_ids):
        try:
            reject_job(gw, actor, gw.get_job(actor.owner_id, job_id), reason)
        except UndogateError as exc:
            out.append(BulkOutcome(job_id, False, exc.code, exc.message))
        else:
            out.append(BulkOutcome(job_id, True))
    return out


def _number(value: float | int) -> JsonNumber:
    return JsonNumber(repr(value) if isinstance(value, float) else str(value))


def inbox_view(page: InboxPage) -> JsonObject:
    """The inbox as the API answers it (ids, states, agents, resources, times; never a
    value)."""
    jobs: list[JsonValue] = [
        {
            "id": r.id,
            "agent": r.agent_id,
            "state": r.state.value,
            "quarantined": r.quarantined,
            "summary": r.summary,
            "resources": list(r.resources),
            "changes": _number(r.change_count),
            "created_at": _number(r.created_at),
            "updated_at": _number(r.updated_at),
            "review_path": review_path(r.id),
        }
        for r in page.rows
    ]
    counts: JsonObject = {k: _number(v) for k, v in sorted(page.counts.items())}
    return {"jobs": jobs, "next_after": page.next_after, "counts": counts}


__all__ = [
    "MAX_BULK",
    "PAGE",
    "VIEWS",
    "VIEW_WORDS",
    "BulkOutcome",
    "InboxFilter",
    "InboxPage",
    "check_bulk",
    "inbox_view",
    "parse_filter",
    "parse_time",
    "read_inbox",
    "reject_many",
]
