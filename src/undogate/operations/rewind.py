"""Rewind: undo an agent's work since a moment as one reviewed plan (docs/rewind.md).

``create_plan`` selects the jobs, reads each resource once and walks the plan
(``rewind_plan``); ``preview_plan`` reads and walks it again, shows every exact request
in order and issues the plan's one single-use token; ``confirm_plan`` reads every
resource again, refuses when anything moved since the preview (nothing is written),
refuses a plan with blocked steps unless the reviewer skips them, checks the passkey
over the whole plan where a resource needs one, then runs it (``rewind_run``). The plan
and its confirmation are events in the hash chain; the steps' own intents and outcomes
are the jobs' events, as for any undo.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..adapters import Snapshot
from ..digests import sha256_hex
from ..errors import (
    ChangedSincePreview,
    InvalidRequest,
    NotFound,
    PasskeyRequired,
    PreviewExpired,
    RewindBlocked,
)
from ..jobs import Actor, ConditionalWrite, Job
from ..jsonvalue import JsonObject, JsonValue
from ..ledger import Reader, StoredRewind, Transaction
from ..proof.preview_digest import preview_document
from . import step_up
from .context import Context
from .rewind_plan import (
    PlannedUndo,
    Selection,
    Step,
    Walk,
    plan_order,
    read_once,
    to_read,
    walk,
)
from .rewind_run import Stopped, job_outcomes, run_undos, step_outcome

REWIND_OPERATION = "rewind"
#: The most jobs one plan covers (a ledger holds at most 2,000: docs/limits.md).
MAX_PLAN_JOBS = 2000


@dataclass(frozen=True)
class RewindPlan:
    """A plan as the ledger holds it, its steps, and its jobs as they stand now."""

    stored: StoredRewind
    selection: Selection
    steps: tuple[Step, ...]
    jobs: Mapping[str, Job]

    @property
    def id(self) -> str:
        return self.stored.id

    def outcomes(self) -> list[tuple[Step, str | None]]:
        return [(s, step_outcome(self.stored, s, self.jobs.get(s.job_id))) for s in self.steps]

    def job_outcomes(self) -> dict[str, str]:
        return job_outcomes(self.outcomes())


@dataclass(frozen=True)
class RewindPreview:
    plan: RewindPlan
    token: str
    expires_at: float
    undos: tuple[PlannedUndo, ...]
    passkey_challenge: str | None
    # Each write as it will leave (``Wire.describe``: static headers, how it is
    # authenticated, never with what), in the order of ``undos``.
    requests: tuple[dict[str, Any], ...] = ()


def validate_selection(selection: Selection, now: float) -> None:
    """Raises: InvalidRequest (an empty or future window)."""
    if selection.until is not None and selection.until <= selection.since:
        raise InvalidRequest("until must be later than since", member="until")
    if selection.since > now:
        raise InvalidRequest("since is in the future", member="since")


def _jobs(gw: Context, tx: Reader, owner_id: str, selection: Selection) -> list[Job]:
    ids = tx.rewind_jobs(
        owner_id,
        selection.agent_id,
        selection.since,
        selection.until,
        selection.label,
        selection.session,
    )
    if len(ids) > MAX_PLAN_JOBS:
        raise InvalidRequest(
            f"the selection holds {len(ids)} jobs; a plan covers at most {MAX_PLAN_JOBS}: "
            "narrow it with until, label or session"
        )
    loaded = [tx.load_job(job_id) for job_id in ids]
    return [j for j in loaded if j is not None]


def _walked(gw: Context, jobs: list[Job]) -> tuple[Walk, dict[str, Snapshot | object]]:
    order = plan_order(jobs)
    reads = read_once(gw, to_read(gw, order), gw.deadline())
    return gw.ledger.read(lambda tx: walk(gw, tx, order, reads)), dict(reads)


def create_plan(gw: Context, actor: Actor, selection: Selection) -> RewindPlan:
    """Select the jobs, read each resource once and record the plan (``rw_...``).

    Raises: InvalidRequest (the window; too many jobs), NotFound (no job of the
    selection applied anything)."""
    validate_selection(selection, gw.clock())
    jobs = gw.ledger.read(lambda tx: _jobs(gw, tx, actor.owner_id, selection))
    if not jobs:
        raise NotFound(
            f"no job of {selection.agent_id} in that window applied anything: nothing to rewind",
            agent=selection.agent_id,
        )
    walked, _reads = _walked(gw, jobs)
    now = gw.clock()
    stored = StoredRewind(
        id="rw_" + secrets.token_hex(10),
        owner_id=actor.owner_id,
        agent_id=selection.agent_id,
        created_by=actor.label,
        selection=selection.to_json(),
        steps=[s.to_json() for s in walked.steps],
        state="planned",
        token_hash=None,
        expires_at=None,
        versions={},
        skip_blocked=False,
        confirmed_at=None,
        stopped=None,
        created_at=now,
        updated_at=now,
    )

    def commit(tx: Transaction) -> None:
        tx.insert_rewind(stored)
        _event(tx, actor, stored.id, "rewind_planned", _plan_detail(selection, walked))

    gw.ledger.write(commit)
    return RewindPlan(stored, selection, walked.steps, {j.id: j for j in jobs})


def load_plan(gw: Context, owner_id: str, rewind_id: str) -> RewindPlan:
    """The plan and its jobs as they stand, if ``owner_id`` made it.

    Raises: NotFound (any other plan: ids of other owners' plans reveal nothing)."""

    def read(tx: Reader) -> RewindPlan:
        stored = tx.load_rewind(rewind_id)
        if stored is None or stored.owner_id != owner_id:
            raise NotFound(f"no rewind plan {rewind_id!r}", rewind=rewind_id)
        steps = tuple(Step.from_json(s) for s in stored.steps if isinstance(s, dict))
        jobs = {j: tx.load_job(j) for j in dict.fromkeys(s.job_id for s in steps)}
        return RewindPlan(
            stored,
            Selection.from_json(stored.selection),
            steps,
            {k: v for k, v in jobs.items() if v is not None},
        )

    return gw.ledger.read(read)


def _refuse_if_run(plan: RewindPlan) -> None:
    if plan.stored.state != "planned":
        raise ChangedSincePreview(
            f"plan {plan.id} was confirmed already; make a new plan for what is left",
            rewind=plan.id,
        )


def preview_plan(gw: Context, actor: Actor, plan: RewindPlan) -> RewindPreview:
    """Read every resource of the plan once, walk it again, and issue its one
    single-use token (a newer preview replaces it).

    Raises: ChangedSincePreview (the plan ran already)."""
    _refuse_if_run(plan)
    jobs = gw.ledger.read(lambda tx: _jobs(gw, tx, actor.owner_id, plan.selection))
    walked, _reads = _walked(gw, jobs)
    token = secrets.token_urlsafe(32)
    token_hash = sha256_hex(token)
    expires_at = gw.clock() + gw.config.server.preview_ttl_s
    challenge = None
    if step_up.required(gw, [u.change for u in walked.undos]):
        document = _document(plan.id, walked, expires_at, token_hash)
        challenge = step_up.challenge_text(document)

    def commit(tx: Transaction) -> None:
        tx.save_rewind_preview(
            plan.id,
            steps=[s.to_json() for s in walked.steps],
            token_hash=token_hash,
            expires_at=expires_at,
            versions=dict(walked.versions),
        )
        _event(tx, actor, plan.id, "rewind_previewed", {"steps": str(len(walked.steps))})

    gw.ledger.write(commit)
    fresh = replace(plan, steps=walked.steps, jobs={j.id: j for j in jobs})
    requests = tuple(
        gw.wire.describe(gw.resource(u.change.resource_id), write)
        for u, write in zip(walked.undos, shown_writes(walked.undos), strict=True)
    )
    return RewindPreview(fresh, token, expires_at, walked.undos, challenge, requests)


def confirm_plan(
    gw: Context,
    actor: Actor,
    plan: RewindPlan,
    preview_token: str,
    *,
    skip_blocked: bool = False,
    reauthorize: Callable[[], None] | None = None,
    passkey_assertion: str | None = None,
) -> RewindPlan:
    """Check the whole plan against fresh reads, then run it.

    Raises: NotFound (not this plan's token), PreviewExpired, PreviewUsed,
    ChangedSincePreview (a resource or a job moved since the preview: nothing was
    written), RewindBlocked (a blocked step, without ``skip_blocked``), PasskeyRequired,
    PasskeyRefused, LedgerError."""
    assertion = None
    if passkey_assertion is not None:
        assertion = step_up.refuse_replay(gw, passkey_assertion)
    _refuse_if_run(plan)
    stored = plan.stored
    token_hash = sha256_hex(preview_token)
    if stored.token_hash != token_hash:
        raise NotFound("unknown preview token for this plan; preview again", rewind=plan.id)
    assert stored.expires_at is not None
    if gw.clock() >= stored.expires_at:
        raise PreviewExpired("the plan's preview expired; preview again", rewind=plan.id)
    jobs = gw.ledger.read(lambda tx: _jobs(gw, tx, actor.owner_id, plan.selection))
    walked, reads = _walked(gw, jobs)
    moved = [k for k, v in stored.versions.items() if walked.versions.get(k) != v]
    if moved or [s.to_json() for s in walked.steps] != stored.steps:
        raise ChangedSincePreview(
            "the plan changed since its preview"
            + (f" ({moved[0]} was written)" if moved else " (a job moved)")
            + "; nothing was written. Preview again",
            rewind=plan.id,
        )
    if walked.blocked and not skip_blocked:
        first = walked.blocked[0]
        raise RewindBlocked(
            f"{len(walked.blocked)} step(s) of the plan are blocked (step {first.number}: "
            f"{first.message}); nothing was written. Confirm with skip_blocked to undo "
            "everything else and leave them",
            rewind=plan.id,
            blocked=[s.to_json() for s in walked.blocked],
        )
    if step_up.required(gw, [u.change for u in walked.undos]):
        if assertion is None:
            raise PasskeyRequired(
                "this plan touches a resource that requires the reviewer's passkey: open "
                "the plan's page in a browser and confirm it there",
                rewind=plan.id,
            )
        document = _document(plan.id, walked, stored.expires_at, token_hash)
        gw.ledger.write(lambda tx: step_up.approve_in(tx, actor, document, assertion, job_id=None))

    def claim(tx: Transaction) -> None:
        tx.claim_rewind(plan.id, token_hash, skip_blocked=skip_blocked)
        detail: JsonObject = {
            "skip_blocked": skip_blocked,
            "undo": [str(u.step.number) for u in walked.undos],
            "jobs": list(dict.fromkeys(s.job_id for s in walked.steps)),
        }
        _event(tx, actor, plan.id, "rewind_confirmed", detail)

    gw.ledger.write(claim)
    pinned = {k: v for k, v in reads.items() if isinstance(v, Snapshot)}
    stopped = run_undos(gw, actor, walked.undos, pinned, reauthorize, gw.deadline())
    run = load_plan(gw, actor.owner_id, plan.id)
    # Reported as the plan will read once finished: where it stopped says which of its
    # jobs' actions are its own.
    ended = replace(run.stored, stopped=stopped.to_json() if stopped else None)
    finished = replace(run, stored=ended)
    summary = _report_detail(finished, stopped)
    newest = walked.steps[0].job_id if walked.steps else None

    def finish(tx: Transaction) -> None:
        tx.finish_rewind(plan.id, stopped=ended.stopped)
        _event(tx, actor, plan.id, "rewind_finished", summary)
        if newest is not None:
            gw.notifier.rewind_applied(tx, finished.stored, newest, summary)

    gw.ledger.write(finish)
    return load_plan(gw, actor.owner_id, plan.id)


def shown_writes(undos: tuple[PlannedUndo, ...]) -> list[ConditionalWrite]:
    """Every write of the plan as the preview shows and the passkey signs it: a write
    whose ``If-Match`` names the version an earlier step leaves carries none here (that
    version is only known once the earlier step's read-back has it)."""
    shown: list[ConditionalWrite] = []
    for undo in undos:
        write = undo.write
        if undo.if_match_from is not None:
            headers = {k: v for k, v in write.headers.items() if k.lower() != "if-match"}
            write = replace(write, headers=headers, if_match=None)
        shown.append(write)
    return shown


def _document(
    rewind_id: str, walked: Walk, expires_at: float, token_hash: str
) -> dict[str, object]:
    return preview_document(
        job_id=rewind_id,
        operation=REWIND_OPERATION,
        requests=shown_writes(walked.undos),
        expires_at=expires_at,
        token_hash=token_hash,
    )


def _event(
    tx: Transaction, actor: Actor, rewind_id: str, operation: str, detail: JsonObject
) -> None:
    tx.add_event(
        job_id=None,
        actor=actor.label,
        access_path=actor.access_path,
        operation=operation,
        target=rewind_id,
        detail=detail,
    )


def _plan_detail(selection: Selection, walked: Walk) -> JsonObject:
    steps: list[JsonValue] = [
        {
            "step": str(s.number),
            "job": s.job_id,
            "change": str(s.change),
            "verdict": s.verdict.value,
        }
        for s in walked.steps
    ]
    return {"selection": selection.to_json(), "steps": steps}


def _report_detail(plan: RewindPlan, stopped: Stopped | None) -> JsonObject:
    outcomes: list[JsonValue] = [
        {"step": str(s.number), "outcome": o or "not_run"} for s, o in plan.outcomes()
    ]
    jobs: JsonObject = dict(plan.job_outcomes())
    detail: JsonObject = {"steps": outcomes, "jobs": jobs}
    if stopped is not None:
        detail["stopped"] = stopped.to_json()
    return detail


__all__ = [
    "RewindPlan",
    "RewindPreview",
    "confirm_plan",
    "create_plan",
    "load_plan",
    "preview_plan",
    "shown_writes",
]
