"""What the ledger hands back: plain values, the same whichever engine stores them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from ..jobs import ChangeState, JobState, Operation
from ..jsonvalue import JsonObject


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


__all__ = [
    "EarlierJob",
    "Event",
    "InFlightAction",
    "LedgerUsage",
    "OpenChange",
    "StoredCredential",
    "StoredPreview",
    "StoredWebPreview",
    "StoredWebSession",
    "UnfinishedJob",
]
