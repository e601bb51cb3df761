"""Rewind plans: an agent's work since a moment, undone as one reviewed plan
(docs/rewind.md).

A plan lists every change of the selected jobs that applied anything, newest first (in
the order the changes applied), each with its verdict. Overlapping changes of the plan
are undone newest first, and each guard is evaluated against the state the steps before
it will leave: the planner reads each resource once, then carries forward what each undo
will leave there (its kind says what, ``Adapter.undone``; the version is the one the
change's apply replaced), so a plan restores what its own later jobs overwrote, and never
what a job outside it wrote since.

Pure but for the reads it is handed and the ledger reads of ``walk``: a preview and a
confirm walk the same plan over the same pinned reads, so they plan the same writes.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from ..adapters import Side, Snapshot, absent_snapshot, adapter_for
from ..errors import UndogateError
from ..jobs import (
    ABSENT,
    ActionStatus,
    Change,
    ChangeState,
    ConditionalWrite,
    Job,
    JobState,
    Operation,
    Transition,
    can_start,
)
from ..jsonvalue import JsonObject, JsonValue
from ..ledger import Reader
from ..net.etag import ETag, parse_etag
from .context import Context
from .overlaps import find_blockers
from .undo_offer import offered_in


class StepVerdict(StrEnum):
    """What a plan will do with one change."""

    UNDO = "undo"
    BLOCKED = "blocked"  # something stands in the way: a job outside the plan, or an edit
    IRREVERSIBLE = "irreversible"  # no verified undo is offered for it
    ALREADY_UNDONE = "already_undone"
    QUARANTINED = "quarantined"  # its outcome is uncertain: reconcile it first


@dataclass(frozen=True)
class Selection:
    """Which jobs a plan covers: one agent's, prepared in ``[since, until)``, optionally
    only those with an attribution ``label`` or a ``session``."""

    agent_id: str
    since: float
    until: float | None = None
    label: str | None = None
    session: str | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"agent": self.agent_id, "since": repr(self.since)}
        if self.until is not None:
            out["until"] = repr(self.until)
        if self.label is not None:
            out["label"] = self.label
        if self.session is not None:
            out["session"] = self.session
        return out

    @classmethod
    def from_json(cls, value: JsonObject) -> Selection:
        until = value.get("until")
        label, session = value.get("label"), value.get("session")
        return cls(
            agent_id=str(value["agent"]),
            since=float(str(value["since"])),
            until=float(str(until)) if until is not None else None,
            label=label if isinstance(label, str) else None,
            session=session if isinstance(session, str) else None,
        )


@dataclass(frozen=True)
class Step:
    """One change of the plan, in plan order (``number`` from 1), with its verdict.

    A blocked step says what stands in the way: ``in_the_way`` names the job (one outside
    the plan, or one of the plan's own that is blocked itself), or, when none is named,
    an edit made outside the gateway. ``seen``: it is blocked by what its resource will
    show when its turn comes, and ``current`` is that (``None``: the resource will not
    exist); a step blocked before anything was compared (its job, the config, a failed
    read) has no ``current`` to show."""

    number: int
    job_id: str
    change: int
    resource_id: str
    verdict: StepVerdict
    current: JsonValue = None
    in_the_way: str | None = None
    message: str | None = None
    seen: bool = False

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "step": str(self.number),
            "job": self.job_id,
            "change": str(self.change),
            "resource": self.resource_id,
            "verdict": self.verdict.value,
        }
        if self.verdict is StepVerdict.BLOCKED:
            if self.seen:
                out["current"] = self.current
            out["in_the_way"] = self.in_the_way
        if self.message is not None:
            out["message"] = self.message
        return out

    @classmethod
    def from_json(cls, value: JsonObject) -> Step:
        in_the_way, message = value.get("in_the_way"), value.get("message")
        return cls(
            number=int(str(value["step"])),
            job_id=str(value["job"]),
            change=int(str(value["change"])),
            resource_id=str(value["resource"]),
            verdict=StepVerdict(str(value["verdict"])),
            current=value.get("current"),
            in_the_way=in_the_way if isinstance(in_the_way, str) else None,
            message=message if isinstance(message, str) else None,
            seen="current" in value,
        )


@dataclass(frozen=True)
class PlannedUndo:
    """An undo step as the confirm will send it. ``if_match_from``: the plan step whose
    outcome the write's ``If-Match`` will name (the version that step leaves); ``None``
    when it names the version the preview read."""

    step: Step
    change: Change
    write: ConditionalWrite
    if_match_from: int | None


@dataclass(frozen=True)
class Walk:
    """A plan walked over one set of reads: its steps, the undos it sends in order, and
    the version of every resource it read (keyed as ``read_key``)."""

    steps: tuple[Step, ...]
    undos: tuple[PlannedUndo, ...]
    versions: Mapping[str, str]

    @property
    def blocked(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.verdict is StepVerdict.BLOCKED)


def read_key(change: Change) -> str:
    """What one read of a change's resource is of: the resource, or one part of it."""
    return change.resource_id if change.target is None else f"{change.resource_id}#{change.target}"


def plan_order(jobs: Sequence[Job]) -> list[tuple[Job, Change]]:
    """Every change of ``jobs`` that applied anything (or may have: uncertain), newest
    first: by the order the changes applied, a job's own changes last to first."""
    found = [
        (job, change)
        for job in jobs
        for change in job.changes
        if change.applied_at is not None or change.state is ChangeState.UNCERTAIN
    ]
    return sorted(
        found,
        key=lambda jc: (jc[1].applied_at or 0, jc[0].created_at, jc[1].index),
        reverse=True,
    )


def to_read(gw: Context, order: Sequence[tuple[Job, Change]]) -> dict[str, Change]:
    """One change per resource (or part) whose undo a plan may send: what to read once."""
    wanted: dict[str, Change] = {}
    for _job, change in order:
        if change.state is ChangeState.APPLIED and gw.config.resource(change.resource_id):
            wanted.setdefault(read_key(change), change)
    return wanted


def read_once(
    gw: Context, wanted: Mapping[str, Change], deadline: float
) -> dict[str, Snapshot | UndogateError]:
    """Each resource of the plan read once (a failed read is kept, for its steps)."""
    reads: dict[str, Snapshot | UndogateError] = {}
    for key, change in wanted.items():
        try:
            reads[key] = gw.read_change(change, deadline)
        except UndogateError as exc:
            reads[key] = exc
    return reads


def walk(
    gw: Context, tx: Reader, order: Sequence[tuple[Job, Change]], reads: Mapping[str, object]
) -> Walk:
    """The plan over ``reads`` (``read_once``'s), inside one ledger read ``tx``."""
    state: dict[str, object] = dict(reads)  # key -> Snapshot, an error, or None: unforeseen
    last_undo: dict[str, int] = {}  # key -> the latest step that undoes something there
    released: set[tuple[str, int | None]] = set()  # plan changes undone before a step
    steps: list[Step] = []
    undos: list[PlannedUndo] = []
    for number, (job, change) in enumerate(order, start=1):
        key = read_key(change)
        seen = state.get(key)
        step, write = _judge(
            gw, tx, number, job, change, seen, released, last_undo.get(key), reads.get(key)
        )
        steps.append(step)
        if write is None:
            continue
        assert isinstance(seen, Snapshot)  # only a read resource's step is undone
        undos.append(PlannedUndo(step, change, write, last_undo.get(key)))
        res = gw.config.resource(change.resource_id)
        assert res is not None  # a step whose resource left the config is never undone
        undone = adapter_for(change.kind).undone(res, change, seen)
        state[key] = _after_undo(undone, job, change)
        last_undo[key] = number
        released.add((job.id, change.applied_at))
    versions = {k: v.version for k, v in reads.items() if isinstance(v, Snapshot)}
    return Walk(tuple(steps), tuple(undos), versions)


def _judge(
    gw: Context,
    tx: Reader,
    number: int,
    job: Job,
    change: Change,
    seen: object,
    released: Container[tuple[str, int | None]],
    after: int | None,
    read: object,
) -> tuple[Step, ConditionalWrite | None]:
    """One step's verdict, and its write when it is undone (``seen``: what the resource
    will show when its turn comes, a failed read, or None: unforeseeable once step
    ``after`` undid something there; ``read``: what it showed when the plan read it)."""

    def step(verdict: StepVerdict, **more: Any) -> tuple[Step, None]:
        return Step(number, job.id, change.index, change.resource_id, verdict, **more), None

    if change.state is ChangeState.UNDONE:
        return step(
            StepVerdict.ALREADY_UNDONE,
            message="this job's undo of this change landed already: nothing to send",
        )
    if change.state is ChangeState.UNCERTAIN or job.state is JobState.NEEDS_REVIEW:
        return step(
            StepVerdict.QUARANTINED,
            message=f"job {job.id} has an uncertain outcome: reconcile it first",
        )
    res = gw.config.resource(change.resource_id)
    why_not = _cannot_start(job, change, res.fingerprint if res else None)
    if why_not is not None or res is None:
        return step(StepVerdict.BLOCKED, message=why_not)
    if not offered_in(tx, res, change):
        return step(
            StepVerdict.IRREVERSIBLE,
            message="no verified undo is offered for this change (docs/recovery.md)",
        )
    if not isinstance(seen, Snapshot):
        if isinstance(seen, UndogateError):
            return step(StepVerdict.BLOCKED, message=seen.message)
        return step(StepVerdict.BLOCKED, message=_unforeseen(change, after))
    adapter = adapter_for(change.kind)
    current = _json_side(adapter.current(change, seen))
    blockers = find_blockers(tx, job, [change], Operation.UNDO, released)
    if blockers:
        first = blockers[0]
        in_the_way = first.get("later_job") or first.get("blocking_job")
        return step(
            StepVerdict.BLOCKED,
            current=current,
            seen=True,
            in_the_way=str(in_the_way) if in_the_way else None,
            message=str(first["message"]),
        )
    if not adapter.undo_guard_holds(change, seen):
        return step(
            StepVerdict.BLOCKED,
            current=current,
            seen=True,
            message=f"{change.resource_id} was edited outside the gateway after job "
            f"{job.id} wrote it; undo would overwrite that edit",
        )
    shows_now = isinstance(read, Snapshot) and adapter.shows(change, read, Side.AFTER)
    made, _ = step(StepVerdict.UNDO, message=_still_holds(None if shows_now else after))
    return made, adapter.build_write(res, change, seen, Side.BEFORE)


def _still_holds(after: int | None) -> str:
    """Why a step is undone: its guard holds where its turn comes (``after``: the step
    whose undo puts back what this job wrote, which a newer job of the plan replaced)."""
    if after is None:
        return "it still shows what this job wrote, so its undo puts back what was before"
    return (
        f"once step {after} is undone, it shows what this job wrote again, so its undo "
        "puts back what was before"
    )


def _unforeseen(change: Change, after: int | None) -> str:
    """Why a step after another undo on the same resource is blocked, when the kind
    cannot foresee what that undo leaves (``Adapter.undone``)."""
    assert after is not None  # a resource is unforeseen only after an undo there
    noun = adapter_for(change.kind).noun
    return (
        f"step {after} undoes a change of this {noun} first, and what the server keeps "
        "after that write cannot be foreseen, so this step's exact request cannot be "
        "previewed nor its guard checked. It is left as it is: once this plan ran, make a "
        "new plan to undo it"
    )


def _cannot_start(job: Job, change: Change, fingerprint: str | None) -> str | None:
    """Why no undo of ``job`` can start now (None: it can)."""
    if job.state is JobState.INVALIDATED or fingerprint != change.fingerprint:
        return (
            f"{change.resource_id}'s identity changed in the config since job {job.id} "
            "was prepared; it cannot be undone under this configuration"
        )
    if not can_start(Transition.START_UNDO, job.state):
        return f"job {job.id} is {job.state.value}: it cannot be undone now"
    return None


def _after_undo(undone: Snapshot | None, job: Job, change: Change) -> Snapshot | None:
    """The resource as the undo of ``change`` leaves it, at the version its apply
    replaced: to the guards of the plan's earlier changes it is exactly as it was before
    this change applied (``None``: the kind cannot foresee it)."""
    if undone is None:
        return None
    if not undone.exists:
        return absent_snapshot(target=undone.target)
    return replace(undone, etag=replaced_version(job, change))


def replaced_version(job: Job, change: Change) -> ETag:
    """The version ``change``'s apply replaced (its write's ``If-Match``); an empty tag,
    which no guard accepts, when the ledger does not show one."""
    for action in reversed(job.actions):
        landed = action.status in (ActionStatus.DONE, ActionStatus.ACCEPTED)
        if action.change_index == change.index and action.operation is Operation.APPLY and landed:
            if action.if_match is None:
                break
            try:
                return parse_etag(action.if_match)
            except ValueError:
                break
    return ETag("")


def _json_side(side: object) -> JsonValue:
    return None if side is ABSENT else side  # type: ignore[return-value]


__all__ = [
    "PlannedUndo",
    "Selection",
    "Step",
    "StepVerdict",
    "Walk",
    "plan_order",
    "read_key",
    "read_once",
    "replaced_version",
    "to_read",
    "walk",
]
