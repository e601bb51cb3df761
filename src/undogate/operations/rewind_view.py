"""A rewind plan as every surface shows it (API, review pages, CLI). Pure.

Values are the jobs' own (what each job wrote, what its undo restores) and, for a blocked
step, what the resource will show when the step's turn comes: inert data, exactly as
the receipts carry them.
"""

from __future__ import annotations

from ..adapters import adapter_for
from ..jsonvalue import JsonObject, JsonValue
from ..views import caller_supplied, number, request_view
from .rewind import RewindPlan, RewindPreview
from .rewind_plan import StepVerdict

#: The verdicts in the order a plan's counts list them.
VERDICTS = tuple(v.value for v in StepVerdict)


def rewind_path(rewind_id: str) -> str:
    """Where a person reviews a plan."""
    return f"/rewinds/{rewind_id}"


def plan_view(plan: RewindPlan) -> JsonObject:
    """The plan, newest step first, and once it ran, what each step and job came to."""
    outcomes = dict((s.number, o) for s, o in plan.outcomes())
    steps: list[JsonValue] = []
    counts = dict.fromkeys(VERDICTS, 0)
    for step in plan.steps:
        counts[step.verdict.value] += 1
        row = step.to_json()
        row["step"] = number(step.number)
        row["change"] = number(step.change)
        job = plan.jobs.get(step.job_id)
        if job is not None:
            row["summary"] = caller_supplied(job.summary)
            change = job.changes[step.change]
            row["fields"] = list(change.fields)
            row["values"] = adapter_for(change.kind).receipt_values(change)
        row["outcome"] = outcomes.get(step.number)
        steps.append(row)
    stored = plan.stored
    selection = plan.selection
    view: JsonObject = {
        "rewind_id": plan.id,
        "agent": selection.agent_id,
        "since": number(selection.since),
        "until": number(selection.until) if selection.until is not None else None,
        "label": caller_supplied(selection.label),
        "session": caller_supplied(selection.session),
        "state": stored.state,
        "created_at": number(stored.created_at),
        "created_by": stored.created_by,
        "confirmed_at": number(stored.confirmed_at) if stored.confirmed_at is not None else None,
        "skip_blocked": stored.skip_blocked,
        "counts": {k: number(v) for k, v in counts.items()},
        "steps": steps,
        "jobs": {job_id: outcome for job_id, outcome in plan.job_outcomes().items()},
        "stopped": stored.stopped,
        "review_url": rewind_path(plan.id),
    }
    return view


def preview_view(preview: RewindPreview, now: float) -> JsonObject:
    """The plan as this preview walked it, every exact request in order, the token."""
    view = plan_view(preview.plan)
    requests: list[JsonValue] = []
    for undo, described in zip(preview.undos, preview.requests, strict=True):
        shown = request_view(described)
        shown["step"] = number(undo.step.number)
        shown["job"] = undo.step.job_id
        shown["if_match_from_step"] = (
            number(undo.if_match_from) if undo.if_match_from is not None else None
        )
        requests.append(shown)
    blocked = [s.number for s in preview.plan.steps if s.verdict is StepVerdict.BLOCKED]
    view.update(
        {
            "preview_token": preview.token,
            "expires_at": number(preview.expires_at),
            "expires_in_s": number(max(0, round(preview.expires_at - now))),
            "requests": requests,
            "skip_blocked_leaves": [number(n) for n in blocked],
            "passkey_challenge": preview.passkey_challenge,
        }
    )
    return view


__all__ = ["VERDICTS", "plan_view", "preview_view", "rewind_path"]
