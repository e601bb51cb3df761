"""Confirm: check the whole preview against fresh reads before the first write, then
hand the writes to the dispatch loop (accept-observed goes to ``reconcile``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..adapters import Snapshot
from ..digests import sha256_hex
from ..errors import (
    ChangedSincePreview,
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
from ..metrics import Watch, watching_confirm
from . import step_up
from .agent_stop import HELD, refuse_stopped
from .context import Context
from .dispatch import Dispatch
from .preview import described, planned_writes, targets_for
from .reconcile import accept_observed
from .undo_offer import undo_offered

log = logging.getLogger(__name__)


def stored_preview(gw: Context, job: Job, preview_token: str) -> StoredPreview | None:
    """What the ledger holds about one of ``job``'s previews: when it expires, whether
    (and when) a confirm consumed it. None when the token is not one of this job's."""
    token_hash = sha256_hex(preview_token)
    stored = gw.ledger.read(lambda tx: tx.load_preview(token_hash))
    return stored if stored is not None and stored.job_id == job.id else None


def confirm_preview(
    gw: Context,
    actor: Actor,
    job: Job,
    preview_token: str,
    *,
    dry_run: bool = False,
    reauthorize: Callable[[], None] | None = None,
    acknowledge_irreversible: bool = False,
    passkey_assertion: str | None = None,
) -> Confirmation:
    """Check the whole preview of ``job`` (as its caller loaded it) against fresh reads,
    then dispatch action by action.

    ``reauthorize`` is called before each dispatch; it raises (``Forbidden``,
    ``Unauthorized``) when the reviewer's credential no longer allows the write. An
    apply of a change whose undo is not offered (docs/collections.md) needs
    ``acknowledge_irreversible``; an undo that is not offered is refused.
    ``passkey_assertion``: the ``PublicKeyCredential`` JSON over the preview's
    digest, which a preview that touches a ``require_passkey`` resource needs
    (``step_up``).

    Counted and timed by operation and outcome (``metrics``).

    Raises:
        NotFound, PreviewExpired, PreviewUsed, ChangedSincePreview, Conflict,
        Quarantined, LaterJobOverlaps, LimitReached, TransitionNotAllowed,
        ReconciliationBlocked, RemoteUnavailable, RemoteContractBreach,
        IrreversibleNotAcknowledged, UndoNotVerified,
        PasskeyRequired, PasskeyRefused (its subclasses), AgentStopped (an apply of
        a stopped agent's job).
    """
    with watching_confirm() as watch:
        done = _confirm(
            gw,
            actor,
            job,
            preview_token,
            watch,
            dry_run=dry_run,
            reauthorize=reauthorize,
            acknowledge_irreversible=acknowledge_irreversible,
            passkey_assertion=passkey_assertion,
        )
        watch.outcome = (
            "dry_run" if done.dry_run else "repeated" if done.repeated else done.job.state.value
        )
        return done


def _confirm(
    gw: Context,
    actor: Actor,
    job: Job,
    preview_token: str,
    watch: Watch,
    *,
    dry_run: bool,
    reauthorize: Callable[[], None] | None,
    acknowledge_irreversible: bool,
    passkey_assertion: str | None,
) -> Confirmation:
    assertion = None
    if passkey_assertion is not None:
        assertion = step_up.refuse_replay(gw, passkey_assertion)
    token_hash = sha256_hex(preview_token)
    # One read for all three (on PostgreSQL each read is a transaction of its own).
    stored, attempts, stopped = gw.ledger.read(
        lambda tx: (
            tx.load_preview(token_hash),
            tx.confirm_attempts(job.id),
            tx.agent_stopped_at(job.owner_id, job.agent_id),
        )
    )
    if stored is None or stored.job_id != job.id:
        raise NotFound("unknown preview token for this job; preview again", job=job.id)
    watch.operation = stored.operation.value
    if stored.consumed_at is not None:
        latest = gw.ledger.read(lambda tx: tx.latest_consumed_seq(job.id))
        if not dry_run and stored.op_seq == latest:
            return Confirmation(job=job, repeated=True)
        raise PreviewUsed(
            "this preview was already used and a newer operation has happened since; preview again",
            job=job.id,
        )
    operation = stored.operation
    # A stopped agent's jobs wait (undoing them does not), said before anything a new
    # preview would mend: previewing again would not help.
    if operation is Operation.APPLY:
        refuse_stopped(stopped, job.agent_id, HELD)
    if gw.clock() >= stored.expires_at:
        raise PreviewExpired("the preview expired; preview again", job=job.id)
    targets = targets_for(gw, job, operation)
    if {str(c.index) for c in targets} != set(stored.snapshot):
        raise ChangedSincePreview("the job changed since this preview; preview again", job=job.id)
    # A dry run sends nothing, so it needs no acknowledgement; an undo never offered is
    # refused even then.
    _check_reversibility(gw, operation, targets, acknowledge_irreversible or dry_run)
    if not dry_run:
        _check_attempts(gw, job.id, attempts)
    with _refusals_counted(gw, job.id, dry_run):
        deadline = gw.deadline()
        snaps = _reread(gw, job, stored, targets, deadline)
        # The preview's writes: planned by the one definition from the versions it pinned.
        writes = planned_writes(gw, operation, targets, snaps)
        if dry_run and operation is not Operation.ACCEPT_OBSERVED:
            return Confirmation(job=job, dry_run=True, requests=described(gw, writes))
        if not dry_run and step_up.required(gw, targets):  # the passkey, before any send
            requests = [p.write for p in writes]
            expires_at = stored.expires_at
            step_up.approve(
                gw, actor, job, operation, requests, expires_at, stored.token_hash, assertion
            )
        if operation is Operation.ACCEPT_OBSERVED:
            return accept_observed(gw, actor, job, targets, snaps, stored.token_hash, dry_run)
        with gw.live.running(job.id):
            done = Dispatch(
                ledger=gw.ledger,
                wire=gw.wire,
                actor_label=actor.label,
                access_path=actor.access_path,
                job=job,
                operation=operation,
                writes=writes,
                token_hash=stored.token_hash,
                deadline=deadline,
                reauthorize=reauthorize,
                crash_point=gw.crash_point,
                notifier=gw.notifier,
            ).run()
        return Confirmation(job=done)


@contextmanager
def _refusals_counted(gw: Context, job_id: str, dry_run: bool) -> Iterator[None]:
    """A refused attempt still counts (a successful one counts in its first commit)."""
    try:
        yield
    except UndogateError:
        if not dry_run:
            try:
                gw.ledger.write(lambda tx: tx.count_confirm_attempt(job_id))
            except LedgerError:
                log.warning("could not count a refused confirmation of %s", job_id)
        raise


def _reread(
    gw: Context, job: Job, stored: StoredPreview, targets: list[Change], deadline: float
) -> dict[int, Snapshot]:
    """Every target read again, before anything is sent.

    Raises: ChangedSincePreview (a version moved since the preview pinned it), and what
    a read raises."""
    snaps: dict[int, Snapshot] = {}
    for change in targets:
        snap = gw.read_change(change, deadline)
        # Versions are ETag headers as the preview pinned them (or ``absent``): equal
        # text is the strong comparison, since a snapshot's tag is always strong.
        if str(stored.snapshot[str(change.index)]) != snap.version:
            raise ChangedSincePreview(
                f"{change.resource_id} changed since the preview; nothing was written. "
                "Preview again to see the current values",
                resource=change.resource_id,
                job=job.id,
            )
        snaps[change.index] = snap
    return snaps


def _check_reversibility(
    gw: Context, operation: Operation, targets: list[Change], acknowledged: bool
) -> None:
    """An undo that is not offered is refused; applying a change that could
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
