"""Whether a job may write past the other jobs that hold the same resource.

Another job's change holds a resource while it is applied, while its outcome is
uncertain (a quarantine), and while its write is in flight (an intent committed, no
outcome yet: until the outcome is known it is as uncertain as a quarantine). The check
runs when a preview or a confirm plans the work, and again inside every action's intent
transaction, so no write starts on a field that another job holds at that very moment.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import Any

from ..adapters import adapter_for
from ..errors import LaterJobOverlaps, Quarantined
from ..jobs import Change, ChangeState, Job, Operation
from ..ledger import OpenChange, Reader

# {"change", "resource", "code", "message"} plus the job in the way (engine data: the
# surfaces render it as JSON).
Blocker = dict[str, Any]


def find_blockers(
    tx: Reader,
    job: Job,
    targets: Sequence[Change],
    operation: Operation,
    released: Container[tuple[str, int | None]] = (),
) -> list[Blocker]:
    """One blocker per blocked change, in the shape every blocked preview carries:
    ``{"change", "resource", "code", "message"}`` plus the job in the way
    (``blocking_job`` for a quarantine, ``later_job`` for an ordering refusal).
    ``released``: the changes, as (job, applied sequence), that a rewind plan undoes
    before these (they will not hold the resource by then)."""
    found: list[Blocker] = []
    # Every target's holders in one read (on PostgreSQL a statement is a round trip).
    held = tx.open_changes(sorted({change.resource_id for change in targets}), job.id)
    for change in targets:
        candidates = [
            b
            for other in held
            if other.resource_id == change.resource_id
            and (other.job_id, other.applied_seq) not in released
            and (b := _blocker(change, other, operation)) is not None
        ]
        if candidates:
            # A quarantine is named before an ordering problem: it must be resolved first.
            found.append(min(candidates, key=lambda b: b["code"] != Quarantined.code))
    return found


def check_overlaps(tx: Reader, job: Job, targets: Sequence[Change], operation: Operation) -> None:
    """Raises: Quarantined or LaterJobOverlaps for the first blocked change; its details
    list every blocked change under ``blockers``."""
    refuse_blocked(find_blockers(tx, job, targets, operation))


def refuse_blocked(found: list[Blocker]) -> None:
    """Raises: Quarantined or LaterJobOverlaps for the first of ``found`` (what
    ``find_blockers`` found), if any."""
    if not found:
        return
    first = found[0]
    if first["code"] == Quarantined.code:
        raise Quarantined(
            str(first["message"]),
            resource=first["resource"],
            blocking_job=first["blocking_job"],
            blockers=found,
        )
    raise LaterJobOverlaps(
        str(first["message"]),
        resource=first["resource"],
        later_job=first["later_job"],
        blockers=found,
    )


def _blocker(change: Change, other: OpenChange, operation: Operation) -> Blocker | None:
    if change.target is not None and other.target is not None and change.target != other.target:
        return None  # two parts of one resource at their own URLs (two records)
    # The held change's kind says what it holds (records: its fields; a document: all).
    if not adapter_for(other.kind).overlaps(other.fields, change.fields):
        return None
    if other.in_flight:
        message = (
            f"{change.resource_id} is being written by job {other.job_id} right now; "
            "until its outcome is recorded it holds the resource like a quarantine"
        )
    elif other.state is ChangeState.UNCERTAIN:
        message = (
            f"{change.resource_id} is quarantined by job {other.job_id}, whose outcome is "
            "uncertain; a reviewer must reconcile it first"
        )
    elif (
        operation is Operation.UNDO
        and other.fingerprint == change.fingerprint
        and change.applied_at is not None
        and other.applied_seq is not None
        and other.applied_seq > change.applied_at
    ):
        return {
            "change": change.index,
            "resource": change.resource_id,
            "code": LaterJobOverlaps.code,
            "message": f"job {other.job_id} changed {change.resource_id} after this job; "
            "undo it first",
            "later_job": other.job_id,
        }
    else:
        return None
    return {
        "change": change.index,
        "resource": change.resource_id,
        "code": Quarantined.code,
        "message": message,
        "blocking_job": other.job_id,
    }
