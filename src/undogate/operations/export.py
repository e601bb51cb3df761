"""The audit export (``undogate export``): the ledger's events since a time as JSON
Lines, and its jobs as CSV, for an auditor's own tools.

What is in it, and nothing more: each event as the ledger holds it (id, time, job,
actor, access path, operation, target, the states it moved between, and its detail: a
reviewer's reason, codes, versions, counts, the names of the fields a change touched and
a document's sizes) with every field's before- and after-value left out, and per job its
id, owner, agent, state, number of changes, times, the agent's summary and
caller-supplied label. Never a value: the export spans every owner and is read with the
master key or ``keys:admin``, which never read a job's values (a job's owner
reads them through the API, or the ledger itself). Never a key or a token: no event
holds one.

Both the ledger (no server running) and the API (``/api/v1/admin/events`` and
``/api/v1/admin/jobs``, for an operator key with keys:admin or the master key) give the
same objects, a keyset page at a time; ``write_export`` writes them.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ..errors import InvalidRequest
from ..jsonvalue import JsonNumber, JsonObject, JsonValue, dumps
from ..ledger import Event, ExportedJob
from .context import Context

PAGE = 1000
JOB_COLUMNS = (
    "id",
    "owner_id",
    "agent_id",
    "state",
    "changes",
    "created_at",
    "updated_at",
    "invalidated_reason",
    "attribution_label",
    "summary",
)
EVENTS_FILE = "events.jsonl"
JOBS_FILE = "jobs.csv"


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="microseconds")


def event_json(e: Event) -> JsonObject:
    return {
        "id": JsonNumber(str(e.id)),
        "at": _iso(e.at),
        "job_id": e.job_id,
        "actor": e.actor,
        "access_path": e.access_path,
        "operation": e.operation,
        "target": e.target,
        "from_state": e.from_state,
        "to_state": e.to_state,
        "detail": _without_values(e.detail),
    }


def _without_values(detail: JsonValue) -> JsonValue:
    """``detail`` with each changed field's before/after values left out, its name kept
    (an event's diff maps a field's name to its two sides, at any depth of the detail)."""
    if isinstance(detail, dict):
        out: JsonObject = {}
        for key, value in detail.items():
            if key == "fields" and isinstance(value, dict):
                out[key] = [str(name) for name in sorted(value)]
            else:
                out[key] = _without_values(value)
        return out
    if isinstance(detail, list):
        return [_without_values(v) for v in detail]
    return detail


def job_json(j: ExportedJob) -> JsonObject:
    return {
        "id": j.id,
        "owner_id": j.owner_id,
        "agent_id": j.agent_id,
        "state": j.state.value,
        "changes": JsonNumber(str(j.change_count)),
        "created_at": _iso(j.created_at),
        "updated_at": _iso(j.updated_at),
        "invalidated_reason": j.invalidated_reason,
        "attribution_label": j.attribution_label,
        "summary": j.summary,
    }


def events_page(gw: Context, since: float, after: int, limit: int = PAGE) -> JsonObject:
    found = gw.ledger.read(lambda tx: tx.events_since(since, after, limit))
    more = len(found) == limit
    return {
        "events": [event_json(e) for e in found],
        "next_after": JsonNumber(str(found[-1].id)) if more else None,
    }


def jobs_page(gw: Context, since: float, after: str | None, limit: int = PAGE) -> JsonObject:
    found = gw.ledger.read(lambda tx: tx.jobs_since(since, after, limit))
    more = len(found) == limit
    return {"jobs": [job_json(j) for j in found], "next_after": found[-1].id if more else None}


def _cell(value: JsonValue) -> str:
    if value is None:
        return ""
    if isinstance(value, JsonNumber):
        return value.text
    text = str(value)
    # A cell a spreadsheet would run as a formula is kept as text (CSV injection).
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


Fetch = Callable[[str, JsonValue], JsonObject]  # (what, after) -> one page


def write_export(fetch: Fetch, directory: Path) -> tuple[int, int]:
    """Write ``events.jsonl`` and ``jobs.csv`` into ``directory`` (created; existing files
    are refused), page by page from ``fetch``. Returns (events, jobs) written.

    Raises:
        InvalidRequest: a file is there already, or ``fetch`` answers oddly.
    """
    directory.mkdir(parents=True, exist_ok=True)
    events_path, jobs_path = directory / EVENTS_FILE, directory / JOBS_FILE
    for path in (events_path, jobs_path):
        if path.exists():
            raise InvalidRequest(f"{path} exists: export into a new or empty folder")
    counts = []
    with events_path.open("x", encoding="utf-8", newline="\n") as out:
        counts.append(_pages(fetch, "events", lambda obj: out.write(dumps(obj) + "\n")))
    with jobs_path.open("x", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(JOB_COLUMNS)

        def row(obj: JsonObject) -> None:
            writer.writerow([_cell(obj.get(c)) for c in JOB_COLUMNS])

        counts.append(_pages(fetch, "jobs", row))
    return counts[0], counts[1]


def _pages(fetch: Fetch, what: str, write: Callable[[JsonObject], object]) -> int:
    after: JsonValue = None
    written = 0
    while True:
        page = fetch(what, after)
        items = page.get(what)
        if not isinstance(items, list):
            raise InvalidRequest(f"the export's {what} page holds no list")
        for item in items:
            if isinstance(item, dict):
                write(item)
                written += 1
        after = page.get("next_after")
        if after is None:
            return written


__all__ = [
    "EVENTS_FILE",
    "JOBS_FILE",
    "JOB_COLUMNS",
    "event_json",
    "events_page",
    "job_json",
    "jobs_page",
    "write_export",
]
