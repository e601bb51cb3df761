"""What the templates show: the JSON views (``views``) plus the words around them.

Pure. Values pass through ``views`` (the shape every surface shares) and reach the
templates as JSON text or plain strings; Jinja2 autoescaping makes them inert there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

from .. import views
from ..adapters import adapter_for
from ..invisibles import visible
from ..jobs import STATES, ChangeState, Job, Operation, Preview, Transition, can_start
from ..jsonvalue import JsonValue
from ..ledger import JobSummary, OutboxMessage
from .exact import with_nested

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


def when(ts: Any) -> str:
    """A ledger timestamp as UTC text."""
    if ts is None:
        return ""
    value = float(ts.text if hasattr(ts, "text") else ts)
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def shown(value: Any) -> Any:
    """Jinja's ``finalize``: every ``{{ ... }}`` on every page passes through the one rule
    of ``invisibles``, so each invisible or blank-looking character is shown as
    ``⟨U+XXXX⟩`` wherever a template puts text. Markup (a macro's output, already shown)
    stays markup; the markers hold no character that needs escaping."""
    if hasattr(value, "__html__"):
        return Markup(visible(value.__html__()))  # noqa: S704 - markup already; see above
    return visible(str(value))


def state_words(state: str) -> str:
    return STATE_WORDS.get(state, state)


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
    """Job-level limits on what can still happen."""
    notes: list[str] = []
    if job.undo_started:
        notes.append("An undo of this job has started: it can never be applied again.")
    note = STATES[job.state].note
    if note is not None:
        notes.append(note.format(reason=job.invalidated_reason or "prepare a new job."))
    return notes


VERIFIED = "verified on a test copy"
ATTESTED = "attested only"


def trust_words(resource_id: Any, verified: Mapping[str, bool]) -> str:
    """How far the endpoint is trusted: a passing check on a test copy (SPEC §11) under
    the resource's current identity, or only the operator's ``conditional_writes``."""
    return VERIFIED if verified.get(str(resource_id)) else ATTESTED


def job_page(job: Job, verified: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """The job receipt with the words the job page adds (``verified``: resource id →
    the latest endpoint check under its current identity passed)."""
    receipt = views.job_receipt(job)
    changes: list[dict[str, Any]] = []
    for change, recorded in zip(objects(receipt["changes"]), job.changes, strict=True):
        adapter = adapter_for(recorded.kind)
        change["noun"] = adapter.noun
        change["reversibility"] = adapter.reversibility(recorded)
        change["state_words"] = CHANGE_STATE_WORDS.get(str(change["state"]), change["state"])
        change["trust_words"] = trust_words(change["resource"], verified or {})
        change["hunks"] = adapter.line_diff(recorded.before, recorded.after)
        if "rows" in change:
            change["rows"] = with_nested(objects(change["rows"]), "before", "after")
        changes.append(change)
    actions: list[dict[str, Any]] = []
    for action in objects(receipt["actions"]):
        action["status_words"] = ACTION_WORDS.get(str(action["status"]), action["status"])
        actions.append(action)
    return {"receipt": receipt, "changes": changes, "actions": actions, "notes": job_notes(job)}


def preview_page(
    preview: Preview, job: Job, now: float, verified: Mapping[str, bool] | None = None
) -> dict[str, Any]:
    """The preview's JSON view with diffs, observation sentences and the time left."""
    view = views.preview_view(preview, job, now)
    changes: list[dict[str, Any]] = []
    for change, shown_change in zip(objects(view["changes"]), preview.changes, strict=True):
        adapter = adapter_for(shown_change.kind)
        change["noun"] = adapter.noun
        change["hunks"] = adapter.line_diff(shown_change.current, shown_change.planned)
        change["trust_words"] = trust_words(change["resource"], verified or {})
        if "rows" in change:
            change["rows"] = with_nested(objects(change["rows"]), "current", "planned")
        observation = change.get("observation")
        change["observation_words"] = (
            OBSERVATION_WORDS.get(str(observation)) if observation else None
        )
        changes.append(change)
    # A blocked change's reason is said once, in the blockers box: not again as its note,
    # under "moved since it was prepared", nor under "not reversible".
    blocked = {_index(b.get("change")) for b in preview.blockers}
    for change in changes:
        if _index(change["index"]) in blocked:
            change["note"] = None
    irreversible = [
        {**i, "note": None} if _index(i["index"]) in blocked else i
        for i in objects(view["irreversible"])
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
        "blocked": bool(preview.blockers),
        "irreversible": irreversible,
    }


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
    "job_page",
    "job_rows",
    "objects",
    "preview_page",
    "shown",
    "state_words",
    "trust_words",
    "webhook_rows",
    "when",
]
