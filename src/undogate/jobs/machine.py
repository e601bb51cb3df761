"""The job state machine: the states and what each means (``STATES``), the transitions
and the states an operation settles in. Pure: no I/O, no framework.

The machine (drawn in docs/state-machine.md)::

    prepared ──confirm apply──▶ applying ──▶ applied | partially_applied | needs_review
                                   │  (a certain refusal before any write lands)
                                   └──────────▶ prepared
    applied | partially_applied ──confirm undo──▶ undoing ──▶ undone | partially_undone
                                                     │       | needs_review
                                                     └─(certain refusal, nothing undone)─▶ back
    partially_applied ──resume──▶ applying        partially_undone ──undo again──▶ undoing
    needs_review ──accept observed──▶ applied | partially_applied | prepared
                                     | undone | partially_undone
    prepared ──reject──▶ rejected
    any unfinished state but needs_review ──identity changed──▶ invalidated
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

from ..errors import TransitionNotAllowed


class JobState(StrEnum):
    PREPARED = "prepared"
    APPLYING = "applying"
    APPLIED = "applied"
    PARTIALLY_APPLIED = "partially_applied"
    NEEDS_REVIEW = "needs_review"
    UNDOING = "undoing"
    UNDONE = "undone"
    PARTIALLY_UNDONE = "partially_undone"
    REJECTED = "rejected"
    INVALIDATED = "invalidated"


class Operation(StrEnum):
    APPLY = "apply"
    UNDO = "undo"
    ACCEPT_OBSERVED = "accept_observed"


class ChangeState(StrEnum):
    """Where one change stands on its resource."""

    PENDING = "pending"
    APPLIED = "applied"
    UNDONE = "undone"
    UNCERTAIN = "uncertain"


class ActionStatus(StrEnum):
    """One external write. ``dispatching`` is the intent, committed before the request."""

    DISPATCHING = "dispatching"
    DONE = "done"
    REFUSED = "refused"
    UNCERTAIN = "uncertain"
    ACCEPTED = "accepted"


class Observation(StrEnum):
    """What a reconciliation read shows for an uncertain action."""

    LOOKS_APPLIED = "looks_applied"
    LOOKS_NOT_APPLIED = "looks_not_applied"
    LOOKS_UNDONE = "looks_undone"
    NEITHER = "neither"


class AssertionKind(StrEnum):
    OBSERVED = "observed"
    INFERRED = "inferred"
    IMPORTED = "imported"
    SUPPLIED = "supplied"


@dataclass(frozen=True)
class StateFacts:
    """What one job state means beyond the machine, for every surface that shows it or
    acts on it. Read from ``STATES``, never spelled again (tests/test_jobs.py checks)."""

    words: str  # how the review pages and the reviewer's CLI name it
    for_agent: str  # what it means to the agent that prepared the job (``job_status``)
    webhook: str | None = None  # the event a move into it announces (``webhooks.events``)
    inbox_view: str | None = None  # the inbox view listing it as waiting for a person
    waiting_words: tuple[str, str] | None = None  # a count of it in words: (one, several)
    unresolved: bool = False  # the quotas count it (docs/limits.md)
    terminal: bool = False  # nothing can happen to it any more
    running: bool = False  # a confirm is sending its writes (the job names its lease)
    ends_well: bool = False  # a confirm left it as the reviewer asked (the CLI exits 0)
    note: str | None = None  # what the job's page adds (``{reason}``: why invalidated)


_S = JobState
#: Every state's facts. ``applied`` is resolved: a person confirmed it and every write
#: landed; undoing it later is that person's choice, not work the agent left waiting.
#: (The warning before revoking an owner's key counts applied jobs too: there, an undo
#: the owner could still run matters.)
STATES: Final[dict[JobState, StateFacts]] = {
    _S.PREPARED: StateFacts(
        words="prepared, waiting for review",
        for_agent="waiting for a person",
        webhook="job.prepared",
        inbox_view="waiting",
        waiting_words=("waiting", "waiting"),
        unresolved=True,
        ends_well=True,
    ),
    _S.APPLYING: StateFacts(
        words="applying",
        for_agent="a person confirmed it; its writes are being sent",
        unresolved=True,
        running=True,
    ),
    _S.APPLIED: StateFacts(
        words="applied",
        for_agent="every write landed",
        webhook="job.applied",
        ends_well=True,
    ),
    _S.PARTIALLY_APPLIED: StateFacts(
        words="partially applied",
        for_agent="some of its writes landed; a person decides what next",
        webhook="job.applied",
        unresolved=True,
    ),
    _S.NEEDS_REVIEW: StateFacts(
        words="needs review: an outcome is uncertain",
        for_agent="a write's outcome is uncertain; a person reconciles it",
        webhook="job.needs_review",
        inbox_view="needs_review",
        waiting_words=("needs review", "need review"),
        unresolved=True,
        note="An outcome is uncertain. Preview “accept observed state” to see what the "
        "resource shows now; accepting records your judgement and lifts the quarantine.",
    ),
    _S.UNDOING: StateFacts(
        words="undoing",
        for_agent="a person confirmed its undo; the writes are being sent",
        unresolved=True,
        running=True,
    ),
    _S.UNDONE: StateFacts(
        words="undone",
        for_agent="a person undid it",
        webhook="job.undone",
        terminal=True,
        ends_well=True,
    ),
    _S.PARTIALLY_UNDONE: StateFacts(
        words="partially undone",
        for_agent="part of it was undone; a person decides what next",
        webhook="job.undone",
        unresolved=True,
        ends_well=True,
    ),
    _S.REJECTED: StateFacts(
        words="rejected",
        for_agent="a person rejected it (with their reason, when they gave one)",
        webhook="job.rejected",
        terminal=True,
        ends_well=True,
        note="This job was rejected: it can never be applied.",
    ),
    _S.INVALIDATED: StateFacts(
        words="invalidated",
        for_agent="a resource it touches changed identity in the config; prepare a new job",
        terminal=True,
        note="This job was invalidated because a resource's identity changed: {reason}",
    ),
}

TERMINAL_STATES = frozenset(s for s in JobState if STATES[s].terminal)
#: In ``JobState`` order: the order of the ledger's partial index ``jobs_unresolved``.
UNRESOLVED_STATES = tuple(s for s in JobState if STATES[s].unresolved)
RUNNING_STATES = frozenset(s for s in JobState if STATES[s].running)
#: Every webhook event, in the order of the states that announce them.
WEBHOOK_EVENTS = tuple(dict.fromkeys(f.webhook for f in STATES.values() if f.webhook))
#: The inbox views that list work waiting for a person: view -> the states it keeps.
_VIEWS = [f.inbox_view for f in STATES.values() if f.inbox_view is not None]
WAITING_VIEWS = {v: tuple(s for s in JobState if STATES[s].inbox_view == v) for v in _VIEWS}


class Transition(StrEnum):
    """The events that move a job; each names the edges it may take in ``TRANSITIONS``."""

    START_APPLY = "start_apply"
    FINISH_APPLY = "finish_apply"
    START_UNDO = "start_undo"
    FINISH_UNDO = "finish_undo"
    ACCEPT_OBSERVED = "accept_observed"
    CRASH_RECOVERED = "crash_recovered"
    REJECT = "reject"
    INVALIDATE = "invalidate"


#: The events that move a job: each records the job's new state as its ``to_state``
#: (every other event with a state names one change's). The job's state is the last of
#: these in the chain: the gateway and ``undogate ledger verify`` hold its row to it.
JOB_MOVES = frozenset(
    {
        "prepare",
        "confirm_apply",
        "confirm_undo",
        "finish_apply",
        "finish_undo",
        "reconciled",
        "crash_recovered",
        "invalidate",
        "reject",
    }
)


# event -> {from state: allowed to-states}
_T = Transition
TRANSITIONS: dict[Transition, dict[JobState, frozenset[JobState]]] = {
    _T.START_APPLY: {
        _S.PREPARED: frozenset({_S.APPLYING}),
        _S.PARTIALLY_APPLIED: frozenset({_S.APPLYING}),
    },
    _T.FINISH_APPLY: {
        _S.APPLYING: frozenset({_S.APPLIED, _S.PARTIALLY_APPLIED, _S.NEEDS_REVIEW, _S.PREPARED}),
    },
    _T.START_UNDO: {
        _S.APPLIED: frozenset({_S.UNDOING}),
        _S.PARTIALLY_APPLIED: frozenset({_S.UNDOING}),
        _S.PARTIALLY_UNDONE: frozenset({_S.UNDOING}),
    },
    _T.FINISH_UNDO: {
        _S.UNDOING: frozenset(
            {
                _S.UNDONE,
                _S.PARTIALLY_UNDONE,
                _S.NEEDS_REVIEW,
                _S.APPLIED,
                _S.PARTIALLY_APPLIED,
            }
        ),
    },
    _T.ACCEPT_OBSERVED: {
        _S.NEEDS_REVIEW: frozenset(
            {
                _S.APPLIED,
                _S.PARTIALLY_APPLIED,
                _S.PREPARED,
                _S.UNDONE,
                _S.PARTIALLY_UNDONE,
            }
        ),
    },
    # At start: an operation cut off by a crash. With a write in flight the job needs
    # review; cut off between writes, it settles where its changes stand.
    _T.CRASH_RECOVERED: {
        _S.APPLYING: frozenset({_S.NEEDS_REVIEW, _S.PREPARED, _S.APPLIED, _S.PARTIALLY_APPLIED}),
        _S.UNDOING: frozenset(
            {_S.NEEDS_REVIEW, _S.APPLIED, _S.PARTIALLY_APPLIED, _S.PARTIALLY_UNDONE, _S.UNDONE}
        ),
    },
    _T.REJECT: {_S.PREPARED: frozenset({_S.REJECTED})},
    _T.INVALIDATE: {
        s: frozenset({_S.INVALIDATED})
        for s in (
            _S.PREPARED,
            _S.APPLIED,
            _S.PARTIALLY_APPLIED,
            _S.PARTIALLY_UNDONE,
        )
    },
}


def check_transition(
    event: Transition,
    current: JobState,
    target: JobState,
    *,
    lease_expires_at: float | None = None,
) -> None:
    """Raise ``TransitionNotAllowed`` unless ``event`` may move ``current`` to ``target``
    (``lease_expires_at``: as ``require_start``)."""
    allowed = TRANSITIONS.get(event, {}).get(current)
    if not allowed or target not in allowed:
        raise _refusal(event, current, lease_expires_at, target=target)


def can_start(event: Transition, current: JobState) -> bool:
    return current in TRANSITIONS.get(event, {})


def require_start(
    event: Transition, current: JobState, *, lease_expires_at: float | None = None
) -> None:
    """Raise ``TransitionNotAllowed`` unless ``event`` may begin from ``current``.

    ``lease_expires_at``: when ``current`` is running, the expiry of the lease of the
    process running the job (by the ledger's clock), which the refusal names."""
    if not can_start(event, current):
        raise _refusal(event, current, lease_expires_at)


def _refusal(
    event: Transition,
    current: JobState,
    lease_expires_at: float | None,
    *,
    target: JobState | None = None,
) -> TransitionNotAllowed:
    """Why ``event`` cannot move a job in ``current``, as a reviewer reads it.

    A running job (its write in flight) is refused with what is true of it: a process is
    writing it, or stopped while writing it; until that process's lease expires nobody
    else may settle the write (docs/scaling.md), and once it is settled the observed
    state can be accepted."""
    details: dict[str, str | float] = {"event": event.value, "state": current.value}
    if target is not None:
        details["target"] = target.value
    action = event.value.replace("_", " ")
    if not STATES[current].running or can_start(event, current):
        return TransitionNotAllowed(f"Can't {action} when in {current.value}", **details)
    if lease_expires_at is None:
        when = "once its lease expires"
    else:
        details["lease_expires_at"] = lease_expires_at
        at = datetime.fromtimestamp(lease_expires_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        when = f"once its lease expires, at {at}"
    return TransitionNotAllowed(
        f"Can't {action} yet: a gateway process is writing this job's changes "
        f"({current.value}), or it stopped while writing them. If that process is alive, "
        "the job moves on when its write finishes. If it is gone, another gateway process settles "
        f"the write as uncertain {when}; the observed state can be accepted then",
        **details,
    )


def state_after_apply(changes: list[ChangeState]) -> JobState:
    """The job's state once an apply pass has stopped."""
    if ChangeState.UNCERTAIN in changes:
        return JobState.NEEDS_REVIEW
    applied = sum(1 for c in changes if c is ChangeState.APPLIED)
    if applied == len(changes):
        return JobState.APPLIED
    if applied == 0:
        return JobState.PREPARED
    return JobState.PARTIALLY_APPLIED


def state_after_undo(changes: list[ChangeState], before: JobState) -> JobState:
    """The job's state once an undo pass has stopped (``before``: state when it began)."""
    if ChangeState.UNCERTAIN in changes:
        return JobState.NEEDS_REVIEW
    applied = sum(1 for c in changes if c is ChangeState.APPLIED)
    undone = sum(1 for c in changes if c is ChangeState.UNDONE)
    if applied == 0:
        return JobState.UNDONE
    if undone == 0:
        return before
    return JobState.PARTIALLY_UNDONE


def state_after_settling(changes: list[ChangeState], undo_started: bool) -> JobState:
    """The job's state once every uncertain change has been resolved by a reviewer."""
    if ChangeState.UNCERTAIN in changes:
        return JobState.NEEDS_REVIEW
    applied = sum(1 for c in changes if c is ChangeState.APPLIED)
    undone = sum(1 for c in changes if c is ChangeState.UNDONE)
    pending = sum(1 for c in changes if c is ChangeState.PENDING)
    if undone and not applied:
        return JobState.UNDONE
    if undone:
        return JobState.PARTIALLY_UNDONE
    if applied == len(changes):
        return JobState.APPLIED
    if applied == 0 and pending == len(changes) and not undo_started:
        return JobState.PREPARED
    if applied == 0:
        return JobState.UNDONE
    return JobState.PARTIALLY_APPLIED
