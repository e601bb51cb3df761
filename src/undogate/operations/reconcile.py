"""Accept the observed state of uncertain writes: records the reviewer's acceptance (not
proof that a request ran), writes nothing externally, lifts the quarantine."""

from __future__ import annotations

import logging

from ..adapters import Snapshot, adapter_for
from ..errors import (
    ReconciliationBlocked,
)
from ..jobs import (
    ActionStatus,
    Actor,
    Change,
    ChangeState,
    Confirmation,
    Job,
    Observation,
    Operation,
    Transition,
    check_transition,
    state_after_settling,
)
from ..ledger import Transaction
from .context import Context
from .preview import neither_message, observe

log = logging.getLogger(__name__)


def accept_observed(
    gw: Context,
    actor: Actor,
    job: Job,
    targets: list[Change],
    snaps: dict[int, Snapshot],
    token_hash: str,
    dry_run: bool,
) -> Confirmation:
    decisions: list[tuple[Change, Observation, Snapshot]] = []
    for change in targets:
        adapter = adapter_for(change.kind)
        snap = snaps[change.index]
        observation = observe(adapter, job, change, snap)
        if observation is Observation.NEITHER:
            differing = adapter.differing(change, snap)
            raise ReconciliationBlocked(
                neither_message(change, differing),
                resource=change.resource_id,
                differing=list(differing),
            )
        decisions.append((change, observation, snap))
    if dry_run:
        return Confirmation(job=job, dry_run=True)
    gw.crash_point(Operation.ACCEPT_OBSERVED, "after_readback")
    states = {c.index: c.state for c in job.changes}
    for change, observation, _ in decisions:
        states[change.index] = (
            ChangeState.APPLIED
            if observation is Observation.LOOKS_APPLIED
            else ChangeState.UNDONE
            if observation is Observation.LOOKS_UNDONE
            else ChangeState.PENDING
        )
    final = state_after_settling([states[c.index] for c in job.changes], job.undo_started)
    check_transition(Transition.ACCEPT_OBSERVED, job.state, final)
    uncertain = {
        a.change_index: a.id
        for a in job.actions
        if a.status in (ActionStatus.UNCERTAIN, ActionStatus.DISPATCHING)
    }

    def commit(tx: Transaction) -> Job:
        tx.claim_preview(token_hash, job.id, job.state.value)
        tx.count_confirm_attempt(job.id)
        for change, observation, snap in decisions:
            action_id = uncertain.get(change.index)
            if action_id is not None:
                tx.finish_action(action_id, ActionStatus.ACCEPTED, observation=observation)
            new_state = states[change.index]
            tx.set_change_state(
                job.id,
                change.index,
                new_state,
                applied_etag=(
                    snap.etag.header if new_state is ChangeState.APPLIED and snap.exists else None
                ),
                stamp_seq=new_state is ChangeState.APPLIED,
                # A create whose answer was lost learns here which record it made.
                target=snap.target if new_state is ChangeState.APPLIED else None,
            )
            tx.add_event(
                job_id=job.id,
                actor=actor.label,
                access_path=actor.access_path,
                operation="accept_observed",
                target=change.resource_id,
                from_state=ChangeState.UNCERTAIN.value,
                to_state=new_state.value,
                detail={
                    "observation": observation.value,
                    "note": "the reviewer accepted the observed state; this is not proof "
                    "that the request ran",
                },
            )
        tx.set_job_state(job.id, final)
        gw.notifier.job_moved(tx, job, final, previous=job.state)
        tx.add_event(
            job_id=job.id,
            actor=actor.label,
            access_path=actor.access_path,
            operation="reconciled",
            from_state=job.state.value,
            to_state=final.value,
        )
        done = tx.load_job(job.id)  # as this commit leaves it: no read of its own after
        assert done is not None
        return done

    done = gw.ledger.write(commit)
    gw.crash_point(Operation.ACCEPT_OBSERVED, "after_outcome")
    return Confirmation(job=done)
