"""Start-up recovery: what a stop left behind becomes visible, nothing is retried.

Every action still marked ``dispatching`` (its intent committed, its outcome not) by a
process that is gone (its lease ended or expired, ``ledger.sql_leases``; or a ledger's
one owner from before leases) becomes ``uncertain``, which
quarantines what it touched; every operation cut off between two writes settles where
its changes stand; every unfinished job whose resource identity changed in the config is
``invalidated``. It reads only what needs attention, through indexes of exactly those
rows, never every job.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

from ..config import Config
from ..errors import LedgerError, UndogateError
from ..jobs import (
    ActionStatus,
    ChangeState,
    JobState,
    Transition,
    check_transition,
    state_after_apply,
    state_after_undo,
)
from ..ledger import Store, Transaction
from ..webhooks.events import Notifier

log = logging.getLogger(__name__)

SYSTEM_LABEL = "system:undogate"

# (the event's reason, the action's detail) for each way a write can be cut off.
RESTART = (
    "interrupted by a restart",
    "the gateway stopped while this write was in flight; outcome unknown",
)
LEASE_EXPIRED = (
    "the gateway process running it stopped renewing its lease",
    "the gateway process that sent this write stopped renewing its lease (it died, or "
    "lost the ledger) while the write was in flight; outcome unknown",
)
UNRECORDED = (
    "the ledger could not record this write's outcome",
    "the write was sent but the ledger could not record its outcome; outcome unknown",
)


def recover(ledger: Store, config: Config) -> dict[str, int]:
    """Run start-up recovery in one transaction; returns what it did, counted. It
    settles only the work of processes whose lease ended or expired, never a live
    process's writes in flight."""
    counts = {"uncertain": 0, "settled": 0, "invalidated": 0}

    notifier = Notifier(config.webhooks, config.server.public_url)

    def run(tx: Transaction) -> None:
        _settle_in(tx, _orphaned(tx, frozenset(), own=False), RESTART, counts, notifier)
        _invalidate_changed(tx, config, counts)

    ledger.write(run)
    return counts


def settle_expired(
    ledger: Store, live_jobs: Callable[[], Collection[str]], notifier: Notifier
) -> dict[str, int]:
    """What a running gateway does every few seconds: end the leases
    that expired and settle their processes' work (writes in flight become
    ``uncertain``, their jobs settle), as a restart would. Its own work is never
    touched: its lease is open.

    Raises: LedgerError when the ledger cannot record it (the next sweep tries again)."""
    counts = {"uncertain": 0, "settled": 0}

    def run(tx: Transaction) -> None:
        orphaned = _orphaned(tx, frozenset(live_jobs()), own=False)
        _settle_in(tx, orphaned, RESTART, counts, notifier)

    ledger.write(run)
    return counts


def settle_interrupted(
    ledger: Store, live_jobs: Callable[[], Collection[str]], notifier: Notifier
) -> dict[str, int]:
    """In a running gateway, what start-up recovery does for a restart: every write left
    ``dispatching`` by a confirm of this process that is no longer running (its outcome
    could not be recorded) becomes ``uncertain``, and its job settles. ``live_jobs`` is
    read inside the write transaction, so a confirm that recorded an intent is always
    seen as live.

    Raises: LedgerError when the ledger still cannot record it."""
    counts = {"uncertain": 0, "settled": 0}

    def run(tx: Transaction) -> None:
        orphaned = _orphaned(tx, frozenset(live_jobs()), own=True)
        _settle_in(tx, orphaned, UNRECORDED, counts, notifier)

    ledger.write(run)
    return counts


Orphaned = Callable[[str, "str | None"], bool]


def _orphaned(tx: Transaction, live_jobs: frozenset[str], *, own: bool) -> Orphaned:
    """Whether work (a job, the lease that runs it) has nobody left to finish it: not a
    confirm this process runs now, and its lease ended, expired (ended now, in this
    write), absent (a ledger's one owner from before leases), or (``own``) this
    process's."""
    tx.end_expired_leases()
    still_open = tx.open_leases()
    mine = tx.own_lease

    def orphaned(job_id: str, lease: str | None) -> bool:
        if job_id in live_jobs:
            return False
        if lease is None or lease not in still_open:
            return True
        return own and lease == mine

    return orphaned


def _settle_in(
    tx: Transaction,
    orphaned: Orphaned,
    cause: tuple[str, str],
    counts: dict[str, int],
    notifier: Notifier,
) -> None:
    mine = tx.own_lease
    for action in tx.in_flight_actions():
        if not orphaned(action.job_id, action.lease_id):
            continue
        elsewhere = action.lease_id is not None and action.lease_id != mine
        reason, action_detail = LEASE_EXPIRED if elsewhere else cause
        # False: its own process recorded an outcome first; nothing to settle.
        if not tx.finish_action(action.id, ActionStatus.UNCERTAIN, detail=action_detail).value():
            continue
        tx.set_change_state(action.job_id, action.change_index, ChangeState.UNCERTAIN)
        tx.add_event(
            job_id=action.job_id,
            actor=SYSTEM_LABEL,
            access_path="system",
            operation=f"{action.operation.value}_uncertain",
            target=str(action.change_index),
            to_state=ChangeState.UNCERTAIN.value,
            detail={"reason": reason},
        )
        counts["uncertain"] += 1
    for job_id, runner in tx.job_runners().items():
        if not orphaned(job_id, runner):
            continue
        job = tx.load_job(job_id, with_actions=False)
        if job is None or job.state not in (JobState.APPLYING, JobState.UNDOING):
            continue  # another process settled it since the list was read
        states = [ch.state for ch in job.changes]
        if job.state is JobState.APPLYING:
            final = state_after_apply(states)
        else:
            final = state_after_undo(states, JobState.APPLIED)
            if final is JobState.APPLIED and any(s is ChangeState.UNDONE for s in states):
                final = JobState.PARTIALLY_UNDONE
            if final is JobState.APPLIED and any(s is ChangeState.PENDING for s in states):
                final = JobState.PARTIALLY_APPLIED
        check_transition(Transition.CRASH_RECOVERED, job.state, final)
        tx.set_job_state(job_id, final)
        notifier.job_moved(tx, job, final, previous=job.state)
        tx.add_event(
            job_id=job_id,
            actor=SYSTEM_LABEL,
            access_path="system",
            operation="crash_recovered",
            from_state=job.state.value,
            to_state=final.value,
        )
        counts["settled"] += 1


def _invalidate_changed(tx: Transaction, config: Config, counts: dict[str, int]) -> None:
    known = tx.resource_identities()
    current = {r.id: r.fingerprint for r in config.resources}
    changed = [rid for rid, fp in known.items() if current.get(rid) != fp]
    for rid in changed:
        for job_id, from_state in tx.unfinished_jobs_on(rid, current.get(rid, "")):
            if from_state in (JobState.APPLYING, JobState.UNDOING):
                # Another live process runs it (a restart settled every other one just
                # before): left to it. A preview under the new identity refuses it after.
                continue
            if from_state is JobState.NEEDS_REVIEW:
                # An uncertain write keeps its quarantine until a person reconciles it,
                # under the configuration it was made with.
                tx.add_event(
                    job_id=job_id,
                    actor=SYSTEM_LABEL,
                    access_path="system",
                    operation="identity_changed",
                    target=rid,
                    detail={
                        "reason": f"the identity of resource {rid!r} changed in the config; "
                        "this job needs review, so it stays quarantined: reconcile it under "
                        "the configuration it was prepared with"
                    },
                )
                continue
            reason = (
                f"the identity of resource {rid!r} changed in the config (URL, kind, "
                "token variable, network flags, pointer or fields)"
                if rid in current
                else f"resource {rid!r} was removed from the config"
            )
            check_transition(Transition.INVALIDATE, from_state, JobState.INVALIDATED)
            tx.set_job_state(job_id, JobState.INVALIDATED, invalidated_reason=reason)
            tx.add_event(
                job_id=job_id,
                actor=SYSTEM_LABEL,
                access_path="system",
                operation="invalidate",
                target=rid,
                from_state=from_state.value,
                to_state=JobState.INVALIDATED.value,
                detail={"reason": reason},
            )
            counts["invalidated"] += 1
    tx.replace_resource_identities(current)


class LiveDispatches:
    """The confirms this process is running right now, and whether one of them ended
    without its outcome recorded (the ledger refused the write: a full disk). Until that
    is settled the ledger shows a write ``dispatching`` that nobody runs; it holds its
    fields like a quarantine meanwhile, and ``settle`` turns it into ``uncertain``."""

    def __init__(self, ledger: Store, notifier: Notifier) -> None:
        self._ledger = ledger
        #: Announces the jobs this process's settling moves (the lease sweep's too).
        self.notifier = notifier
        #: Called when a confirm leaves work unsettled: the process's own loop
        #: (``lease_sweep``) then settles it as soon as the ledger answers, whether or
        #: not a request comes.
        self.on_unsettled: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._jobs: set[str] = set()
        self._unsettled = False

    @property
    def unsettled(self) -> bool:
        """Whether a confirm of this process ended with a write whose outcome the
        ledger could not record, not settled yet."""
        return self._unsettled

    @contextmanager
    def running(self, job_id: str) -> Iterator[None]:
        with self._lock:
            self._jobs.add(job_id)
        try:
            yield
        except UndogateError as exc:
            if isinstance(exc, LedgerError):
                self._unsettled = True
            raise
        except BaseException:
            self._unsettled = True
            raise
        finally:
            with self._lock:
                self._jobs.discard(job_id)
            if self._unsettled and self.on_unsettled is not None:
                self.on_unsettled()
            if self._unsettled:
                try:
                    self.settle()
                except LedgerError:
                    log.warning("the ledger still refuses writes; interrupted work stays held")

    def settle(self) -> None:
        """Settle what a failed confirm left in flight, if anything.

        Raises: LedgerError while the ledger still cannot record it (the caller's step
        fails closed: nothing new runs on a ledger that cannot record it)."""
        if not self._unsettled:
            return
        counts = settle_interrupted(self._ledger, self.jobs, self.notifier)
        self._unsettled = False
        if counts["uncertain"] or counts["settled"]:
            log.warning(
                "settled interrupted work: %d write(s) now uncertain (quarantined until a "
                "reviewer reconciles them), %d job(s) settled",
                counts["uncertain"],
                counts["settled"],
            )

    def jobs(self) -> frozenset[str]:
        """The jobs this process's confirms are running now."""
        with self._lock:
            return frozenset(self._jobs)
