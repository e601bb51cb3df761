"""Why a preview cannot be confirmed, said once per blocked change: one sentence, what to
do, the values the job expected against what the resource holds now, and the job in the
way. When the resource moved since the job was prepared and undogate's own applied job
holds exactly the values it shows now, that job is named (one this key may see), rather
than a guess at "someone else".

The comparison reads the views every surface shares (a field table, a document's text),
so it knows no resource kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import views
from ..errors import UndogateError
from ..jobs import Job, JobState
from ..operations.inbox import InboxFilter
from ..service import Reader, Service
from .present import blocking_job, objects
from .refusals import blocked_words

#: How many of the resource's newest applied jobs are compared with what it shows now.
CANDIDATES = 10


async def blocked_changes(
    service: Service, reader: Reader, job: Job, page: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """For each blocker of a preview (``present.preview_page``): ``sentence``,
    ``next_step``, ``change`` (the preview's change), ``expected`` (rows of field, what the
    job expected, what is there now), ``versions`` (expected, now) for a whole document,
    ``job`` in the way and ``job_applied`` (it is undogate's own applied job)."""
    view = page["view"]
    operation = str(view["operation"])
    side = "after" if operation == "undo" else "before"
    shown = {str(c["index"]): c for c in page["changes"]}
    recorded = {str(c["index"]): c for c in objects(views.job_receipt(job)["changes"])}
    out: list[dict[str, Any]] = []
    for blocker in view["blockers"]:
        index = str(blocker.get("change"))
        code = str(blocker.get("code"))
        change, kept = shown.get(index), recorded.get(index)
        if change is None or kept is None:
            continue
        sentence, next_step = blocked_words(code, operation)
        in_the_way = blocking_job(blocker)
        applied = False
        if in_the_way is None and code == "conflict":
            in_the_way = await _applied_job_holding(service, reader, job, change)
            applied = in_the_way is not None
        out.append(
            {
                "code": code,
                "sentence": sentence,
                "next_step": next_step,
                "change": change,
                "expected": _expected_rows(kept, change, side),
                "versions": (
                    kept.get("applied_version" if side == "after" else "prepared_version"),
                    change.get("current_version"),
                ),
                "job": in_the_way,
                "job_applied": applied,
            }
        )
    return out


def _expected_rows(
    kept: Mapping[str, Any], change: Mapping[str, Any], side: str
) -> list[dict[str, Any]]:
    """Per field of the job: the value it expected (``side`` of the recorded change) and
    the value the resource holds now, when the change is a field table."""
    if "rows" not in kept or "rows" not in change:
        return []
    now = {str(r["field"]): r for r in objects(change["rows"])}
    rows: list[dict[str, Any]] = []
    for row in objects(kept["rows"]):
        current = now.get(str(row["field"]), {})
        rows.append(
            {
                "field": row["field"],
                "expected": row.get(side),
                "expected_present": bool(row.get(f"{side}_present")),
                "now": current.get("current"),
                "now_present": bool(current.get("current_present")),
            }
        )
    for row in rows:
        row["differs"] = (row["expected_present"], row["expected"]) != (
            row["now_present"],
            row["now"],
        )
    return rows


async def _applied_job_holding(
    service: Service, reader: Reader, job: Job, change: Mapping[str, Any]
) -> str | None:
    """The newest applied job this key may see whose change on the same resource wrote
    exactly what the resource shows now (for the fields both jobs touch), if any."""
    resource = str(change["resource"])
    wanted = InboxFilter(
        states=(JobState.APPLIED, JobState.PARTIALLY_APPLIED),
        resource=resource,
        limit=CANDIDATES,
    )
    try:
        found = await service.reviewers.inbox(reader, wanted)
    except UndogateError:
        return None
    for row in found.rows:
        if row.id == job.id:
            continue
        try:
            other = await service.reviewers.job(reader, row.id)
        except UndogateError:
            continue
        for wrote in objects(views.job_receipt(other)["changes"]):
            same = wrote["resource"] == resource and wrote.get("record_id") == change.get(
                "record_id"
            )
            if same and wrote["state"] == "applied" and _wrote_what_is_there(wrote, change):
                return other.id
    return None


def _wrote_what_is_there(wrote: Mapping[str, Any], change: Mapping[str, Any]) -> bool:
    if "rows" in wrote and "rows" in change:
        after = {str(r["field"]): r for r in objects(wrote["rows"])}
        shared = [r for r in objects(change["rows"]) if str(r["field"]) in after]
        return bool(shared) and all(
            (bool(after[str(r["field"])].get("after_present")), after[str(r["field"])]["after"])
            == (bool(r.get("current_present")), r.get("current"))
            for r in shared
        )
    if "after_text" in wrote and "current_text" in change:
        return wrote["after_text"] is not None and wrote["after_text"] == change["current_text"]
    return False


__all__ = ["blocked_changes"]
