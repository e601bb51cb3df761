"""prepare, preview, confirm, reject, accept observed state, and start-up recovery.

This is the only place that moves a job. Each step follows the same rule: record
before you act, record after you act. A write's intent (an action row marked
``dispatching``) commits before the request leaves, and its outcome commits after, so
a crash anywhere leaves either nothing sent or an action that start-up recovery turns
into ``uncertain``, never a write that could be sent twice.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import signal
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .adapters import Adapter, Side, Snapshot, build_adapters
from .config import Config, Resource
from .dispatch import Dispatch, PlannedWrite, change_diff
from .errors import (
    ChangedSincePreview,
    Conflict,
    Forbidden,
    IdempotencyKeyReused,
    InvalidRequest,
    LedgerError,
    LimitReached,
    NotFound,
    PreviewExpired,
    PreviewUsed,
    ReconciliationBlocked,
    StaleVersion,
    TransitionNotAllowed,
    UndogateError,
)
from .etag import parse_etag
from .jobs import (
    ActionStatus,
    Change,
    ChangeRequest,
    ChangeState,
    Job,
    JobState,
    Observation,
    Operation,
    ResourceKind,
    check_transition,
    require_start,
    state_after_settling,
)
from .jsonvalue import JsonError, JsonObject, JsonValue, check_encodable, dumps
from .ledger import Ledger
from .net import RemoteHTTP
from .overlaps import check_overlaps
from .quotas import PrepareQuotas
from .recovery import LiveDispatches, recover

log = logging.getLogger(__name__)

CRASH_POINTS = ("after_intent", "after_send", "after_response", "after_readback", "after_outcome")
CRASH_ENV = "UNDOGATE_CRASH_AT"


def crash_point_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The test-only crash hook (``UNDOGATE_CRASH_AT=apply:after_intent``); see
    docs/recovery.md. Unset, it is inert."""
    value = (environ if environ is not None else os.environ).get(CRASH_ENV)
    return value or None


@dataclass(frozen=True)
class Actor:
    """Who is acting, as the surfaces established it (the engine trusts this)."""

    id: str
    owner_id: str
    kind: str  # operator | agent | master | system
    access_path: str  # api | web | cli | mcp | demo | system

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.id}"


@dataclass(frozen=True)
class PrepareRequest:
    summary: str
    changes: tuple[ChangeRequest, ...]
    idempotency_key: str | None = None
    attribution_label: str | None = None


@dataclass(frozen=True)
class Prepared:
    job: Job
    replay: bool


@dataclass(frozen=True)
class ChangeView:
    """One change as a preview shows it: current vs planned, and what blocks it."""

    index: int
    resource_id: str
    kind: ResourceKind
    current_version: str
    current: JsonObject | None
    current_text: str | None
    planned: JsonObject | None
    planned_text: str | None
    moved_since_prepare: bool
    reversible: bool
    note: str | None = None
    observation: Observation | None = None


@dataclass(frozen=True)
class Preview:
    job_id: str
    operation: Operation
    token: str | None
    expires_at: float | None
    changes: tuple[ChangeView, ...]
    blockers: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Confirmation:
    job: Job
    repeated: bool = False
    dry_run: bool = False
    requests: tuple[dict[str, Any], ...] = ()


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass
class Gateway:
    """The engine. Surfaces call these methods and only translate what they raise."""

    config: Config
    ledger: Ledger
    http: RemoteHTTP
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    clock: Callable[[], float] = time.time
    crash_at: str | None = None
    adapters: dict[ResourceKind, Adapter] = field(init=False)
    live: LiveDispatches = field(init=False)
    quotas: PrepareQuotas = field(init=False)

    def __post_init__(self) -> None:
        self.adapters = build_adapters(self.http, self.config.limits, self.environ)
        self.live = LiveDispatches(self.ledger)
        self.quotas = PrepareQuotas(self.config.limits)

    # -- lookups ---------------------------------------------------------------

    def _resource(self, resource_id: str) -> Resource:
        res = self.config.resource(resource_id)
        if res is None:
            raise NotFound(f"unknown resource {resource_id!r}", resource=resource_id)
        return res

    def _adapter(self, kind: ResourceKind) -> Adapter:
        adapter = self.adapters.get(kind)
        if adapter is None:
            raise InvalidRequest(f"resources of kind {kind.value} are not supported yet")
        return adapter

    def _deadline(self) -> float:
        return time.monotonic() + self.config.server.operation_timeout_s

    def list_resources(self, agent_id: str) -> list[Resource]:
        return self.config.resources_for(agent_id)

    def get_job(self, owner_id: str, job_id: str) -> Job:
        """The job, if ``owner_id`` owns it; otherwise ``NotFound`` (never ``Forbidden``,
        so ids of other owners' jobs reveal nothing).

        Raises: NotFound; LedgerError while a write whose outcome could not be recorded
        cannot be settled yet (nothing moves a job on a ledger that cannot record it)."""
        self.live.settle()
        job = self.ledger.load_job(job_id)
        if job is None or job.owner_id != owner_id:
            raise NotFound(f"no job {job_id!r}", job=job_id)
        return job

    def list_jobs(self, owner_id: str, agent_id: str) -> list[tuple[str, str, str, float, int]]:
        return self.ledger.list_jobs(owner_id, agent_id)

    def events(self, owner_id: str, job_id: str) -> list[Any]:
        self.get_job(owner_id, job_id)
        return self.ledger.events(job_id)

    # -- prepare ---------------------------------------------------------------

    def prepare(self, actor: Actor, agent_id: str, request: PrepareRequest) -> Prepared:
        """Read every resource and record before/after. Writes nothing externally.

        Raises:
            InvalidRequest, NotFound, Forbidden, LimitReached, QuotaExceeded, RateLimited,
            StaleVersion, IdempotencyKeyReused, RemoteUnavailable, RemoteContractBreach,
            MissingToken.
        """
        limits = self.config.limits
        if "prepare_changes" not in self.config.agent_tools(agent_id):
            raise Forbidden(f"agent {agent_id!r} is not opted in to prepare_changes")
        summary = request.summary.strip()
        if not summary or len(summary) > 2000:
            raise InvalidRequest("a summary of 1 to 2000 characters is required")
        if request.attribution_label is not None and len(request.attribution_label) > 200:
            raise InvalidRequest("attribution_label is at most 200 characters")
        if request.idempotency_key is not None and not 1 <= len(request.idempotency_key) <= 200:
            raise InvalidRequest("idempotency_key is 1 to 200 characters")
        if not 1 <= len(request.changes) <= limits.max_changes_per_job:
            raise InvalidRequest(
                f"a job holds 1 to {limits.max_changes_per_job} changes",
                limit="max_changes_per_job",
            )
        _check_text_input(request)
        digest = _request_digest(agent_id, request)
        if request.idempotency_key is not None:
            earlier = self._find_idempotent(actor.owner_id, agent_id, request.idempotency_key)
            if earlier is not None:
                return self._replay(earlier, digest)
        seen: set[str] = set()
        resources: list[Resource] = []
        for change in request.changes:
            res = self.config.resource(change.resource_id)
            if res is None or res.agent_id != agent_id or res.test_copy_of is not None:
                # Same answer for unknown and foreign: an agent learns nothing of others.
                raise NotFound(
                    f"unknown resource {change.resource_id!r}", resource=change.resource_id
                )
            if change.resource_id in seen:
                raise InvalidRequest(
                    f"{change.resource_id!r} appears twice; put all its fields in one change",
                    resource=change.resource_id,
                )
            seen.add(change.resource_id)
            if not res.conditional_writes:
                raise Forbidden(
                    f"writes to {res.id!r} are not enabled: the operator has not attested "
                    "conditional writes for it",
                    resource=res.id,
                )
            resources.append(res)
        self.quotas.admit(self.ledger, actor.owner_id, agent_id)
        self._check_capacity(0)
        deadline = self._deadline()
        changes: list[Change] = []
        for index, (change, res) in enumerate(zip(request.changes, resources, strict=True)):
            adapter = self._adapter(res.kind)
            snap = adapter.read(res, deadline)
            if change.expected_version is not None:
                _check_expected_version(res, change.expected_version, snap)
            plan = adapter.plan(res, change, snap)
            changes.append(plan.change(index, res, snap, change.assertion_kind))
        payload = _payload_size(summary, changes)
        if payload > limits.max_job_bytes:
            raise LimitReached(
                f"the job would store {payload} bytes; the limit is {limits.max_job_bytes}",
                limit="max_job_bytes",
            )
        now = self.clock()
        job = Job(
            id="job_" + secrets.token_hex(8),
            owner_id=actor.owner_id,
            agent_id=agent_id,
            summary=summary,
            attribution_label=request.attribution_label,
            idempotency_key=request.idempotency_key,
            state=JobState.PREPARED,
            undo_started=False,
            created_at=now,
            updated_at=now,
            changes=tuple(changes),
        )

        def commit(c: sqlite3.Connection) -> Prepared:
            if request.idempotency_key is not None:
                # A concurrent duplicate may have committed while we were reading.
                earlier = self._find_idempotent_in(
                    c, actor.owner_id, agent_id, request.idempotency_key
                )
                if earlier is not None:
                    return self._replay(earlier, digest)
            self.quotas.check_unresolved(c, actor.owner_id, agent_id)
            self._check_capacity_in(c, payload)
            Ledger.insert_job(c, job, digest, payload)
            Ledger.add_event(
                c,
                job_id=job.id,
                actor=actor.label,
                access_path=actor.access_path,
                operation="prepare",
                target=",".join(ch.resource_id for ch in changes),
                to_state=JobState.PREPARED.value,
                detail={"changes": [change_diff(ch) for ch in changes]},
            )
            return Prepared(job=job, replay=False)

        return self.ledger.write(commit)

    def _find_idempotent(
        self, owner_id: str, agent_id: str, key: str
    ) -> tuple[str, str, float] | None:
        return self.ledger.read(lambda c: self._find_idempotent_in(c, owner_id, agent_id, key))

    def _find_idempotent_in(
        self, c: sqlite3.Connection, owner_id: str, agent_id: str, key: str
    ) -> tuple[str, str, float] | None:
        row = c.execute(
            "SELECT id, request_digest, created_at FROM jobs WHERE owner_id = ? "
            "AND agent_id = ? AND idempotency_key = ? ORDER BY seq DESC LIMIT 1",
            (owner_id, agent_id, key),
        ).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def _replay(self, earlier: tuple[str, str, float], digest: str) -> Prepared:
        job_id, earlier_digest, created_at = earlier
        days = self.config.limits.idempotency_days
        if created_at < self.clock() - days * 86400:
            # The key's promise has lapsed, and a key never names two jobs.
            raise IdempotencyKeyReused(
                f"this idempotency_key was first used more than {days} days ago and is no "
                "longer honoured; use a new key",
                job=job_id,
            )
        if earlier_digest != digest:
            raise IdempotencyKeyReused(
                "this idempotency_key was already used for a different request; "
                "use a new key for a new change",
                job=job_id,
            )
        job = self.ledger.load_job(job_id)
        assert job is not None
        return Prepared(job=job, replay=True)

    def _check_capacity(self, payload: int) -> None:
        self.ledger.read(lambda c: self._check_capacity_in(c, payload))

    def _check_capacity_in(self, c: sqlite3.Connection, payload: int) -> None:
        limits = self.config.limits
        counts = dict(
            c.execute(
                "SELECT key, value FROM meta WHERE key IN (?, ?)", ("job_count", "payload_bytes")
            ).fetchall()
        )
        if int(counts.get("job_count", 0)) >= limits.max_jobs:
            raise LimitReached(
                f"the ledger holds {limits.max_jobs} jobs, its limit; no new job can be "
                "prepared (history is never deleted: raise limits.max_jobs or start a new "
                "ledger)",
                limit="max_jobs",
            )
        if int(counts.get("payload_bytes", 0)) + payload > limits.max_receipt_bytes:
            raise LimitReached(
                "the ledger's receipt payload limit is reached; no new job can be prepared",
                limit="max_receipt_bytes",
            )

    # -- preview ---------------------------------------------------------------

    def preview(self, actor: Actor, job_id: str, operation: Operation) -> Preview:
        """Re-read every affected resource and issue a single-use token.

        Raises:
            NotFound, TransitionNotAllowed, Quarantined, LaterJobOverlaps,
            RemoteUnavailable, RemoteContractBreach.
        """
        job = self.get_job(actor.owner_id, job_id)
        targets = self._targets(job, operation)
        deadline = self._deadline()
        views: list[ChangeView] = []
        blockers: list[dict[str, Any]] = []
        snapshot: JsonObject = {}
        for change in targets:
            res = self._resource(change.resource_id)
            adapter = self._adapter(change.kind)
            snap = adapter.read(res, deadline)
            snapshot[str(change.index)] = snap.etag.header
            view = self._view(adapter, job, change, snap, operation)
            views.append(view)
            if operation is Operation.ACCEPT_OBSERVED and view.observation is Observation.NEITHER:
                blockers.append(
                    {
                        "change": change.index,
                        "resource": change.resource_id,
                        "code": ReconciliationBlocked.code,
                        "message": f"{change.resource_id} shows neither the before nor the "
                        "after values: investigate by hand before accepting anything",
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
        if not blockers:
            token = secrets.token_urlsafe(32)
            expires_at = self.clock() + self.config.server.preview_ttl_s
            token_hash = hash_token(token)
            exp = expires_at

            def commit(c: sqlite3.Connection) -> None:
                Ledger.insert_preview(
                    c,
                    token_hash=token_hash,
                    job_id=job.id,
                    operation=operation,
                    expires_at=exp,
                    snapshot=snapshot,
                )
                Ledger.add_event(
                    c,
                    job_id=job.id,
                    actor=actor.label,
                    access_path=actor.access_path,
                    operation=f"preview_{operation.value}",
                    detail={"changes": [str(v.index) for v in views]},
                )

            self.ledger.write(commit)
        return Preview(
            job_id=job.id,
            operation=operation,
            token=token,
            expires_at=expires_at,
            changes=tuple(views),
            blockers=tuple(blockers),
        )

    def _targets(self, job: Job, operation: Operation) -> list[Change]:
        """The changes an operation touches, in dispatch order; checks every guard."""
        if job.state is JobState.INVALIDATED:
            raise TransitionNotAllowed(
                f"Can't {operation.value.replace('_', ' ')} when in invalidated: "
                f"{job.invalidated_reason or 'a resource identity changed'}",
                state=job.state.value,
            )
        if operation is Operation.APPLY:
            require_start("start_apply", job.state)
            if job.undo_started:
                raise TransitionNotAllowed(
                    "Can't apply: an undo of this job has started, so it can never be applied "
                    "again; prepare a new job",
                    state=job.state.value,
                )
            targets = [c for c in job.changes if c.state is ChangeState.PENDING]
        elif operation is Operation.UNDO:
            require_start("start_undo", job.state)
            targets = [c for c in reversed(job.changes) if c.state is ChangeState.APPLIED]
        else:
            require_start("accept_observed", job.state)
            targets = [c for c in job.changes if c.state is ChangeState.UNCERTAIN]
        if not targets:
            raise TransitionNotAllowed(
                f"Can't {operation.value.replace('_', ' ')}: no change is waiting for it",
                state=job.state.value,
            )
        for change in targets:
            if change.fingerprint != self._resource(change.resource_id).fingerprint:
                raise TransitionNotAllowed(
                    f"{change.resource_id}'s identity changed in the config since this job "
                    "was prepared. Restore the configuration it was prepared with and "
                    "reconcile it there; until then its fields stay quarantined",
                    state=job.state.value,
                    resource=change.resource_id,
                )
        if operation is not Operation.ACCEPT_OBSERVED:
            self.ledger.read(lambda c: check_overlaps(c, job, targets, operation))
        return targets

    def _view(
        self, adapter: Adapter, job: Job, change: Change, snap: Snapshot, operation: Operation
    ) -> ChangeView:
        current, current_text = _current_side(change, snap)
        base = {
            "index": change.index,
            "resource_id": change.resource_id,
            "kind": change.kind,
            "current_version": snap.etag.header,
            "current": current,
            "current_text": current_text,
        }
        if operation is Operation.ACCEPT_OBSERVED:
            observation = self._observe(adapter, job, change, snap)
            return ChangeView(
                **base,  # type: ignore[arg-type]
                planned=None,
                planned_text=None,
                moved_since_prepare=False,
                reversible=True,
                observation=observation,
            )
        if operation is Operation.APPLY:
            planned, planned_text = change.after, change.after_text
            blocked = not adapter.shows(change, snap, Side.BEFORE)
            note = (
                "the values this job would replace changed since it was prepared; "
                "prepare a new job from the current values"
            )
        else:
            planned, planned_text = change.before, change.before_text
            blocked = not adapter.undo_guard_holds(change, snap)
            note = (
                "the resource changed after this job applied it; undo would overwrite "
                "newer work, so it is refused: prepare a new reviewed change instead"
            )
        return ChangeView(
            **base,  # type: ignore[arg-type]
            planned=planned,
            planned_text=planned_text,
            moved_since_prepare=blocked,
            reversible=not (operation is Operation.UNDO and blocked),
            note=note if blocked else None,
        )

    def _observe(self, adapter: Adapter, job: Job, change: Change, snap: Snapshot) -> Observation:
        last = [a for a in job.actions if a.change_index == change.index]
        last_op = last[-1].operation if last else Operation.APPLY
        if adapter.shows(change, snap, Side.AFTER):
            return Observation.LOOKS_APPLIED
        if adapter.shows(change, snap, Side.BEFORE):
            if last_op is Operation.UNDO:
                return Observation.LOOKS_UNDONE
            return Observation.LOOKS_NOT_APPLIED
        return Observation.NEITHER

    # -- confirm ---------------------------------------------------------------

    def confirm(
        self,
        actor: Actor,
        job_id: str,
        preview_token: str,
        *,
        dry_run: bool = False,
        reauthorize: Callable[[], None] | None = None,
    ) -> Confirmation:
        """Check the whole preview against fresh reads, then dispatch action by action.

        ``reauthorize`` is called before each dispatch; it raises (``Forbidden``,
        ``Unauthorized``) when the reviewer's credential no longer allows the write.

        Raises:
            NotFound, PreviewExpired, PreviewUsed, ChangedSincePreview, Conflict,
            Quarantined, LaterJobOverlaps, LimitReached, TransitionNotAllowed,
            ReconciliationBlocked, RemoteUnavailable, RemoteContractBreach.
        """
        job = self.get_job(actor.owner_id, job_id)
        token_hash = hash_token(preview_token)
        stored = self.ledger.read(lambda c: Ledger.load_preview(c, token_hash))
        if stored is None or stored.job_id != job.id:
            raise NotFound("unknown preview token for this job; preview again", job=job.id)
        if stored.consumed_at is not None:
            latest = self.ledger.read(lambda c: Ledger.latest_consumed_seq(c, job.id))
            if not dry_run and stored.op_seq == latest:
                return Confirmation(job=job, repeated=True)
            raise PreviewUsed(
                "this preview was already used and a newer operation has happened since; "
                "preview again",
                job=job.id,
            )
        if self.clock() >= stored.expires_at:
            raise PreviewExpired("the preview expired; preview again", job=job.id)
        operation = stored.operation
        targets = self._targets(job, operation)
        if {str(c.index) for c in targets} != set(stored.snapshot):
            raise ChangedSincePreview(
                "the job changed since this preview; preview again", job=job.id
            )
        if not dry_run:
            self._check_attempts(job.id)
        try:
            return self._confirm_checked(
                actor, job, stored.snapshot, operation, targets, token_hash, dry_run, reauthorize
            )
        except UndogateError:
            if not dry_run:
                try:
                    self._count_attempt(job.id)
                except LedgerError:
                    log.warning("could not count a refused confirmation of %s", job.id)
            raise

    def _confirm_checked(
        self,
        actor: Actor,
        job: Job,
        seen_versions: JsonObject,
        operation: Operation,
        targets: list[Change],
        token_hash: str,
        dry_run: bool,
        reauthorize: Callable[[], None] | None,
    ) -> Confirmation:
        deadline = self._deadline()
        snaps: dict[int, Snapshot] = {}
        for change in targets:
            res = self._resource(change.resource_id)
            snap = self._adapter(change.kind).read(res, deadline)
            seen = parse_etag(str(seen_versions[str(change.index)]))
            if not seen.strong_equals(snap.etag):
                raise ChangedSincePreview(
                    f"{change.resource_id} changed since the preview; nothing was written. "
                    "Preview again to see the current values",
                    resource=change.resource_id,
                    job=job.id,
                )
            snaps[change.index] = snap
        if operation is Operation.ACCEPT_OBSERVED:
            return self._accept_observed(actor, job, targets, snaps, token_hash, dry_run)
        writes: list[PlannedWrite] = []
        target_side = Side.AFTER if operation is Operation.APPLY else Side.BEFORE
        for change in targets:
            res = self._resource(change.resource_id)
            adapter = self._adapter(change.kind)
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
            return Confirmation(
                job=job, dry_run=True, requests=tuple(p.write.describe() for p in writes)
            )
        with self.live.running(job.id):
            Dispatch(
                ledger=self.ledger,
                actor_label=actor.label,
                access_path=actor.access_path,
                job=job,
                operation=operation,
                writes=writes,
                token_hash=token_hash,
                deadline=deadline,
                reauthorize=reauthorize,
                crash_point=self._crash_point,
            ).run()
        done = self.ledger.load_job(job.id)
        assert done is not None
        return Confirmation(job=done)

    def _check_attempts(self, job_id: str) -> None:
        limit = self.config.limits.max_confirm_attempts

        def q(c: sqlite3.Connection) -> None:
            row = c.execute("SELECT confirm_attempts FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row[0] >= limit:
                raise LimitReached(
                    f"this job reached its limit of {limit} confirmation attempts",
                    limit="max_confirm_attempts",
                    job=job_id,
                )

        self.ledger.read(q)

    def _count_attempt(self, job_id: str) -> None:
        """A refused attempt still counts (a successful one counts in its first commit)."""
        self.ledger.write(
            lambda c: c.execute(
                "UPDATE jobs SET confirm_attempts = confirm_attempts + 1 WHERE id = ?", (job_id,)
            )
        )

    # -- accept observed state -----------------------------------------------------

    def _accept_observed(
        self,
        actor: Actor,
        job: Job,
        targets: list[Change],
        snaps: dict[int, Snapshot],
        token_hash: str,
        dry_run: bool,
    ) -> Confirmation:
        decisions: list[tuple[Change, Observation, Snapshot]] = []
        for change in targets:
            adapter = self._adapter(change.kind)
            snap = snaps[change.index]
            observation = self._observe(adapter, job, change, snap)
            if observation is Observation.NEITHER:
                raise ReconciliationBlocked(
                    f"{change.resource_id} shows neither the before nor the after values; "
                    "reconciliation is blocked until someone investigates by hand",
                    resource=change.resource_id,
                )
            decisions.append((change, observation, snap))
        if dry_run:
            return Confirmation(job=job, dry_run=True)
        self._crash_point(Operation.ACCEPT_OBSERVED, "after_readback")
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
        check_transition("accept_observed", job.state, final)
        uncertain = {
            a.change_index: a.id
            for a in job.actions
            if a.status in (ActionStatus.UNCERTAIN, ActionStatus.DISPATCHING)
        }

        def commit(c: sqlite3.Connection) -> None:
            Ledger.consume_preview(c, token_hash, job.id, job.state.value)
            c.execute(
                "UPDATE jobs SET confirm_attempts = confirm_attempts + 1 WHERE id = ?", (job.id,)
            )
            for change, observation, snap in decisions:
                action_id = uncertain.get(change.index)
                if action_id is not None:
                    Ledger.finish_action(
                        c, action_id, ActionStatus.ACCEPTED, observation=observation
                    )
                new_state = states[change.index]
                Ledger.set_change_state(
                    c,
                    job.id,
                    change.index,
                    new_state,
                    applied_etag=snap.etag.header if new_state is ChangeState.APPLIED else None,
                    applied_seq=Ledger.next_seq(c) if new_state is ChangeState.APPLIED else None,
                )
                Ledger.add_event(
                    c,
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
            Ledger.set_job_state(c, job.id, final)
            Ledger.add_event(
                c,
                job_id=job.id,
                actor=actor.label,
                access_path=actor.access_path,
                operation="reconciled",
                from_state=job.state.value,
                to_state=final.value,
            )

        self.ledger.write(commit)
        self._crash_point(Operation.ACCEPT_OBSERVED, "after_outcome")
        done = self.ledger.load_job(job.id)
        assert done is not None
        return Confirmation(job=done)

    # -- reject --------------------------------------------------------------------

    def reject(self, actor: Actor, job_id: str) -> Job:
        """Raises: NotFound, TransitionNotAllowed."""
        job = self.get_job(actor.owner_id, job_id)
        check_transition("reject", job.state, JobState.REJECTED)

        def commit(c: sqlite3.Connection) -> None:
            current = Ledger.load_job_in(c, job_id, with_actions=False)
            assert current is not None
            check_transition("reject", current.state, JobState.REJECTED)
            Ledger.set_job_state(c, job_id, JobState.REJECTED)
            Ledger.add_event(
                c,
                job_id=job_id,
                actor=actor.label,
                access_path=actor.access_path,
                operation="reject",
                from_state=current.state.value,
                to_state=JobState.REJECTED.value,
            )

        self.ledger.write(commit)
        return self.get_job(actor.owner_id, job_id)

    # -- start-up --------------------------------------------------------------------

    def recover(self) -> dict[str, int]:
        """Start-up recovery (see ``recovery.recover``)."""
        return recover(self.ledger, self.config)

    # -- test hook -----------------------------------------------------------------

    def _crash_point(self, operation: Operation, point: str) -> None:
        """Crash-injection hook for the recovery harness; inert unless ``crash_at`` is set
        (from ``UNDOGATE_CRASH_AT=operation:point``). It kills this very process."""
        if self.crash_at is not None and self.crash_at == f"{operation.value}:{point}":
            os.kill(os.getpid(), signal.SIGKILL)


def _check_text_input(request: PrepareRequest) -> None:
    """Agent text must be writable as UTF-8: an unpaired surrogate is refused up front."""
    try:
        values: list[JsonValue] = [
            request.summary,
            request.attribution_label,
            request.idempotency_key,
        ]
        for c in request.changes:
            values += [c.resource_id, c.set, list(c.remove), c.text, c.expected_version]
        check_encodable(values)
    except JsonError:
        raise InvalidRequest("the request holds text that is not valid Unicode") from None


def _check_expected_version(res: Resource, expected: str, snap: Snapshot) -> None:
    try:
        tag = parse_etag(expected)
    except ValueError:
        raise InvalidRequest(
            'expected_version must be an entity-tag such as "abc"', resource=res.id
        ) from None
    if not tag.strong_equals(snap.etag):
        raise StaleVersion(
            f"{res.id} is at a newer version than the one you read; re-read it and prepare again",
            resource=res.id,
            current_version=snap.etag.header,
        )


def _current_side(change: Change, snap: Snapshot) -> tuple[JsonObject | None, str | None]:
    if change.kind is ResourceKind.WEBDAV_TEXT:
        return None, snap.text
    current = snap.fields or {}
    return {f: current[f] for f in change.fields if f in current}, None


def _payload_size(summary: str, changes: list[Change]) -> int:
    size = len(summary.encode())
    for ch in changes:
        size += len(dumps(ch.before or {}).encode()) + len(dumps(ch.after or {}).encode())
        size += len((ch.before_text or "").encode()) + len((ch.after_text or "").encode())
    return size


def _request_digest(agent_id: str, request: PrepareRequest) -> str:
    """What makes two prepares "the same" for idempotency (the key itself excluded)."""
    body: JsonObject = {
        "agent": agent_id,
        "summary": request.summary,
        "attribution_label": request.attribution_label,
        "changes": [
            {
                "resource": ch.resource_id,
                "set": ch.set,
                "remove": list(ch.remove),
                "text": ch.text,
                "expected_version": ch.expected_version,
                "assertion_kind": ch.assertion_kind.value if ch.assertion_kind else None,
            }
            for ch in request.changes
        ],
    }
    # surrogatepass: a lone surrogate must reach the adapter's clear refusal, not crash here.
    return hashlib.sha256(dumps(body).encode("utf-8", "surrogatepass")).hexdigest()


__all__ = [
    "CRASH_POINTS",
    "Actor",
    "ChangeView",
    "Confirmation",
    "Gateway",
    "PrepareRequest",
    "Prepared",
    "Preview",
]
