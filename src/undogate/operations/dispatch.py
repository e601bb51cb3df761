"""One confirm's run of external writes: record before, act, record after.

For every action: re-check the reviewer and the token variable, commit the intent
(``dispatching``), send the conditional write on a fresh connection, classify the
answer (docs/remote-contract.md), read back, commit the outcome. The operation's start
folds into the first intent's commit and its finish into the last outcome's, so a run of *n* writes
costs exactly 2·*n* durable commits: the least that records each intent before its
request and each outcome after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

from ..adapters import Side, Snapshot, Verdict, Wire, adapter_for
from ..chain.seals import changes_problem, state_problem
from ..errors import BlockedAddress, LedgerError, LedgerTampered, MissingToken, UndogateError
from ..jobs import (
    JOB_MOVES,
    ActionStatus,
    Change,
    ChangeState,
    Job,
    JobState,
    Operation,
    Transition,
    check_transition,
    state_after_apply,
    state_after_undo,
)
from ..jsonvalue import JsonObject
from ..ledger import Answer, Event, Store, Transaction
from ..net import RemoteResponse, TransportFailure
from ..webhooks.events import Notifier
from .endpoint_check import stale_statuses_seen
from .overlaps import find_blockers, refuse_blocked
from .preview import PlannedWrite


def _lease_lost() -> LedgerError:
    """Raised inside a write when this process's lease expired while it ran the job and
    another process settled its work (docs/scaling.md): its late steps are refused, never
    recorded."""
    return LedgerError(
        "this gateway process's lease on the ledger expired while it ran this job (the ledger "
        "was out of reach, or the process stalled), and another process settled its write "
        "in flight as uncertain; reconcile it",
        lease="expired",
    )


@dataclass
class Outcome:
    status: ActionStatus
    response_status: int | None = None
    result_etag: str | None = None
    address: str | None = None
    detail: str | None = None
    target: str | None = None  # the part the write landed on, once known
    read_back: Snapshot | None = None  # what the resource showed once it landed


@dataclass
class Dispatch:
    """The writes of one confirmed apply or undo, run in order until one does not land."""

    ledger: Store
    wire: Wire
    actor_label: str
    access_path: str
    job: Job
    operation: Operation
    writes: list[PlannedWrite]
    token_hash: str
    deadline: float
    reauthorize: Callable[[], None] | None
    crash_point: Callable[[Operation, str], None]
    notifier: Notifier

    def __post_init__(self) -> None:
        self.running = JobState.APPLYING if self.operation is Operation.APPLY else JobState.UNDOING
        self.states = {c.index: c.state for c in self.job.changes}
        self.started = False
        self.finished: Job | None = None
        # change index -> what the resource showed once its write landed (a rewind plans
        # the next write on the resource from it)
        self.read_backs: dict[int, Snapshot] = {}
        # Why the run stopped before a write it never began (its re-check failed): a
        # rewind's report says so instead of that change's older actions.
        self.stopped_by: UndogateError | None = None

    def run(self) -> Job:
        """Returns the job as the run's last commit left it.

        Raises: the re-check's error when it fails before anything was recorded."""
        start_event = (
            Transition.START_APPLY if self.operation is Operation.APPLY else Transition.START_UNDO
        )
        check_transition(start_event, self.job.state, self.running)
        for number, planned in enumerate(self.writes):
            last = number == len(self.writes) - 1
            if not self._step(planned, last):
                break
        assert self.finished is not None  # every run ends in ``_finish_rows``
        return self.finished

    def _step(self, planned: PlannedWrite, last: bool) -> bool:
        """One action; False when the run stops here (its finish is then recorded)."""
        try:
            if self.reauthorize is not None:
                self.reauthorize()
            self.wire.check_credentials(planned.resource)
            action_id = self.ledger.write(partial(self._intent_rows, planned=planned)).value()
            self.started = True  # only once that first intent is committed
        except UndogateError as exc:
            if not self.started or isinstance(exc, LedgerError):
                raise  # nothing recorded for this step, nothing sent
            self.ledger.write(partial(self._stop_rows, change=planned.change, exc=exc))
            self.stopped_by = exc
            return False
        self.crash_point(self.operation, "after_intent")
        try:
            outcome = self._send_and_verify(planned)
        except BaseException:
            # Whatever broke, the request may have left: never leave it looking unsent.
            failed = Outcome(ActionStatus.UNCERTAIN, detail="the gateway failed mid-dispatch")
            self._record_outcome(planned, action_id, failed, finish=True)
            raise
        if outcome.read_back is not None:
            self.read_backs[planned.change.index] = outcome.read_back
        stop = last or outcome.status is not ActionStatus.DONE
        self._record_outcome(planned, action_id, outcome, finish=stop)
        self.crash_point(self.operation, "after_outcome")
        return not stop

    def _record_outcome(
        self, planned: PlannedWrite, action_id: int, outcome: Outcome, *, finish: bool
    ) -> None:
        """Raises: LedgerError naming the write whose outcome is now unknown to the ledger
        (the action stays ``dispatching``, which holds its fields like a quarantine until
        the gateway settles it as ``uncertain``)."""
        try:
            self.ledger.write(
                partial(
                    self._outcome_rows,
                    change=planned.change,
                    action_id=action_id,
                    outcome=outcome,
                    finish=finish,
                )
            )
        except LedgerError as exc:
            raise LedgerError(
                f"the {planned.write.method} to {planned.change.resource_id} was sent, but the "
                f"ledger could not record its outcome ({exc.message}). The write is treated "
                "as uncertain: its fields stay quarantined until a reviewer reconciles it",
                job=self.job.id,
                resource=planned.change.resource_id,
                action=action_id,
                **exc.details,
            ) from exc

    # -- ledger rows (each called inside Store.write) -----------------------------------

    def _event(
        self,
        tx: Transaction,
        operation: str,
        *,
        target: str | None = None,
        from_state: str | None = None,
        to_state: str | None = None,
        detail: JsonObject | None = None,
    ) -> None:
        tx.add_event(
            job_id=self.job.id,
            actor=self.actor_label,
            access_path=self.access_path,
            operation=operation,
            target=target,
            from_state=from_state,
            to_state=to_state,
            detail=detail,
        )

    def _intent_rows(self, tx: Transaction, planned: PlannedWrite) -> Answer[int]:
        # Checked again here, in the transaction that records the intent: another job may
        # have gone uncertain, started a write or applied since this confirm planned.
        # Both questions are asked before either answer is read (one round trip).
        tx.lock_resources([planned.change.resource_id])
        held = tx.holds_job(self.job.id) if self.started else None
        blockers = find_blockers(tx, self.job, [planned.change], self.operation)
        if held is not None and not held.value():
            raise _lease_lost()
        refuse_blocked(blockers)
        if not self.started:
            tx.claim_preview(self.token_hash, self.job.id, self.job.state.value)
            # After the claim, which holds the job and finds it as loaded (a race lost
            # is a spent preview, not a disagreement with the chain).
            refuse_tampered(self.job, tx.events(self.job.id))
            tx.count_confirm_attempt(self.job.id)
            tx.set_job_state(
                self.job.id,
                self.running,
                undo_started=True if self.operation is Operation.UNDO else None,
            )
            self._event(
                tx,
                f"confirm_{self.operation.value}",
                from_state=self.job.state.value,
                to_state=self.running.value,
            )
        return tx.begin_action(
            job_id=self.job.id,
            change_idx=planned.change.index,
            operation=self.operation,
            method=planned.write.method,
            url=planned.write.url,
            if_match=planned.write.if_match,
        )

    def _outcome_rows(
        self,
        tx: Transaction,
        change: Change,
        action_id: int,
        outcome: Outcome,
        finish: bool,
    ) -> None:
        new_state = change_state_after(self.operation, outcome.status, change)
        in_flight = tx.finish_action(
            action_id,
            outcome.status,
            response_status=outcome.response_status,
            result_etag=outcome.result_etag,
            address=outcome.address,
            detail=outcome.detail,
        )

        def still_in_flight() -> None:
            if not in_flight.value():
                raise _lease_lost()

        # The answer is read at the commit, with the write's other checks: one round trip less.
        tx.check_before_commit(still_in_flight)
        applied = self.operation is Operation.APPLY and outcome.status is ActionStatus.DONE
        tx.set_change_state(
            self.job.id,
            change.index,
            new_state,
            applied_etag=outcome.result_etag if applied else None,
            stamp_seq=applied,
            target=outcome.target,
        )
        self._event(
            tx,
            f"{self.operation.value}_{outcome.status.value}",
            target=change.resource_id,
            from_state=change.state.value,
            to_state=new_state.value,
            detail=outcome_detail(change, self.operation, outcome),
        )
        self.states[change.index] = new_state
        if finish:
            self._finish_rows(tx)

    def _stop_rows(self, tx: Transaction, change: Change, exc: UndogateError) -> None:
        self._event(
            tx,
            "dispatch_stopped",
            target=change.resource_id,
            detail={"code": exc.code, "message": exc.message},
        )
        self._finish_rows(tx)

    def _finish_rows(self, tx: Transaction) -> None:
        ordered = [self.states[ch.index] for ch in self.job.changes]
        final = (
            state_after_apply(ordered)
            if self.operation is Operation.APPLY
            else state_after_undo(ordered, self.job.state)
        )
        event = (
            Transition.FINISH_APPLY if self.operation is Operation.APPLY else Transition.FINISH_UNDO
        )
        check_transition(event, self.running, final)
        tx.set_job_state(self.job.id, final)
        self.notifier.job_moved(tx, self.job, final, previous=self.running)
        self._event(
            tx,
            f"finish_{self.operation.value}",
            from_state=self.running.value,
            to_state=final.value,
        )
        # The job as this commit leaves it, read inside it: no read of its own after.
        self.finished = tx.load_job(self.job.id)

    # -- the wire ---------------------------------------------------------------------------

    def _send_and_verify(self, planned: PlannedWrite) -> Outcome:
        try:
            response = self.wire.send_write(planned.resource, planned.write, self.deadline)
        except (BlockedAddress, MissingToken) as exc:
            return Outcome(ActionStatus.REFUSED, detail=f"not sent: {exc.message}")
        except TransportFailure as exc:
            status = ActionStatus.UNCERTAIN if exc.sent else ActionStatus.REFUSED
            prefix = "sent, outcome unknown" if exc.sent else "not sent"
            return Outcome(status, detail=f"{prefix}: {exc.reason}")
        self.crash_point(self.operation, "after_response")
        return self._classify(planned, response)

    def _classify(self, planned: PlannedWrite, response: RemoteResponse) -> Outcome:
        """What the answer says on its own (the kind's reading of it), then, for
        a success, what the read-back shows."""
        status = response.status

        def uncertain(detail: str) -> Outcome:
            return Outcome(ActionStatus.UNCERTAIN, status, address=response.address, detail=detail)

        # What the endpoint check saw this endpoint refuse a stale write with: the only
        # evidence that turns such an answer (other than 412) into a refusal. Read only
        # for such an answer: on PostgreSQL a read is a transaction of its own.
        seen: frozenset[int] = frozenset()
        if planned.adapter.needs_stale_evidence(planned.resource, response):
            seen = self.ledger.read(partial(stale_statuses_seen, resource=planned.resource))
        verdict = planned.adapter.verdict(planned.resource, planned.write, response, seen)
        if verdict is Verdict.REFUSED:
            return Outcome(
                ActionStatus.REFUSED,
                status,
                address=response.address,
                detail=f"the server refused the write (HTTP {status}); it changed nothing",
            )
        if verdict is Verdict.UNCERTAIN:
            return uncertain(f"HTTP {status}: the server may or may not have applied the write")
        target = Side.AFTER if self.operation is Operation.APPLY else Side.BEFORE
        adapter = planned.adapter
        # A create may learn only now where it landed (a POST's Location): read that.
        landed = adapter.written_target(planned.resource, planned.change, planned.write, response)
        change = replace(planned.change, target=landed)
        try:
            snap = adapter.read_change(self.wire, planned.resource, change, self.deadline)
        except UndogateError as exc:
            return uncertain(f"read-back failed: {exc.message}")
        self.crash_point(self.operation, "after_readback")
        problem = adapter.read_back_problem(change, planned.write, response, snap, target)
        if problem is not None:
            return uncertain(problem)
        return Outcome(
            ActionStatus.DONE,
            response_status=status,
            result_etag=snap.etag.header if snap.exists else None,
            address=response.address or snap.address,
            target=snap.target or landed,
            read_back=snap,
        )


def refuse_tampered(job: Job, events: list[Event]) -> None:
    """Hold what a confirm is about to write from (the job's changes, loaded before its
    requests were built) and the state it starts from to what the chain recorded of them:
    the prepare event's seals and the last event that moved the job (``seals``).

    Raises:
        LedgerTampered: they differ; nothing is recorded or sent.
    """
    moves = [e.to_state for e in events if e.job_id == job.id and e.operation in JOB_MOVES]
    problem = state_problem(job.state.value, moves[-1] if moves else None)
    prepared = next((e for e in events if e.operation == "prepare"), None)
    if not problem and prepared is not None and prepared.detail is not None:
        problem = changes_problem(job.changes, prepared.detail.get("seals"))
    if problem:
        raise LedgerTampered(
            f"job {job.id} in the ledger is not what its hash chain recorded: {problem}. "
            "Nothing was written. Run `undogate ledger verify` and restore the ledger from "
            "a backup you trust",
            job=job.id,
        )


def change_state_after(operation: Operation, status: ActionStatus, change: Change) -> ChangeState:
    if status is ActionStatus.DONE:
        return ChangeState.APPLIED if operation is Operation.APPLY else ChangeState.UNDONE
    if status is ActionStatus.UNCERTAIN:
        return ChangeState.UNCERTAIN
    return change.state


def change_diff(change: Change, toward: Side = Side.AFTER) -> JsonObject:
    """What an event records of a change moving toward one of its sides (the kind says
    what: fields for records, sizes for documents, whose values live in the job)."""
    diff: JsonObject = {"resource": change.resource_id, "index": str(change.index)}
    diff.update(adapter_for(change.kind).event_diff(change, toward))
    return diff


def outcome_detail(change: Change, operation: Operation, outcome: Outcome) -> JsonObject:
    detail: JsonObject = {"change": str(change.index), "status": outcome.status.value}
    if outcome.response_status is not None:
        detail["http_status"] = str(outcome.response_status)
    if outcome.detail:
        detail["detail"] = outcome.detail
    if outcome.result_etag:
        detail["etag"] = outcome.result_etag
    if outcome.status is ActionStatus.DONE:
        toward = Side.BEFORE if operation is Operation.UNDO else Side.AFTER
        detail["diff"] = change_diff(change, toward)
    return detail
