"""Confirm: check the whole preview against fresh reads before the first write, then
hand the writes to the dispatch loop (accept-observed goes to ``reconcile``)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..adapters import Side, Snapshot, adapter_for
from ..digests import sha256_hex
from ..errors import (
    ChangedSincePreview,
    Conflict,
    IrreversibleNotAcknowledged,
    LedgerError,
    LimitReached,
    NotFound,
    PreviewExpired,
    PreviewUsed,
    UndogateError,
    UndoNotVerified,
)
from ..jobs import (
    Actor,
    Change,
    Confirmation,
    Job,
    Operation,
)
from ..ledger import StoredPreview
from ..passkeys import AssertionParts
from . import step_up
from .context import Context
from .dispatch import Dispatch, PlannedWrite
from .preview import targets_for
from .reconcile import accept_observed
from .undo_offer import undo_offered

log = logging.getLogger(__name__)


def stored_preview(
    gw: Context, owner_id: str, job_id: str, preview_token: str
) -> StoredPreview | None:
    """What the ledger holds about one of the job's previews: when it expires, whether
    (and when) a confirm consumed it. None when the token is not one of this job's.

    Raises: NotFound (as ``get_job``).
    """
    job = gw.get_job(owner_id, job_id)
    token_hash = sha256_hex(preview_token)
    stored = gw.ledger.read(lambda tx: tx.load_preview(token_hash))
    return stored if stored is not None and stored.job_id == job.id else None


def confirm_preview(
    gw: Context,
    actor: Actor,
    job_id: str,
    preview_token: str,
    *,
    dry_run: bool = False,
    reauthorize: Callable[[], None] | None = None,
    acknowledge_irreversible: bool = False,
    passkey_assertion: str | None = None,
) -> Confirmation:
    """Check the whole preview against fresh reads, then dispatch action by action.

    ``reauthorize`` is called before each dispatch; it raises (``Forbidden``,
    ``Unauthorized``) when the reviewer's credential no longer allows the write. An
    apply of a change whose undo is not offered (SPEC §12) needs
    ``acknowledge_irreversible``; an undo that is not offered is refused.
    ``passkey_assertion``: the ``PublicKeyCredential`` JSON over the preview's
    digest, which a preview that touches a ``require_passkey`` resource needs
    (``step_up``).

    Raises:
        NotFound, PreviewExpired, PreviewUsed, ChangedSincePreview, Conflict,
        Quarantined, LaterJobOverlaps, LimitReached, TransitionNotAllowed,
        ReconciliationBlocked, RemoteUnavailable, RemoteContractBreach,
        IrreversibleNotAcknowledged, UndoNotVerified,
        PasskeyRequired, PasskeyRefused (its subclasses).
    """
    assertion = None
    if passkey_assertion is not None:
        assertion = step_up.refuse_replay(gw, passkey_assertion)
    job = gw.get_job(actor.owner_id, job_id)
    token_hash = sha256_hex(preview_token)
    # One read for both (on PostgreSQL each read is a transaction of its own).
    stored, attempts = gw.ledger.read(
        lambda tx: (tx.load_preview(token_hash), tx.confirm_attempts(job.id))
    )
    if stored is None or stored.job_id != job.id:
        raise NotFound("unknown preview token for this job; preview again", job=job.id)
    if stored.consumed_at is not None:
        latest = gw.ledger.read(lambda tx: tx.latest_consumed_seq(job.id))
        if not dry_run and stored.op_seq == latest:
            return Confirmation(job=job, repeated=True)
        raise PreviewUsed(
            "this preview was already used and a newer operation has happened since; preview again",
            job=job.id,
        )
    if gw.clock() >= stored.expires_at:
        raise PreviewExpired("the preview expired; preview again", job=job.id)
    operation = stored.operation
    targets = targets_for(gw, job, operation)
    if {str(c.index) for c in targets} != set(stored.snapshot):
        raise ChangedSincePreview("the job changed since this preview; preview again", job=job.id)
    # A dry run sends nothing, so it needs no acknowledgement; an undo never offered is
    # refused even then.
    _check_reversibility(gw, operation, targets, acknowledge_irreversible or dry_run)
    if not dry_run:
        _check_attempts(gw, job.id, attempts)
    try:
        return _confirm_checked(gw, actor, job, stored, targets, dry_run, reauthorize, assertion)
    except UndogateError:
        if not dry_run:
            try:
                _count_attempt(gw, job.id)
            except LedgerError:
                log.warning("could not count a refused confirmation of %s", job.id)
        raise


def _confirm_checked(
    gw: Context,
    actor: Actor,
    job: Job,
    stored: StoredPreview,
    targets: list[Change],
    dry_run: bool,
    reauthorize: Callable[[], None] | None,
    assertion: AssertionParts | None,
) -> Confirmation:
    seen_versions, operation, token_hash = stored.snapshot, stored.operation, stored.token_hash

    def step_up_approval(writes: list[PlannedWrite]) -> None:
        """Before anything is sent: the passkey, where one is required."""
        if step_up.required(gw, targets):
            requests = step_up.planned(p.write for p in writes)
            step_up.approve(
                gw, actor, job, operation, requests, stored.expires_at, token_hash, assertion
            )

    deadline = gw.deadline()
    snaps: dict[int, Snapshot] = {}
    for change in targets:
        snap = gw.read_change(change, deadline)
        # Versions are ETag headers as the preview pinned them (or ``absent``): equal
        # text is the strong comparison, since a snapshot's tag is always strong.
        if str(seen_versions[str(change.index)]) != snap.version:
            raise ChangedSincePreview(
                f"{change.resource_id} changed since the preview; nothing was written. "
                "Preview again to see the current values",
                resource=change.resource_id,
                job=job.id,
            )
        snaps[change.index] = snap
    if operation is Operation.ACCEPT_OBSERVED:
        if not dry_run:
            step_up_approval([])
        return accept_observed(gw, actor, job, targets, snaps, token_hash, dry_run)
    writes: list[PlannedWrite] = []
    target_side = Side.AFTER if operation is Operation.APPLY else Side.BEFORE
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
        write = adapter.build_write(res, change, snap, target_side)
        writes.append(PlannedWrite(change, res, adapter, write))
    if dry_run:
        requests = tuple(gw.remote.describe(p.resource, p.write) for p in writes)
        return Confirmation(job=job, dry_run=True, requests=requests)
    step_up_approval(writes)
    with gw.live.running(job.id):
        Dispatch(
            ledger=gw.ledger,
            remote=gw.remote,
            actor_label=actor.label,
            access_path=actor.access_path,
            job=job,
            operation=operation,
            writes=writes,
            token_hash=token_hash,
            deadline=deadline,
            reauthorize=reauthorize,
            crash_point=gw.crash_point,
            notifier=gw.notifier,
        ).run()
    done = gw.ledger.load_job(job.id)
    assert done is not None
    return Confirmation(job=done)


def _check_reversibility(
    gw: Context, operation: Operation, targets: list[Change], acknowledged: bool
) -> None:
    """SPEC §12: an undo that is not offered is refused; applying a change that could
    not be undone needs the reviewer's explicit acknowledgement."""
    if operation is Operation.ACCEPT_OBSERVED:
        return
    for change in targets:
        if undo_offered(gw, change):
            continue
        if operation is Operation.UNDO:
            raise UndoNotVerified(
                f"undoing change {change.index} on {change.resource_id} is not offered: it "
                "needs check-endpoint to verify it on a test copy and a reviewer to accept "
                "that verified undo",
                resource=change.resource_id,
                change=change.index,
            )
        if not acknowledged:
            raise IrreversibleNotAcknowledged(
                f"change {change.index} on {change.resource_id} cannot be undone by the "
                "gateway; confirm again with acknowledge_irreversible to apply it anyway",
                resource=change.resource_id,
                change=change.index,
            )


def _check_attempts(gw: Context, job_id: str, attempts: int) -> None:
    limit = gw.config.limits.max_confirm_attempts
    if attempts >= limit:
        raise LimitReached(
            f"this job reached its limit of {limit} confirmation attempts",
            limit="max_confirm_attempts",
            job=job_id,
        )


def _count_attempt(gw: Context, job_id: str) -> None:
    """A refused attempt still counts (a successful one counts in its first commit)."""
    gw.ledger.write(lambda tx: tx.count_confirm_attempt(job_id))
