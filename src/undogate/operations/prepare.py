"""Prepare: read every resource, record the before- and planned after-values, write
nothing externally. Idempotent replays, quotas and the ledger's limits are checked here."""

from __future__ import annotations

import logging
import secrets

from ..adapters import Snapshot, adapter_for, change_member, digest_defaults
from ..chain.seals import change_seal
from ..config import Resource
from ..digests import sha256_hex
from ..errors import (
    Forbidden,
    IdempotencyKeyReused,
    InvalidRequest,
    LimitReached,
    NotFound,
    StaleVersion,
)
from ..jobs import (
    Actor,
    Change,
    Job,
    JobState,
    Prepared,
    PrepareRequest,
)
from ..jsonvalue import JsonError, JsonObject, JsonValue, check_encodable, dumps
from ..ledger import EarlierJob, LedgerUsage, Reader, Transaction
from ..metrics import watching_prepare
from ..net.etag import parse_etag
from .agent_stop import NOTHING_PREPARED, refuse_if_stopped
from .context import Context
from .dispatch import change_diff

log = logging.getLogger(__name__)


def prepare_job(gw: Context, actor: Actor, agent_id: str, request: PrepareRequest) -> Prepared:
    """Read every resource and record before/after. Writes nothing externally. Counted
    and timed by outcome (``metrics``).

    Raises:
        InvalidRequest, NotFound, Forbidden (a resource without conditional writes),
        AgentStopped (a person stopped the agent),
        LimitReached, QuotaExceeded, RateLimited,
        StaleVersion, IdempotencyKeyReused, RemoteUnavailable, RemoteContractBreach,
        MissingToken.
    """
    with watching_prepare() as watch:
        prepared = _prepare(gw, actor, agent_id, request)
        watch.outcome = "replayed" if prepared.replay else "prepared"
        return prepared


def _prepare(gw: Context, actor: Actor, agent_id: str, request: PrepareRequest) -> Prepared:
    limits = gw.config.limits
    summary = request.summary.strip()
    if not summary or len(summary) > 2000:
        raise InvalidRequest("a summary of 1 to 2000 characters is required")
    if request.attribution_label is not None and len(request.attribution_label) > 200:
        raise InvalidRequest("attribution_label is at most 200 characters")
    if request.session is not None and not 1 <= len(request.session) <= 200:
        raise InvalidRequest("session is 1 to 200 characters")
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
        earlier = _find_idempotent(gw, actor.owner_id, agent_id, request.idempotency_key)
        if earlier is not None:
            return _replay(gw, earlier, digest)
    seen: set[str] = set()
    resources: list[Resource] = []
    for change in request.changes:
        res = gw.config.resource(change.resource_id)
        if res is None or res.agent_id != agent_id or res.test_copy_of is not None:
            # Same answer for unknown and foreign: an agent learns nothing of others.
            raise NotFound(f"unknown resource {change.resource_id!r}", resource=change.resource_id)
        if change.resource_id in seen:
            raise InvalidRequest(
                # Also one record of a collection per job: two upserts of one email in
                # one job would both find no match and create it twice.
                f"{change.resource_id!r} appears twice; a job changes a resource once: put "
                "all its fields in one change (a collection: one record per job)",
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
    _admit(gw, actor.owner_id, agent_id)
    deadline = gw.deadline()
    changes: list[Change] = []
    for index, (change, res) in enumerate(zip(request.changes, resources, strict=True)):
        plan, snap = adapter_for(res.kind).prepare(gw.wire, res, change, limits, deadline)
        if change.expected_version is not None:
            _check_expected_version(res, change.expected_version, snap)
        changes.append(plan.change(index, res, snap, change.assertion_kind))
    payload = _payload_size(summary, changes)
    if payload > limits.max_job_bytes:
        raise LimitReached(
            f"the job would store {payload} bytes; the limit is {limits.max_job_bytes}",
            limit="max_job_bytes",
        )
    now = gw.clock()
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
        session=request.session,
    )

    def commit(tx: Transaction) -> Prepared:
        if request.idempotency_key is not None:
            # A concurrent duplicate may have committed while we were reading.
            earlier = tx.find_idempotent(actor.owner_id, agent_id, request.idempotency_key)
            if earlier is not None:
                return _replay(gw, earlier, digest)
        refuse_if_stopped(tx, actor.owner_id, agent_id, NOTHING_PREPARED)
        tx.insert_job(job, digest, payload)
        gw.notifier.job_moved(tx, job, JobState.PREPARED, previous=None)
        tx.add_event(
            job_id=job.id,
            actor=actor.label,
            access_path=actor.access_path,
            operation="prepare",
            target=",".join(ch.resource_id for ch in changes),
            to_state=JobState.PREPARED.value,
            # The seals hold the rows an apply and an undo write from to this event
            # (seals.py): a change edited behind the ledger is refused before a write.
            detail={
                "changes": [change_diff(ch) for ch in changes],
                "seals": [change_seal(ch) for ch in changes],
                **({"session": job.session} if job.session is not None else {}),
            },
        )

        def admit() -> None:
            # The quotas and the ledger's limits, counted with the job (its own row
            # included, so one more than each quota) and refused by what was there
            # before it; a refusal rolls it all back. At the commit: where writes run
            # at once, under the hash chain's lock, which every write holds from there
            # to its commit anyway, so no other lock (an owner's, the counter rows)
            # makes one owner's prepares, or every owner's, wait in a second queue.
            stop_at = (
                limits.max_unresolved_jobs_per_agent + 1,
                limits.max_unresolved_jobs_per_owner + 1,
            )
            admitted = tx.admit_job(actor.owner_id, agent_id, payload, stop_at=stop_at)
            gw.quotas.refuse_over(
                agent_id, admitted.agent_unresolved - 1, admitted.owner_unresolved - 1
            )
            after = admitted.usage
            _check_capacity(gw, LedgerUsage(after.jobs - 1, after.payload_bytes - payload), payload)

        tx.check_before_commit(admit)
        return Prepared(job=job, replay=False)

    return gw.ledger.write(commit)


def _find_idempotent(gw: Context, owner_id: str, agent_id: str, key: str) -> EarlierJob | None:
    return gw.ledger.read(lambda tx: tx.find_idempotent(owner_id, agent_id, key))


def _replay(gw: Context, earlier: EarlierJob, digest: str) -> Prepared:
    job_id, earlier_digest, created_at = earlier
    days = gw.config.limits.idempotency_days
    if created_at < gw.clock() - days * 86400:
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
    job = gw.ledger.load_job(job_id)
    assert job is not None
    return Prepared(job=job, replay=True)


def _admit(gw: Context, owner_id: str, agent_id: str) -> None:
    """Before any remote read: refuse an agent at a quota or a ledger at a limit (as of
    the last commit, in one read: on PostgreSQL each transaction is a pooled connection
    and round trips), then one over its rate. The checks in the insert's transaction are
    the binding ones.

    Raises:
        AgentStopped, QuotaExceeded, LimitReached, RateLimited.
    """

    def admissible(tx: Reader) -> None:
        refuse_if_stopped(tx, owner_id, agent_id, NOTHING_PREPARED)
        gw.quotas.check_unresolved(tx, owner_id, agent_id)
        _check_capacity(gw, tx.usage(), 0)

    gw.ledger.read(admissible)
    gw.quotas.rate.take(owner_id, agent_id)


def _check_capacity(gw: Context, usage: LedgerUsage, payload: int) -> None:
    """Refuse a job of ``payload`` bytes that the ledger, as ``usage`` says, has no room for."""
    limits = gw.config.limits
    if usage.jobs >= limits.max_jobs:
        raise LimitReached(
            f"the ledger holds {limits.max_jobs} jobs, its limit; no new job can be "
            "prepared (history is never deleted: raise limits.max_jobs or start a new "
            "ledger)",
            limit="max_jobs",
        )
    if usage.payload_bytes + payload > limits.max_receipt_bytes:
        raise LimitReached(
            "the ledger's receipt payload limit is reached; no new job can be prepared",
            limit="max_receipt_bytes",
        )


def _check_text_input(request: PrepareRequest) -> None:
    """Agent text must be writable as UTF-8: an unpaired surrogate is refused up front."""
    try:
        values: list[JsonValue] = [
            request.summary,
            request.attribution_label,
            request.idempotency_key,
            request.session,
        ]
        for c in request.changes:
            values += [c.resource_id, c.expected_version, *c.members.values()]
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


def _payload_size(summary: str, changes: list[Change]) -> int:
    size = len(summary.encode())
    for ch in changes:
        size += adapter_for(ch.kind).payload_size(ch)
    return size


def _request_digest(agent_id: str, request: PrepareRequest) -> str:
    """What makes two prepares "the same" for idempotency (the key itself excluded).

    A change's members count where they ask something (a member given as its default,
    ``delete: false``, asks nothing); the first release's members are in every digest
    (``digest_defaults``), so that an earlier job's digest stays what it was."""
    defaults = digest_defaults()
    body: JsonObject = {
        "agent": agent_id,
        "summary": request.summary,
        "attribution_label": request.attribution_label,
        "changes": [
            {
                "resource": ch.resource_id,
                "expected_version": ch.expected_version,
                "assertion_kind": ch.assertion_kind.value if ch.assertion_kind else None,
                **defaults,
                **{
                    name: value
                    for name, value in ch.members.items()
                    if name in defaults or not _asks_nothing(name, value)
                },
            }
            for ch in request.changes
        ],
    }
    # surrogatepass: a lone surrogate must reach the adapter's clear refusal, not crash here.
    return sha256_hex(dumps(body).encode("utf-8", "surrogatepass"))


def _asks_nothing(name: str, value: JsonValue) -> bool:
    member = change_member(name)
    return member is not None and value == member.default
