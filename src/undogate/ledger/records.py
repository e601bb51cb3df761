"""What the ledger hands back: plain values, the same whichever engine stores them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, NamedTuple, TypeVar

from ..jobs import ChangeState, JobState, Operation
from ..jsonvalue import JsonObject, JsonValue


class JobSummary(NamedTuple):
    """One row of a job list: newest first, no values."""

    id: str
    state: str
    summary: str
    created_at: float
    change_count: int


@dataclass(frozen=True)
class Event:
    id: int
    job_id: str | None
    at: float
    actor: str
    access_path: str
    operation: str
    target: str | None
    from_state: str | None
    to_state: str | None
    detail: JsonObject | None


@dataclass(frozen=True)
class OpenChange:
    """Another job's change that still holds a resource: applied, uncertain, or with a
    write in flight right now (an intent committed, no outcome yet)."""

    job_id: str
    resource_id: str
    kind: str
    fields: tuple[str, ...]
    state: ChangeState
    applied_seq: int | None
    fingerprint: str
    in_flight: bool
    target: str | None = None


@dataclass(frozen=True)
class StoredCheck:
    """The latest endpoint check of a resource: its evidence (digests, counts, outcomes)."""

    id: int
    passed: bool
    evidence: JsonObject
    at: float


@dataclass(frozen=True)
class UndoAcceptance:
    """A reviewer's acceptance of a verified undo (an ``undo_accepted`` event)."""

    event_id: int
    at: float
    actor: str
    detail: JsonObject


@dataclass(frozen=True)
class StoredRewind:
    """A rewind plan's row (docs/rewind.md): what it selected, its steps as last walked
    (JSON, as ``operations.rewind_plan.Step`` writes them), its one preview token by
    hash and the versions that preview read; ``state`` is ``planned``, ``running`` or
    ``finished``; ``stopped`` says where a run stopped early."""

    id: str
    owner_id: str
    agent_id: str
    created_by: str
    selection: JsonObject
    steps: list[JsonValue]
    state: str
    token_hash: str | None
    expires_at: float | None
    versions: JsonObject
    skip_blocked: bool
    confirmed_at: float | None
    stopped: JsonObject | None
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class StoredPreview:
    token_hash: str
    job_id: str
    operation: Operation
    created_at: float
    expires_at: float
    consumed_at: float | None
    op_seq: int | None
    snapshot: JsonObject


class EarlierJob(NamedTuple):
    """The newest job an idempotency key names: what a replay compares with."""

    id: str
    request_digest: str
    created_at: float


@dataclass(frozen=True)
class LedgerUsage:
    """The ledger-wide counters ``limits.max_jobs`` and ``max_receipt_bytes`` bound."""

    jobs: int
    payload_bytes: int


@dataclass(frozen=True)
class Admission:
    """What a new job is admitted against, counted with it (``Transaction.admit_job``):
    the unresolved jobs of its agent and of its owner (each counted no further than
    asked), and the ledger-wide counters after it."""

    agent_unresolved: int
    owner_unresolved: int
    usage: LedgerUsage


T = TypeVar("T")


class Answer(Generic[T]):
    """What a write asked the ledger, read when ``value`` is called, not when asked: on
    PostgreSQL, whose statements are pipelined, the question travels with the statements
    after it and costs no round trip of its own (read after the commit, none at all).
    Never a truth value: ``if answer`` would test the object, not what it holds."""

    __slots__ = ("_known", "_read", "_value")

    def __init__(self, read: Callable[[], T]) -> None:
        self._read = read
        self._known = False
        self._value: T | None = None

    def value(self) -> T:
        if not self._known:
            self._value, self._known = self._read(), True
        return self._value  # type: ignore[return-value]

    def __bool__(self) -> bool:
        raise TypeError("an Answer is not a truth value: call .value()")


@dataclass(frozen=True)
class OpenLease:
    """A process's lease, as a scrape shows it: who holds it and how long ago it was
    last renewed (by the ledger's clock)."""

    id: str
    holder: str
    renewed_s_ago: float


@dataclass(frozen=True)
class OperatingFigures:
    """What the ledger shows an operator now: writes whose outcome is uncertain and the
    resources they quarantine, writes in flight, the webhook outbox's backlog (and how
    long its oldest message has waited), and every open lease."""

    uncertain_changes: int
    quarantined_resources: int
    writes_in_flight: int
    webhooks_pending: int
    oldest_webhook_s: float
    leases: tuple[OpenLease, ...]


class UnfinishedJob(NamedTuple):
    """A job that is neither undone, rejected nor invalidated, and the state it is in."""

    id: str
    state: JobState


@dataclass(frozen=True)
class InFlightAction:
    """An action whose intent is committed and whose outcome is not (``dispatching``)."""

    id: int
    job_id: str
    change_index: int
    operation: Operation
    #: the lease of the process that started it (None: no lease, a SQLite ledger)
    lease_id: str | None = None


@dataclass(frozen=True)
class StoredCredential:
    """A credential as the ledger keeps it: the hash of its key, never the key."""

    id: str
    kind: Literal["operator", "agent"]
    owner_id: str
    agent_id: str | None
    scopes: tuple[str, ...]
    agents: tuple[str, ...] | None  # operators: None means every agent
    label: str
    created_at: float
    revoked_at: float | None
    key_hash: str
    #: What the hash chain holds of it: the operation and detail of the event that
    #: issued it (None: no such event), and whether an event revoked it (``seals``).
    issued: tuple[str, JsonObject] | None = None
    revoked_in_chain: bool = False


@dataclass(frozen=True)
class StoredWebSession:
    """A review session as the ledger keeps it: by the SHA-256 of its cookie value,
    naming the credential that signed in (never the key)."""

    id_hash: str
    credential_id: str
    created_at: float
    last_seen: float
    notice: str | None = None


@dataclass(frozen=True)
class StoredWebPreview:
    """A preview a review session made, under its handle: the preview as shown (JSON
    text, without its token) and the token sealed with the session's cookie value."""

    session_hash: str
    handle: str
    job_id: str
    preview: str
    sealed_token: str | None
    created_at: float


@dataclass(frozen=True)
class InboxQuery:
    """One page of the review inbox (``sql_inbox``): an owner's jobs of some agents,
    newest first, narrowed by each filter given; ``after`` is the last job id of the
    page before (keyset pagination: each page costs the same, however deep)."""

    owner_id: str
    agents: tuple[str, ...]
    states: tuple[JobState, ...] = ()
    quarantined: bool = False  # only jobs still holding an uncertain change
    resource_id: str | None = None
    since: float | None = None  # prepared at or after
    until: float | None = None  # prepared before
    id_prefix: str | None = None
    after: str | None = None
    limit: int = 100


@dataclass(frozen=True)
class InboxRow:
    """One job in the inbox: what a reviewer sorts by, never a value."""

    id: str
    agent_id: str
    state: JobState
    summary: str
    created_at: float
    updated_at: float
    change_count: int
    resources: tuple[str, ...]
    quarantined: bool


@dataclass(frozen=True)
class ExportedJob:
    """A job as the audit export lists it (``sql_export``): never a value."""

    id: str
    owner_id: str
    agent_id: str
    state: JobState
    summary: str
    attribution_label: str | None
    created_at: float
    updated_at: float
    change_count: int
    invalidated_reason: str | None


@dataclass(frozen=True)
class OutboxMessage:
    """One webhook message to one endpoint, as the outbox holds it. ``id`` is the
    ``webhook-id`` (the same on every attempt); ``payload`` the exact body sent (ids and
    states, never values)."""

    id: str
    endpoint: str
    event: str
    job_id: str
    agent_id: str
    payload: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    next_attempt_at: float
    last_response_status: int | None
    last_error: str | None
    created_at: float
    updated_at: float


__all__ = [
    "Answer",
    "EarlierJob",
    "Event",
    "ExportedJob",
    "InFlightAction",
    "InboxQuery",
    "InboxRow",
    "LedgerUsage",
    "OpenChange",
    "OpenLease",
    "OperatingFigures",
    "OutboxMessage",
    "StoredCredential",
    "StoredEnrolment",
    "StoredPasskey",
    "StoredPreview",
    "StoredWebPreview",
    "StoredWebSession",
    "UnfinishedJob",
]


@dataclass(frozen=True)
class StoredPasskey:
    """A registered passkey: its credential id and COSE public key (base64url), the
    relying party and origin it was registered on, and its last sign count."""

    id: str
    owner_id: str
    label: str
    public_key: str
    sign_count: int
    rp_id: str
    origin: str
    created_at: float
    revoked_at: float | None


@dataclass(frozen=True)
class StoredEnrolment:
    """A one-time code that enrols an owner's first passkey: its SHA-256 (the code
    itself is never kept), whose it is, until when it holds, and when it was spent and
    on which passkey."""

    code_sha256: str
    owner_id: str
    created_at: float
    expires_at: float
    used_at: float | None
    passkey_id: str | None
