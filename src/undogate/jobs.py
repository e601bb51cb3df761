"""Jobs, changes, actions and the job state machine. Pure: no I/O, no framework.

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

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, Final, Literal, TypeAlias

from .errors import TransitionNotAllowed
from .jsonvalue import JsonObject, JsonValue


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


TERMINAL_STATES = frozenset({JobState.UNDONE, JobState.REJECTED, JobState.INVALIDATED})

# What the per-agent and per-owner quotas count (docs/limits.md): a job that still waits
# for a person (prepared, needs_review, stopped part-way) or has an operation in flight.
# ``applied`` is resolved: a person confirmed it and every write landed; undoing it later
# is that person's choice, not work the agent left waiting. (The warning before revoking
# an owner's key counts applied jobs too: there, an undo the owner could still run
# matters.) The order is the one of the ledger's partial index ``jobs_unresolved``.
UNRESOLVED_STATES = (
    JobState.PREPARED,
    JobState.APPLYING,
    JobState.PARTIALLY_APPLIED,
    JobState.NEEDS_REVIEW,
    JobState.UNDOING,
    JobState.PARTIALLY_UNDONE,
)


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
_S = JobState
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


def check_transition(event: Transition, current: JobState, target: JobState) -> None:
    """Raise ``TransitionNotAllowed`` unless ``event`` may move ``current`` to ``target``."""
    allowed = TRANSITIONS.get(event, {}).get(current)
    if not allowed or target not in allowed:
        raise TransitionNotAllowed(
            f"Can't {event.replace('_', ' ')} when in {current.value}",
            event=event,
            state=current.value,
            target=target.value,
        )


def can_start(event: Transition, current: JobState) -> bool:
    return current in TRANSITIONS.get(event, {})


def require_start(event: Transition, current: JobState) -> None:
    """Raise ``TransitionNotAllowed`` unless ``event`` may begin from ``current``."""
    if not can_start(event, current):
        raise TransitionNotAllowed(
            f"Can't {event.replace('_', ' ')} when in {current.value}",
            event=event,
            state=current.value,
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


class Absent(Enum):
    """The side of a change on which its resource does not exist (before a create,
    after a delete)."""

    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = Absent.ABSENT

# One side of a change: ``ABSENT``, or a JSON object whose meaning only the change's
# kind knows (its adapter writes and reads it; the ledger stores it as JSON text).
SideValue: TypeAlias = JsonObject | Literal[Absent.ABSENT]


@dataclass(frozen=True)
class Change:
    """One planned change to one resource, with what was recorded when it was prepared.

    ``kind`` is a key of the adapters' registry, opaque here. ``before`` and ``after``
    are the change's two sides, as its kind's adapter defines them. ``fields`` names the
    parts of the resource the change touches, for kinds that have parts (an empty tuple
    means the whole resource); ``media_type`` is what the resource showed when prepared.
    """

    index: int
    resource_id: str
    kind: str
    fingerprint: str
    fields: tuple[str, ...]
    before: SideValue
    after: SideValue
    media_type: str
    prepared_etag: str
    assertion_kind: AssertionKind | None
    state: ChangeState = ChangeState.PENDING
    applied_etag: str | None = None
    applied_at: int | None = None  # ledger sequence of the apply, for undo ordering
    # The part of the resource the change acts on, for kinds whose resource holds parts
    # at their own URLs (a collection's record id); ``None`` for a whole resource, or
    # while a create has not learned the id the server gave it.
    target: str | None = None


@dataclass(frozen=True)
class Action:
    """One external write, recorded individually."""

    id: int
    job_id: str
    change_index: int
    operation: Operation
    status: ActionStatus
    method: str
    url: str
    if_match: str | None
    response_status: int | None
    result_etag: str | None
    address: str | None
    detail: str | None
    observation: Observation | None
    started_at: float
    finished_at: float | None


@dataclass(frozen=True)
class Job:
    id: str
    owner_id: str
    agent_id: str
    summary: str
    attribution_label: str | None
    idempotency_key: str | None
    state: JobState
    undo_started: bool
    created_at: float
    updated_at: float
    changes: tuple[Change, ...]
    actions: tuple[Action, ...] = field(default=())
    invalidated_reason: str | None = None


@dataclass(frozen=True, init=False)
class ChangeRequest:
    """One change as an agent asked for it, before any read.

    The members every change has (``resource``, ``expected_version``,
    ``assertion_kind``), and ``members``: the rest, as the agent sent them and the API
    checked them member by member (``set``, ``text``, ...). Which members a change may
    carry, and what they mean, is its resource's kind's business: only the kind reads
    ``members``. Keyword arguments beyond the common ones are members:
    ``ChangeRequest("customer", set={"status": "vip"})``.
    """

    resource_id: str
    members: JsonObject
    expected_version: str | None
    assertion_kind: AssertionKind | None

    def __init__(
        self,
        resource_id: str,
        members: JsonObject | None = None,
        *,
        expected_version: str | None = None,
        assertion_kind: AssertionKind | None = None,
        **given: Any,
    ) -> None:
        named = {**(members or {}), **given}
        # A member left out and a member given as null are the same request.
        kept: JsonObject = {k: _json_member(v) for k, v in named.items() if v is not None}
        object.__setattr__(self, "resource_id", resource_id)
        object.__setattr__(self, "members", kept)
        object.__setattr__(self, "expected_version", expected_version)
        object.__setattr__(self, "assertion_kind", assertion_kind)


def _json_member(value: Any) -> JsonValue:
    """A member's value as JSON (a tuple, as Python callers write a list, is one)."""
    if isinstance(value, tuple):
        return [_json_member(v) for v in value]
    return value  # type: ignore[no-any-return]  # callers pass JSON values


# -- what the operations take and give back ------------------------------------------


@dataclass(frozen=True)
class Actor:
    """Who is acting, as the surfaces established it (the engine trusts this)."""

    id: str
    owner_id: str
    kind: str  # operator | agent | master | system
    access_path: str  # api | web | cli | mcp | demo | system

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.id}"


@dataclass(frozen=True)
class PrepareRequest:
    summary: str
    changes: tuple[ChangeRequest, ...]
    idempotency_key: str | None = None
    attribution_label: str | None = None


@dataclass(frozen=True)
class Prepared:
    job: Job
    replay: bool


@dataclass(frozen=True)
class ChangeView:
    """One change as a preview shows it: current vs planned, and what blocks it.

    ``current`` is what the resource shows now, as a side of the change; ``planned`` is
    the side the operation would write (``None`` when it writes nothing: accept observed).
    """

    index: int
    resource_id: str
    kind: str
    current_version: str
    current: SideValue
    planned: SideValue | None
    moved_since_prepare: bool
    reversible: bool
    note: str | None = None
    observation: Observation | None = None
    # The operation can never be undone by the gateway (an unverified create or delete,
    # SPEC §12): confirming it needs the reviewer's explicit acknowledgement.
    irreversible: bool = False


@dataclass(frozen=True)
class Preview:
    job_id: str
    operation: Operation
    token: str | None
    expires_at: float | None
    changes: tuple[ChangeView, ...]
    blockers: tuple[dict[str, Any], ...] = ()
    # The WebAuthn challenge (base64url of the preview digest, docs/proof.md) when
    # confirming needs the reviewer's passkey; None when it does not.
    passkey_challenge: str | None = None

    @property
    def needs_acknowledgement(self) -> bool:
        """Confirming needs ``acknowledge_irreversible``: a change cannot be undone."""
        return any(v.irreversible for v in self.changes)


@dataclass(frozen=True)
class Confirmation:
    job: Job
    repeated: bool = False
    dry_run: bool = False
    requests: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class UndoOffer:
    """What the ledger shows about one resource's verified undos."""

    resource_id: str
    check_id: int | None  # the latest check under the current identity, if any
    checked_at: float | None
    verified: frozenset[str]  # what that check verified (empty unless it passed)
    accepted: frozenset[str]  # what a reviewer accepted under the current identity
    accepted_at: float | None
    # The WebAuthn challenge of accepting it (base64url), where the resource requires
    # the reviewer's passkey (SPEC §14), and until when it holds (milliseconds since
    # the epoch; the acceptance sends it back); None where it does not or nothing is
    # verified.
    passkey_challenge: str | None = None
    passkey_expires_at_ms: int | None = None

    def offers(self, need: str) -> bool:
        return need in self.verified and need in self.accepted

    @property
    def awaiting_acceptance(self) -> frozenset[str]:
        return self.verified - self.accepted
