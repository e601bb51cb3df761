"""Preview: re-read every affected resource, show current against planned per change,
say what blocks it, plan the exact writes, and issue a single-use token.

``planned_writes`` is the one definition of the writes a confirm sends: the preview
plans them from its reads (the page shows them, the passkey challenge digests them),
and a confirm plans them again, the same way, only from reads of the very versions the
preview pinned (``confirm`` refuses to send anything once a version moved)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..adapters import Adapter, Side, Snapshot, adapter_for
from ..config import Resource
from ..digests import sha256_hex
from ..errors import (
    Conflict,
    ReconciliationBlocked,
    TransitionNotAllowed,
    UndoNotVerified,
)
from ..jobs import (
    RUNNING_STATES,
    Actor,
    Change,
    ChangeState,
    ChangeView,
    ConditionalWrite,
    Job,
    JobState,
    Observation,
    Operation,
    Preview,
    SideValue,
    Transition,
    can_start,
    require_start,
)
from ..jsonvalue import JsonObject
from ..ledger import Transaction
from . import step_up
from .context import Context
from .overlaps import check_overlaps
from .undo_offer import undo_offered

# What a preview says of a change whose undo is not offered (docs/collections.md).
IRREVERSIBLE_NOTE = (
    "irreversible: undoing this is offered only after check-endpoint verified it on a "
    "test copy of this resource and a reviewer accepted that verified undo"
)

log = logging.getLogger(__name__)

_NAMES_SHOWN = 10  # of the differing parts a blocked reconciliation names


@dataclass(frozen=True)
class PlannedWrite:
    """One write of a confirm, with what dispatching it needs to know."""

    change: Change
    resource: Resource
    adapter: Adapter
    write: ConditionalWrite


def planned_writes(
    gw: Context, operation: Operation, targets: Sequence[Change], snaps: Mapping[int, Snapshot]
) -> list[PlannedWrite]:
    """The writes confirming ``operation`` on ``targets`` sends, in dispatch order, from
    the reads ``snaps`` (none for accept_observed, which writes nothing externally).

    Raises:
        Conflict: an apply's before values, or an undo's guard, no longer hold.
    """
    if operation is Operation.ACCEPT_OBSERVED:
        return []
    side = Side.AFTER if operation is Operation.APPLY else Side.BEFORE
    writes: list[PlannedWrite] = []
    for change in targets:
        res = gw.resource(change.resource_id)
        adapter = adapter_for(change.kind)
        snap = snaps[change.index]
        if operation is Operation.APPLY and not adapter.shows(change, snap, Side.BEFORE):
            raise Conflict(
                f"{change.resource_id}'s values changed since the job was prepared; "
                "nothing was written. Prepare a new job from the current values",
                resource=change.resource_id,
            )
        if operation is Operation.UNDO and not adapter.undo_guard_holds(change, snap):
            raise Conflict(
                f"{change.resource_id} changed after this job applied it; undo would "
                "overwrite newer work, so nothing was written. Prepare a new reviewed "
                "change instead",
                resource=change.resource_id,
            )
        write = adapter.build_write(res, change, snap, side)
        writes.append(PlannedWrite(change, res, adapter, write))
    return writes


def described(gw: Context, writes: Sequence[PlannedWrite]) -> tuple[dict[str, Any], ...]:
    """``writes`` as they will leave (static headers, how they are authenticated, never
    with what): what a preview shows and a confirm's dry run answers."""
    return tuple(gw.wire.describe(p.resource, p.write) for p in writes)


def preview_job(gw: Context, actor: Actor, job: Job, operation: Operation) -> Preview:
    """Re-read every resource ``job`` (as its caller loaded it) affects and issue a
    single-use token.

    Raises:
        NotFound, TransitionNotAllowed, Quarantined, LaterJobOverlaps,
        RemoteUnavailable, RemoteContractBreach.
    """
    targets = targets_for(gw, job, operation)
    deadline = gw.deadline()
    views: list[ChangeView] = []
    blockers: list[dict[str, Any]] = []
    snapshot: JsonObject = {}
    snaps: dict[int, Snapshot] = {}
    for change in targets:
        adapter = adapter_for(change.kind)
        snap = gw.read_change(change, deadline)
        snapshot[str(change.index)] = snap.version
        snaps[change.index] = snap
        view = _view(adapter, job, change, snap, operation, undo_offered(gw, change))
        views.append(view)
        if operation is Operation.UNDO and view.irreversible:
            blockers.append(
                {
                    "change": change.index,
                    "resource": change.resource_id,
                    "code": UndoNotVerified.code,
                    "message": view.note or "this undo is not offered",
                }
            )
        elif operation is Operation.ACCEPT_OBSERVED and view.observation is Observation.NEITHER:
            blockers.append(
                {
                    "change": change.index,
                    "resource": change.resource_id,
                    "code": ReconciliationBlocked.code,
                    "message": neither_message(change, adapter.differing(change, snap)),
                }
            )
        elif operation is not Operation.ACCEPT_OBSERVED and view.moved_since_prepare:
            blockers.append(
                {
                    "change": change.index,
                    "resource": change.resource_id,
                    "code": Conflict.code,
                    "message": view.note or "the resource moved",
                }
            )
    token: str | None = None
    expires_at: float | None = None
    challenge: str | None = None
    writes: list[PlannedWrite] = []
    if not blockers:
        writes = planned_writes(gw, operation, targets, snaps)
        token = secrets.token_urlsafe(32)
        expires_at = gw.clock() + gw.config.server.preview_ttl_s
        token_hash = sha256_hex(token)
        exp = expires_at
        requests = [p.write for p in writes]
        challenge = step_up.preview_challenge(
            gw, job, operation, targets, requests, exp, token_hash
        )

        def commit(tx: Transaction) -> None:
            tx.insert_preview(
                token_hash=token_hash,
                job_id=job.id,
                operation=operation,
                expires_at=exp,
                snapshot=snapshot,
            )
            tx.add_event(
                job_id=job.id,
                actor=actor.label,
                access_path=actor.access_path,
                operation=f"preview_{operation.value}",
                detail={"changes": [str(v.index) for v in views]},
            )

        gw.ledger.write(commit)
    return Preview(
        job_id=job.id,
        operation=operation,
        token=token,
        expires_at=expires_at,
        changes=tuple(views),
        blockers=tuple(blockers),
        passkey_challenge=challenge,
        requests=described(gw, writes),
    )


def require_start_of(gw: Context, event: Transition, job: Job) -> None:
    """``require_start`` for ``job`` as its caller loaded it: a refusal of a job whose
    write is in flight says when its process's lease expires, as the ledger knows it.

    Raises: TransitionNotAllowed."""
    if can_start(event, job.state):
        return
    expires_at = None
    if job.state in RUNNING_STATES:
        expires_at = gw.ledger.read(lambda tx: tx.runner_lease_expiry(job.id))
    require_start(event, job.state, lease_expires_at=expires_at)


def targets_for(gw: Context, job: Job, operation: Operation) -> list[Change]:
    """The changes an operation touches, in dispatch order; checks every guard."""
    if job.state is JobState.INVALIDATED:
        raise TransitionNotAllowed(
            f"Can't {operation.value.replace('_', ' ')} when in invalidated: "
            f"{job.invalidated_reason or 'a resource identity changed'}",
            state=job.state.value,
        )
    if operation is Operation.APPLY:
        require_start_of(gw, Transition.START_APPLY, job)
        if job.undo_started:
            raise TransitionNotAllowed(
                "Can't apply: an undo of this job has started, so it can never be applied "
                "again; prepare a new job",
                state=job.state.value,
            )
        targets = [c for c in job.changes if c.state is ChangeState.PENDING]
    elif operation is Operation.UNDO:
        require_start_of(gw, Transition.START_UNDO, job)
        targets = [c for c in reversed(job.changes) if c.state is ChangeState.APPLIED]
    else:
        require_start_of(gw, Transition.ACCEPT_OBSERVED, job)
        targets = [c for c in job.changes if c.state is ChangeState.UNCERTAIN]
    if not targets:
        raise TransitionNotAllowed(
            f"Can't {operation.value.replace('_', ' ')}: no change is waiting for it",
            state=job.state.value,
        )
    for change in targets:
        if change.fingerprint != gw.resource(change.resource_id).fingerprint:
            raise TransitionNotAllowed(
                f"{change.resource_id}'s identity changed in the config since this job "
                "was prepared. Restore the configuration it was prepared with and "
                "reconcile it there; until then its fields stay quarantined",
                state=job.state.value,
                resource=change.resource_id,
            )
    if operation is not Operation.ACCEPT_OBSERVED:
        gw.ledger.read(lambda tx: check_overlaps(tx, job, targets, operation))
    return targets


def _view(
    adapter: Adapter,
    job: Job,
    change: Change,
    snap: Snapshot,
    operation: Operation,
    undo_offered: bool = True,
) -> ChangeView:
    def view(
        planned: SideValue | None,
        *,
        moved_since_prepare: bool,
        reversible: bool,
        note: str | None = None,
        observation: Observation | None = None,
    ) -> ChangeView:
        return ChangeView(
            index=change.index,
            resource_id=change.resource_id,
            kind=change.kind,
            current_version=snap.version,
            current=adapter.current(change, snap),
            planned=planned,
            moved_since_prepare=moved_since_prepare,
            reversible=reversible and undo_offered,
            note=note if note is not None or undo_offered else IRREVERSIBLE_NOTE,
            observation=observation,
            irreversible=not undo_offered and operation is not Operation.ACCEPT_OBSERVED,
        )

    if operation is Operation.ACCEPT_OBSERVED:
        return view(
            None,
            moved_since_prepare=False,
            reversible=True,
            observation=observe(adapter, job, change, snap),
        )
    if operation is Operation.APPLY:
        blocked = not adapter.shows(change, snap, Side.BEFORE)
        note = (
            "the values this job would replace changed since it was prepared; "
            "prepare a new job from the current values"
        )
        planned = change.after
    else:
        blocked = not adapter.undo_guard_holds(change, snap)
        note = (
            "the resource changed after this job applied it; undo would overwrite "
            "newer work, so it is refused: prepare a new reviewed change instead"
        )
        planned = change.before
    return view(
        planned,
        moved_since_prepare=blocked,
        reversible=not (operation is Operation.UNDO and blocked),
        note=note if blocked else None,
    )


def neither_message(change: Change, differing: tuple[str, ...]) -> str:
    """Why an uncertain change cannot be reconciled: it shows neither side, and (names
    only, never values) what differs."""
    shown = ", ".join(repr(name[:64]) for name in differing[:_NAMES_SHOWN])
    if len(differing) > _NAMES_SHOWN:
        shown += f" and {len(differing) - _NAMES_SHOWN} more"
    what = f" ({shown} differ)" if shown else ""
    return (
        f"{change.resource_id} shows neither the before nor the after values{what}: "
        "reconciliation is blocked until someone investigates by hand"
    )


def observe(adapter: Adapter, job: Job, change: Change, snap: Snapshot) -> Observation:
    last = [a for a in job.actions if a.change_index == change.index]
    last_op = last[-1].operation if last else Operation.APPLY
    if adapter.shows(change, snap, Side.AFTER):
        return Observation.LOOKS_APPLIED
    if adapter.shows(change, snap, Side.BEFORE):
        if last_op is Operation.UNDO:
            return Observation.LOOKS_UNDONE
        return Observation.LOOKS_NOT_APPLIED
    return Observation.NEITHER
