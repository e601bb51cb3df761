"""Start-up recovery: what a stop left behind becomes visible, nothing is retried.

Every action still marked ``dispatching`` (its intent committed, its outcome not)
becomes ``uncertain``, which quarantines what it touched; every operation cut off
between two writes settles where its changes stand; every unfinished job whose resource
identity changed in the config is ``invalidated``. It reads only what needs attention,
through indexes of exactly those rows, never every job.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

from ..config import Config
from ..errors import LedgerError, UndogateError
from ..jobs import (
    ActionStatus,
    ChangeState,
    JobState,
    check_transition,
    state_after_apply,
    state_after_undo,
)
from ..ledger import Ledger

log = logging.getLogger(__name__)

SYSTEM_LABEL = "system:undogate"

# Each of these is served by a partial index (actions_in_flight, jobs_running); the
# tests check the query plans, so start-up stays flat as the ledger grows.
IN_FLIGHT_ACTIONS = (
    "SELECT id, job_id, change_idx, operation FROM actions WHERE status = 'dispatching'"
)
RUNNING_JOBS = "SELECT id FROM jobs WHERE state IN ('applying', 'undoing')"


# (the event's reason, the action's detail) for each way a write can be cut off.
RESTART = (
    "interrupted by a restart",
    "the gateway stopped while this write was in flight; outcome unknown",
)
UNRECORDED = (
    "the ledger could not record this write's outcome",
    "the write was sent but the ledger could not record its outcome; outcome unknown",
)


def recover(ledger: Ledger, config: Config) -> dict[str, int]:
    """Run start-up recovery in one transaction; returns what it did, counted."""
    counts = {"uncertain": 0, "settled": 0, "invalidated": 0}

    def run(c: sqlite3.Connection) -> None:
        _settle_in(c, frozenset(), RESTART, counts)
        _invalidate_changed(c, config, counts)

    ledger.write(run)
    return counts


def settle_interrupted(ledger: Ledger, live_jobs: Callable[[], Collection[str]]) -> dict[str, int]:
    """In a running gateway, what start-up recovery does for a restart: every write left
    ``dispatching`` by a confirm that is no longer running (its outcome could not be
    recorded) becomes ``uncertain``, and its job settles. ``live_jobs`` is read inside
    the write transaction, so a confirm that recorded an intent is always seen as live.

    Raises: LedgerError when the ledger still cannot record it."""
    counts = {"uncertain": 0, "settled": 0}
    ledger.write(lambda c: _settle_in(c, frozenset(live_jobs()), UNRECORDED, counts))
    return counts


def _settle_in(
    c: sqlite3.Connection, live: frozenset[str], cause: tuple[str, str], counts: dict[str, int]
) -> None:
    reason, action_detail = cause
    for action_id, job_id, idx, op in c.execute(IN_FLIGHT_ACTIONS).fetchall():
        if job_id in live:
            continue
        Ledger.finish_action(
            c,
            action_id,
            ActionStatus.UNCERTAIN,
            detail=action_detail,
        )
        Ledger.set_change_state(c, job_id, idx, ChangeState.UNCERTAIN)
        Ledger.add_event(
            c,
            job_id=job_id,
            actor=SYSTEM_LABEL,
            access_path="system",
            operation=f"{op}_uncertain",
            target=str(idx),
            to_state=ChangeState.UNCERTAIN.value,
            detail={"reason": reason},
        )
        counts["uncertain"] += 1
    for (job_id,) in c.execute(RUNNING_JOBS).fetchall():
        if job_id in live:
            continue
        job = Ledger.load_job_in(c, job_id, with_actions=False)
        assert job is not None
        states = [ch.state for ch in job.changes]
        if job.state is JobState.APPLYING:
            final = state_after_apply(states)
        else:
            final = state_after_undo(states, JobState.APPLIED)
            if final is JobState.APPLIED and any(s is ChangeState.UNDONE for s in states):
                final = JobState.PARTIALLY_UNDONE
            if final is JobState.APPLIED and any(s is ChangeState.PENDING for s in states):
                final = JobState.PARTIALLY_APPLIED
        check_transition("crash_recovered", job.state, final)
        Ledger.set_job_state(c, job_id, final)
        Ledger.add_event(
            c,
            job_id=job_id,
            actor=SYSTEM_LABEL,
            access_path="system",
            operation="crash_recovered",
            from_state=job.state.value,
            to_state=final.value,
        )
        counts["settled"] += 1


def _invalidate_changed(c: sqlite3.Connection, config: Config, counts: dict[str, int]) -> None:
    known = dict(c.execute("SELECT resource_id, fingerprint FROM resource_identities"))
    current = {r.id: r.fingerprint for r in config.resources}
    changed = [rid for rid, fp in known.items() if current.get(rid) != fp]
    for rid in changed:
        for job_id, from_state in c.execute(
            "SELECT DISTINCT j.id, j.state FROM jobs j JOIN changes ch ON ch.job_id = j.id "
            "WHERE ch.resource_id = ? AND ch.fingerprint != ? "
            "AND j.state NOT IN ('undone', 'rejected', 'invalidated')",
            (rid, current.get(rid, "")),
        ).fetchall():
            if from_state == JobState.NEEDS_REVIEW.value:
                # An uncertain write keeps its quarantine until a person reconciles it,
                # under the configuration it was made with.
                Ledger.add_event(
                    c,
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
            check_transition("invalidate", JobState(from_state), JobState.INVALIDATED)
            Ledger.set_job_state(c, job_id, JobState.INVALIDATED, invalidated_reason=reason)
            Ledger.add_event(
                c,
                job_id=job_id,
                actor=SYSTEM_LABEL,
                access_path="system",
                operation="invalidate",
                target=rid,
                from_state=from_state,
                to_state=JobState.INVALIDATED.value,
                detail={"reason": reason},
            )
            counts["invalidated"] += 1
    c.execute("DELETE FROM resource_identities")
    c.executemany(
        "INSERT INTO resource_identities(resource_id, fingerprint) VALUES (?, ?)",
        list(current.items()),
    )


class LiveDispatches:
    """The confirms this process is running right now, and whether one of them ended
    without its outcome recorded (the ledger refused the write: a full disk). Until that
    is settled the ledger shows a write ``dispatching`` that nobody runs; it holds its
    fields like a quarantine meanwhile, and ``settle`` turns it into ``uncertain``."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._lock = threading.Lock()
        self._jobs: set[str] = set()
        self._unsettled = False

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
        counts = settle_interrupted(self._ledger, self._live)
        self._unsettled = False
        if counts["uncertain"] or counts["settled"]:
            log.warning(
                "settled interrupted work: %d write(s) now uncertain (quarantined until a "
                "reviewer reconciles them), %d job(s) settled",
                counts["uncertain"],
                counts["settled"],
            )

    def _live(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._jobs)
