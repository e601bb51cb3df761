"""What the templates show: the JSON views (``views``) plus the words around them.

Pure. Values pass through ``views`` (the shape every surface shares) and reach the
templates as JSON text or plain strings; Jinja2 autoescaping makes them inert there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

from .. import views
from ..adapters import adapter_for
from ..invisibles import visible
from ..jobs import (
    STATES,
    AssertionKind,
    Change,
    ChangeState,
    Job,
    JobState,
    Operation,
    Preview,
    Transition,
    can_start,
)
from ..jsonvalue import JsonValue
from ..ledger import Event, JobSummary, OutboxMessage
from .exact import MARK_CLOSE, MARK_OPEN, placeholder, shown_text, with_nested

STATE_WORDS: dict[str, str] = {state: facts.words for state, facts in STATES.items()}
#: The navigation's counts of work waiting for a person: (state, one, several, view),
#: and the jobs holding an uncertain change.
NAV_COUNTS_SHOWN = (
    *(
        (s.value, *f.waiting_words, f.inbox_view)
        for s, f in STATES.items()
        if f.inbox_view is not None and f.waiting_words is not None
    ),
    ("quarantined", "quarantined", "quarantined", "quarantined"),
)

ACTION_WORDS: dict[str, str] = {
    "dispatching": "sent, outcome not yet recorded",
    "done": "done: the read-back shows the new values",
    "refused": "refused by the server: nothing changed",
    "uncertain": "uncertain: the server may or may not have changed it",
    "accepted": "observed state accepted by a reviewer",
}

OBSERVATION_WORDS: dict[str, str] = {
    "looks_applied": "It currently looks applied: the after-values are in place.",
    "looks_not_applied": "It currently looks not applied: the before-values are in place.",
    "looks_undone": "It currently looks undone: the before-values are back in place.",
    "neither": "It shows neither the before nor the after values.",
}

#: What a reviewer saw when accepting an uncertain write's observed state (a receipt's
#: write, after the fact: the preview's words say what it shows now).
ACCEPTED_WORDS: dict[str, str] = {
    "looks_applied": "Accepted as observed: the after-values were in place (it looked applied).",
    "looks_not_applied": "Accepted as observed: the before-values were in place (it looked "
    "not applied).",
    "looks_undone": "Accepted as observed: the before-values were back in place (it looked "
    "undone).",
    "neither": "Accepted as observed: it showed neither the before nor the after values.",
}

OPERATION_WORDS: dict[str, tuple[str, str]] = {
    # operation -> (what the preview is of, the confirm button's label)
    Operation.APPLY: ("Apply", "Confirm apply"),
    Operation.UNDO: ("Undo", "Confirm undo"),
    Operation.ACCEPT_OBSERVED: ("Accept observed state", "Accept observed state"),
}

CHANGE_STATE_WORDS: dict[str, str] = {
    ChangeState.PENDING: "not written yet",
    ChangeState.APPLIED: "applied",
    ChangeState.UNDONE: "undone",
    ChangeState.UNCERTAIN: "uncertain: quarantined until a reviewer accepts what is observed",
}


_WHEN = Markup(
    '<time datetime="{iso}"><span class="whole">{day}</span> '
    '<span class="whole">{clock} UTC</span></time>'
)


def when(ts: Any) -> Markup | str:
    """A ledger timestamp as UTC text, its date and its time each kept whole (a line may
    break between them, never inside ``2026-12-03``)."""
    if ts is None:
        return ""
    moment = datetime.fromtimestamp(float(ts.text if hasattr(ts, "text") else ts), UTC)
    return _WHEN.format(
        iso=moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        day=moment.strftime("%Y-%m-%d"),
        clock=moment.strftime("%H:%M:%S"),
    )


def _keep_placeholder(ch: str) -> str:
    return ch if ch in (MARK_OPEN, MARK_CLOSE) else placeholder(ch)


def shown(value: Any) -> Any:
    """Jinja's ``finalize``: every ``{{ ... }}`` on every page passes through the one rule
    of ``invisibles``, so each invisible or blank-looking character becomes a marker
    wherever a template puts text (``exact.markers_as_html`` draws it once the page is
    whole). Markup (a macro's output, already shown) keeps the placeholders it holds."""
    if hasattr(value, "__html__"):
        held = visible(value.__html__(), marker=_keep_placeholder)
        return Markup(held)  # noqa: S704 - markup already; see above
    return shown_text(str(value))


def state_words(state: str) -> str:
    return STATE_WORDS.get(state, state)


def job_verb(state: str) -> str:
    """The verb a sentence about a job in ``state`` puts before its words: "is" ("the job
    is applied"), or none where the words bring their own ("the job needs review…")."""
    return "" if state_words(state).startswith("needs ") else "is"


def objects(value: JsonValue) -> list[dict[str, Any]]:
    """A view's list of objects (``views`` builds them so), each a copy to add words to."""
    assert isinstance(value, list)
    out: list[dict[str, Any]] = []
    for item in value:
        assert isinstance(item, dict)
        out.append(dict(item))
    return out


def job_rows(agent_id: str, rows: list[JobSummary]) -> list[dict[str, Any]]:
    """An agent's job list as the jobs page shows it."""
    return objects(views.job_rows(agent_id, rows)["jobs"])


def webhook_rows(messages: list[OutboxMessage]) -> list[dict[str, Any]]:
    """The webhook outbox as the webhooks page shows it."""
    return objects(views.webhook_messages_view(messages)["messages"])


@dataclass(frozen=True)
class Buttons:
    """Which review steps the job offers now, for this key."""

    can_write: bool
    apply: bool
    undo: bool
    accept_observed: bool
    reject: bool


def buttons(job: Job, can_write: bool) -> Buttons:
    return Buttons(
        can_write=can_write,
        apply=can_start(Transition.START_APPLY, job.state) and not job.undo_started,
        undo=can_start(Transition.START_UNDO, job.state),
        accept_observed=can_start(Transition.ACCEPT_OBSERVED, job.state),
        reject=can_start(Transition.REJECT, job.state),
    )


NOT_REVERSIBLE = (
    "Not reversible by undogate: anything the external system did because of a write "
    "(a message it sent, a workflow it started). undogate cannot see such effects."
)


def job_notes(job: Job) -> list[str]:
    """Job-level limits on what can still happen, true for the job's state now."""
    notes: list[str] = []
    if job.state is JobState.UNDONE:
        notes.append("This job was undone: its undo finished, and it can never be applied again.")
    elif job.state is JobState.UNDOING:
        notes.append("An undo of this job is under way: it can never be applied again.")
    elif job.state is JobState.PARTIALLY_UNDONE:
        notes.append(
            "An undo of this job stopped part-way: each change below says whether it is "
            "undone. The job can never be applied again."
        )
    elif job.undo_started:
        notes.append("An undo of this job has started: it can never be applied again.")
    note = STATES[job.state].note
    if note is not None:
        notes.append(note.format(reason=job.invalidated_reason or "prepare a new job."))
    return notes


def rejection_reason(events: Sequence[Event]) -> str | None:
    """The reason the reviewer gave when rejecting the job (its ``reject`` event)."""
    for event in reversed(events):
        if event.operation == "reject":
            reason = (event.detail or {}).get("reason")
            return reason if isinstance(reason, str) and reason else None
    return None


def change_state_words(job: Job, change: Change) -> str:
    """Where a change stands, true for its job: one never written stays so once the job
    was rejected, invalidated or its undo started ("not written yet" promises more)."""
    never = job.state in (JobState.REJECTED, JobState.INVALIDATED) or job.undo_started
    if change.state is ChangeState.PENDING and never:
        return "never written"
    return CHANGE_STATE_WORDS.get(change.state, change.state.value)


def change_reversibility(job: Job, change: Change) -> str:
    """Whether undogate can undo this change, true for where the job and the change stand
    now (a change never applied has nothing to undo; an undone one is undone)."""
    if change.state is ChangeState.UNDONE:
        return "Undone: the undo of this change landed and read back as before the job."
    if change.state is ChangeState.PENDING:
        if job.state is JobState.REJECTED:
            return "Never applied: the job was rejected, so there is nothing to undo."
        if job.state is JobState.INVALIDATED:
            return "Never applied: the job was invalidated, so there is nothing to undo."
        if job.undo_started:
            return "Never applied, and it never will be: an undo of this job has started."
    reversibility = adapter_for(change.kind).reversibility(change)
    if change.state is ChangeState.UNCERTAIN:
        return (
            "Its outcome is uncertain: nothing can be undone until a reviewer accepts what "
            f"is observed. {reversibility}"
        )
    return reversibility


#: What the agent says about where a change's values come from (``assertion_kind``).
ASSERTION_WORDS: dict[str, str] = {
    AssertionKind.OBSERVED: "observed: the agent says it saw these values",
    AssertionKind.INFERRED: "inferred: the agent says it worked these values out",
    AssertionKind.IMPORTED: "imported: the agent says it copied these values from another system",
    AssertionKind.SUPPLIED: "supplied: the agent says it was given these values",
}
NO_ASSERTION = "The agent did not say where these values come from."


def assertion_words(assertion: Any) -> str:
    """The agent's claim about a change's values, in words (it is never checked)."""
    if not isinstance(assertion, Mapping):
        return NO_ASSERTION
    kind = str(assertion.get("value"))
    return f"Source of the values: {ASSERTION_WORDS.get(kind, kind)} (not checked by undogate)."


def record_effect(old: Any, new: Any, *, removes: bool, operation: Any) -> str | None:
    """What a collection change does to its record as a whole, read off its two sides
    (before/after on a receipt, current/planned on a preview): the undo of a create
    deletes, the undo of a delete creates. ``removes``: the new side is the record's
    absence. None for a change that neither creates nor deletes a record."""
    if operation not in ("create", "delete"):
        return None
    if removes:
        return "delete"
    if old is None and new is not None:
        return "create"
    return None


VERIFIED = "verified on a test copy"
ATTESTED = "attested only"


def trust_words(resource_id: Any, verified: Mapping[str, bool]) -> str:
    """How far the endpoint is trusted: a passing check on a test copy (docs/collections.md)
    under the resource's current identity, or only the operator's ``conditional_writes``."""
    return VERIFIED if verified.get(str(resource_id)) else ATTESTED


def job_page(
    job: Job, verified: Mapping[str, bool] | None = None, events: Sequence[Event] = ()
) -> dict[str, Any]:
    """The job receipt with the words the job page adds (``verified``: resource id →
    the latest endpoint check under its current identity passed; ``events``: the job's
    history, for the reason it was rejected)."""
    receipt = views.job_receipt(job)
    changes: list[dict[str, Any]] = []
    for change, recorded in zip(objects(receipt["changes"]), job.changes, strict=True):
        adapter = adapter_for(recorded.kind)
        change["noun"] = adapter.noun
        change["part_names"] = adapter.part_names
        change["number"] = recorded.index + 1
        change["effect"] = record_effect(
            change.get("before"),
            change.get("after"),
            removes=change.get("after") is None,
            operation=change.get("operation"),
        )
        change["assertion_words"] = assertion_words(change.get("assertion_kind"))
        change["reversibility"] = change_reversibility(job, recorded)
        change["state_words"] = change_state_words(job, recorded)
        change["trust_words"] = trust_words(change["resource"], verified or {})
        change["hunks"] = adapter.line_diff(recorded.before, recorded.after)
        if "rows" in change:
            change["rows"] = with_nested(objects(change["rows"]), "before", "after")
        changes.append(change)
    actions: list[dict[str, Any]] = []
    for action in objects(receipt["actions"]):
        action["status_words"] = ACTION_WORDS.get(str(action["status"]), action["status"])
        seen = action.get("observation")
        action["observation_words"] = ACCEPTED_WORDS.get(str(seen), str(seen)) if seen else None
        actions.append(action)
    return {
        "receipt": receipt,
        "changes": changes,
        "actions": actions,
        "notes": job_notes(job),
        "rejected_reason": rejection_reason(events),
        # Something was sent for it: only then is there a receipt of what ran.
        "has_run": bool(job.actions),
    }


def preview_page(
    preview: Preview, job: Job, now: float, verified: Mapping[str, bool] | None = None
) -> dict[str, Any]:
    """The preview's JSON view with diffs, observation sentences and the time left."""
    view = views.preview_view(preview, job, now)
    changes: list[dict[str, Any]] = []
    for change, shown_change in zip(objects(view["changes"]), preview.changes, strict=True):
        adapter = adapter_for(shown_change.kind)
        change["noun"] = adapter.noun
        change["part_names"] = adapter.part_names
        change["number"] = shown_change.index + 1
        change["effect"] = record_effect(
            change.get("current"),
            change.get("planned"),
            removes=bool(change.get("planned_absent")),
            operation=change.get("operation"),
        )
        change["assertion_words"] = assertion_words(change.get("assertion_kind"))
        change["hunks"] = adapter.line_diff(shown_change.current, shown_change.planned)
        change["trust_words"] = trust_words(change["resource"], verified or {})
        if preview.operation is Operation.ACCEPT_OBSERVED:
            # What is observed is what is current: shown against the job's two sides.
            recorded = job.changes[shown_change.index]
            change["hunks"] = adapter.line_diff(recorded.after, shown_change.current)
            if "rows" in change:
                change["observed_rows"] = _observed_rows(recorded, objects(change["rows"]))
        if "rows" in change:
            change["rows"] = with_nested(objects(change["rows"]), "current", "planned")
        observation = change.get("observation")
        change["observation_words"] = (
            OBSERVATION_WORDS.get(str(observation)) if observation else None
        )
        changes.append(change)
    # A blocked change's reason is said once, in the blockers box: not again as its note,
    # under "moved since it was prepared", nor as a "not reversible" warning.
    blocked = {_index(b.get("change")) for b in preview.blockers}
    for change in changes:
        if _index(change["index"]) in blocked:
            change["note"] = None
    # Said once, in the one warning of the page: as a sentence, with a link to the
    # resource's undo page where accepting a verified undo would make it reversible.
    undo_pages = {_index(c["index"]) for c in changes if c.get("irreversible")}
    irreversible = [
        {**i, "note": _sentence(i.get("note")), "undo_page": _index(i["index"]) in undo_pages}
        for i in objects(view["irreversible"])
        if _index(i["index"]) not in blocked
    ]
    remaining_ms = max(0, int((preview.expires_at - now) * 1000) + 1) if preview.expires_at else 0
    title, confirm_label = OPERATION_WORDS[preview.operation]
    return {
        "view": view,
        "changes": changes,
        "title": title,
        "confirm_label": confirm_label,
        "remaining_ms": remaining_ms,
        "expired": preview.expires_at is not None and now >= preview.expires_at,
        "moved": [
            c for c in changes if c.get("moved_since_prepare") and _index(c["index"]) not in blocked
        ],
        "irreversible": irreversible,
    }


def _observed_rows(recorded: Change, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each part of an uncertain change: its value before the job, the value the job
    wrote, and the value observed now (``rows``: the preview's, current side)."""
    sides = adapter_for(recorded.kind).receipt_values(recorded).get("rows")
    by_part = {str(r["field"]): r for r in objects(sides if sides is not None else [])}
    out: list[dict[str, Any]] = []
    for row in rows:
        job_sides = by_part.get(str(row["field"]), {})
        out.append(
            {
                "field": row["field"],
                "before": job_sides.get("before"),
                "before_present": bool(job_sides.get("before_present")),
                "after": job_sides.get("after"),
                "after_present": bool(job_sides.get("after_present")),
                "now": row.get("current"),
                "now_present": bool(row.get("current_present")),
            }
        )
    return out


def _sentence(note: Any) -> str | None:
    """An engine note as the start of a sentence: "irreversible: undoing…" under the
    heading "Not reversible" reads "Undoing…"."""
    if not isinstance(note, str) or not note:
        return None
    return capitalized(note.removeprefix("irreversible: "))


def capitalized(text: str) -> str:
    """An engine's message (they start in lowercase, to follow a colon) as the start of a
    sentence on a page."""
    return text[:1].upper() + text[1:]


def _index(value: Any) -> str:
    """A change index as text, whether a view's ``JsonNumber`` or the engine's int."""
    return str(value.text if hasattr(value, "text") else value)


def blocking_job(details: Mapping[str, Any]) -> str | None:
    """The job in the way of a refused step (an ordering refusal's later job, or the
    job whose uncertain outcome quarantines the resource), when the refusal names one."""
    found = details.get("later_job") or details.get("blocking_job")
    return found if isinstance(found, str) else None


def blocked_changes(job: Job, blockers: Any, operation: Operation | None) -> list[dict[str, Any]]:
    """For a refused apply or undo: each blocked change with the side it would have
    written (undo: the values before the job; apply: the job's planned values) and the
    job in its way, from the refusal's ``blockers`` details."""
    if not isinstance(blockers, list) or operation not in (Operation.APPLY, Operation.UNDO):
        return []
    side = "before" if operation is Operation.UNDO else "after"
    by_index = {_index(c["index"]): c for c in job_page(job)["changes"]}
    out: list[dict[str, Any]] = []
    for blocker in blockers:
        if not isinstance(blocker, Mapping):
            continue
        change = by_index.get(_index(blocker.get("change")))
        if change is None:
            continue
        out.append(
            {
                "change": change,
                "side": side,
                "code": str(blocker.get("code", "")),
                "message": str(blocker.get("message", "")),
                "job": blocking_job(blocker),
            }
        )
    return out


__all__ = [
    "NOT_REVERSIBLE",
    "Buttons",
    "blocked_changes",
    "blocking_job",
    "buttons",
    "capitalized",
    "job_page",
    "job_rows",
    "job_verb",
    "objects",
    "preview_page",
    "shown",
    "state_words",
    "trust_words",
    "webhook_rows",
    "when",
]
