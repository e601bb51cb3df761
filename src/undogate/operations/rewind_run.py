"""Running a confirmed rewind plan, and what it did (docs/rewind.md).

A plan's undos run newest first, one job's consecutive steps at a time, through the same
``Dispatch`` a job's own undo uses: each step's intent is committed before its request
and its outcome after, the job moves ``undoing`` and back, and an uncertain outcome
quarantines as always. Each write is built from what the resource shows as the step
before it left it (the preview's read, then each write's own read-back), so its
``If-Match`` names exactly that version. The run stops at the first step that is not
done.

What the plan did is read back from the jobs' actions, never kept a second time: after a
crash the report still says exactly which steps ran.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..adapters import Side, Snapshot, adapter_for
from ..digests import sha256_hex
from ..errors import LedgerError, UndogateError
from ..jobs import Action, ActionStatus, Actor, ChangeState, Job, Operation
from ..jsonvalue import JsonObject
from ..ledger import StoredRewind, Transaction
from .context import Context
from .dispatch import Dispatch
from .preview import PlannedWrite
from .rewind_plan import PlannedUndo, Step, StepVerdict, read_key

# The codes a stop at a step that sent its write carries (``_stopped_at``: its action's
# status); any other code is a refusal before the write.
_WRITE_OUTCOMES = frozenset(status.value for status in ActionStatus)


class StepOutcome:
    """What a plan's step came to once the plan ran (``done``, ``refused``,
    ``uncertain``, ``not_run``), or why it never was to run (its verdict)."""

    DONE = "done"
    REFUSED = "refused"
    UNCERTAIN = "uncertain"
    NOT_RUN = "not_run"
    SKIPPED = "skipped"  # blocked, and the reviewer confirmed with skip_blocked


@dataclass(frozen=True)
class Stopped:
    """Where and why a run stopped before its last step."""

    step: int
    code: str
    message: str

    def to_json(self) -> JsonObject:
        return {"step": str(self.step), "code": self.code, "message": self.message}


def run_undos(
    gw: Context,
    actor: Actor,
    undos: Sequence[PlannedUndo],
    reads: Mapping[str, Snapshot],
    reauthorize: Callable[[], None] | None,
    deadline: float,
) -> Stopped | None:
    """Dispatch ``undos`` in order, a job's consecutive steps per dispatch; None when
    every one was done.

    Raises: LedgerError (an outcome the ledger could not record: the write stays held as
    uncertain, and the plan's report says so)."""
    latest = dict(reads)
    for run in _runs(undos):
        job = gw.ledger.load_job(run[0].step.job_id)
        assert job is not None  # a plan's jobs are never deleted
        writes: list[PlannedWrite] = []
        for undo in run:
            change = job.changes[undo.change.index]
            res = gw.resource(change.resource_id)
            adapter = adapter_for(change.kind)
            write = adapter.build_write(res, change, latest[read_key(change)], Side.BEFORE)
            writes.append(PlannedWrite(change, res, adapter, write))
        dispatch = Dispatch(
            ledger=gw.ledger,
            wire=gw.wire,
            actor_label=actor.label,
            access_path=actor.access_path,
            job=job,
            operation=Operation.UNDO,
            writes=writes,
            token_hash=_hold_preview(gw, job, writes, latest),
            deadline=deadline,
            reauthorize=reauthorize,
            crash_point=gw.crash_point,
            notifier=gw.notifier,
        )
        try:
            with gw.live.running(job.id):
                done = dispatch.run()
        except LedgerError:
            raise
        except UndogateError as exc:
            # Refused before its first write (the job moved since the confirm's walk:
            # someone else undid it meanwhile, or it is held): that step never ran.
            where = f"step {run[0].step.number} (job {job.id})"
            return Stopped(run[0].step.number, exc.code, f"{where}: not sent: {exc.message}")
        for index, snap in dispatch.read_backs.items():
            latest[read_key(done.changes[index])] = snap
        for undo in run:
            if done.changes[undo.change.index].state is not ChangeState.UNDONE:
                ran = done.actions[len(job.actions) :]
                return _stopped_at(undo.step, done, ran, dispatch.stopped_by)
    return None


def _hold_preview(
    gw: Context, job: Job, writes: Sequence[PlannedWrite], latest: Mapping[str, Snapshot]
) -> str:
    """A preview of the job's undo over exactly these versions, which the dispatch
    claims as a job's own undo claims its preview; returns its token's hash."""
    token_hash = sha256_hex(secrets.token_urlsafe(32))
    versions: JsonObject = {str(p.change.index): latest[read_key(p.change)].version for p in writes}
    expires_at = gw.clock() + gw.config.server.preview_ttl_s

    def hold(tx: Transaction) -> None:
        tx.insert_preview(
            token_hash=token_hash,
            job_id=job.id,
            operation=Operation.UNDO,
            expires_at=expires_at,
            snapshot=versions,
        )

    gw.ledger.write(hold)
    return token_hash


def _runs(undos: Sequence[PlannedUndo]) -> Iterator[list[PlannedUndo]]:
    """The undos in order, cut where the job changes."""
    run: list[PlannedUndo] = []
    for undo in undos:
        if run and run[-1].step.job_id != undo.step.job_id:
            yield run
            run = []
        run.append(undo)
    if run:
        yield run


def _stopped_at(
    step: Step, job: Job, ran: Sequence[Action], stopped_by: UndogateError | None
) -> Stopped:
    """Why the run stopped at ``step``: the action this run recorded for it (``ran``:
    the job's actions this dispatch added), or the reason it never began, never an
    action of an earlier undo of the same change."""
    where = f"step {step.number} (job {job.id})"
    last = _last_undo(ran, step.change, since=None)
    if last is not None:
        detail = last.detail or "the write did not land"
        return Stopped(step.number, last.status.value, f"{where}: {detail}")
    assert stopped_by is not None  # a run stops at an outcome, or before a write it never began
    return Stopped(step.number, stopped_by.code, f"{where}: not sent: {stopped_by.message}")


def _last_undo(actions: Sequence[Action], index: int, since: float | None) -> Action | None:
    found = [
        a
        for a in actions
        if a.change_index == index
        and a.operation is Operation.UNDO
        and (since is None or a.started_at >= since)
    ]
    return found[-1] if found else None


def step_outcome(rewind: StoredRewind, step: Step, job: Job | None) -> str | None:
    """What ``step`` came to, read from its job's actions since the plan was confirmed
    (None before it was). Where the run stopped says which of them are the plan's: no
    step after it ran, nor the step itself when the run stopped before its write (an
    undo of the same job that someone else ran meanwhile is not this plan's)."""
    if rewind.confirmed_at is None:
        return None
    if step.verdict is not StepVerdict.UNDO:
        if step.verdict is StepVerdict.BLOCKED and rewind.skip_blocked:
            return StepOutcome.SKIPPED
        return StepOutcome.NOT_RUN
    stopped = rewind.stopped
    if stopped is not None:
        at = int(str(stopped["step"]))
        sent = str(stopped["code"]) in _WRITE_OUTCOMES
        if step.number > at or (step.number == at and not sent):
            return StepOutcome.NOT_RUN
    last = _last_undo(job.actions, step.change, rewind.confirmed_at) if job is not None else None
    if last is None:
        return StepOutcome.NOT_RUN
    if last.status is ActionStatus.DONE:
        return StepOutcome.DONE
    if last.status is ActionStatus.REFUSED:
        return StepOutcome.REFUSED
    return StepOutcome.UNCERTAIN  # uncertain, still in flight, or accepted by a reviewer


def job_outcomes(outcomes: Sequence[tuple[Step, str | None]]) -> dict[str, str]:
    """Per job of the plan: ``uncertain`` when a step is, ``done`` when every step it had
    to run was, ``not_run`` when none was, else ``partly_done``."""
    per_job: dict[str, list[str]] = {}
    for step, outcome in outcomes:
        if step.verdict is StepVerdict.UNDO and outcome is not None:
            per_job.setdefault(step.job_id, []).append(outcome)
    result: dict[str, str] = {}
    for job_id, seen in per_job.items():
        if StepOutcome.UNCERTAIN in seen:
            result[job_id] = StepOutcome.UNCERTAIN
        elif all(o == StepOutcome.DONE for o in seen):
            result[job_id] = StepOutcome.DONE
        elif StepOutcome.DONE not in seen:
            result[job_id] = StepOutcome.NOT_RUN
        else:
            result[job_id] = "partly_done"
    return result


__all__ = ["StepOutcome", "Stopped", "job_outcomes", "run_undos", "step_outcome"]
