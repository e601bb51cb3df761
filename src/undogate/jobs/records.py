"""Jobs, their changes and actions, and the records an operation takes and returns
(a prepare's request, a preview, a confirmation, a write planned for one). Pure: no I/O,
no framework."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final, Literal, TypeAlias

from ..jsonvalue import JsonObject, JsonValue
from .machine import ActionStatus, AssertionKind, ChangeState, JobState, Observation, Operation


class Absent(Enum):
    """The side of a change on which its resource does not exist (before a create,
    after a delete)."""

    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = Absent.ABSENT

# One side of a change: ``ABSENT``, or a JSON object whose meaning only the change's
# kind knows (its adapter writes and reads it; the ledger stores it as JSON text).
SideValue: TypeAlias = JsonObject | Literal[Absent.ABSENT]


@dataclass(frozen=True)
class Change:
    """One planned change to one resource, with what was recorded when it was prepared.

    ``kind`` is a key of the adapters' registry, opaque here. ``before`` and ``after``
    are the change's two sides, as its kind's adapter defines them. ``fields`` names the
    parts of the resource the change touches, for kinds that have parts (an empty tuple
    means the whole resource); ``media_type`` is what the resource showed when prepared.
    """

    index: int
    resource_id: str
    kind: str
    fingerprint: str
    fields: tuple[str, ...]
    before: SideValue
    after: SideValue
    media_type: str
    prepared_etag: str
    assertion_kind: AssertionKind | None
    state: ChangeState = ChangeState.PENDING
    applied_etag: str | None = None
    applied_at: int | None = None  # ledger sequence of the apply, for undo ordering
    # The part of the resource the change acts on, for kinds whose resource holds parts
    # at their own URLs (a collection's record id); ``None`` for a whole resource, or
    # while a create has not learned the id the server gave it.
    target: str | None = None


@dataclass(frozen=True)
class Action:
    """One external write, recorded individually."""

    id: int
    job_id: str
    change_index: int
    operation: Operation
    status: ActionStatus
    method: str
    url: str
    if_match: str | None
    response_status: int | None
    result_etag: str | None
    address: str | None
    detail: str | None
    observation: Observation | None
    started_at: float
    finished_at: float | None


@dataclass(frozen=True)
class Job:
    id: str
    owner_id: str
    agent_id: str
    summary: str
    attribution_label: str | None
    idempotency_key: str | None
    state: JobState
    undo_started: bool
    created_at: float
    updated_at: float
    changes: tuple[Change, ...]
    actions: tuple[Action, ...] = field(default=())
    invalidated_reason: str | None = None
    # The session the agent named when it prepared (over MCP, the MCP session when it
    # named none): caller-supplied, unverified; a rewind plan may select by it.
    session: str | None = None


@dataclass(frozen=True, init=False)
class ChangeRequest:
    """One change as an agent asked for it, before any read.

    The members every change has (``resource``, ``expected_version``,
    ``assertion_kind``), and ``members``: the rest, as the agent sent them and the API
    checked them member by member (``set``, ``text``, ...). Which members a change may
    carry, and what they mean, is its resource's kind's business: only the kind reads
    ``members``. Keyword arguments beyond the common ones are members:
    ``ChangeRequest("customer", set={"status": "vip"})``.
    """

    resource_id: str
    members: JsonObject
    expected_version: str | None
    assertion_kind: AssertionKind | None

    def __init__(
        self,
        resource_id: str,
        members: JsonObject | None = None,
        *,
        expected_version: str | None = None,
        assertion_kind: AssertionKind | None = None,
        **given: Any,
    ) -> None:
        named = {**(members or {}), **given}
        # A member left out and a member given as null are the same request.
        kept: JsonObject = {k: _json_member(v) for k, v in named.items() if v is not None}
        object.__setattr__(self, "resource_id", resource_id)
        object.__setattr__(self, "members", kept)
        object.__setattr__(self, "expected_version", expected_version)
        object.__setattr__(self, "assertion_kind", assertion_kind)


def _json_member(value: Any) -> JsonValue:
    """A member's value as JSON (a tuple, as Python callers write a list, is one)."""
    if isinstance(value, tuple):
        return [_json_member(v) for v in value]
    return value  # type: ignore[no-any-return]  # callers pass JSON values


# -- what the operations take and give back ------------------------------------------


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
    session: str | None = None


@dataclass(frozen=True)
class Prepared:
    job: Job
    replay: bool


@dataclass(frozen=True)
class ConditionalWrite:
    """The exact request a confirm sends (auth is added at dispatch, never stored).

    ``if_match`` is the version the write is conditional on, when it has one.
    ``replaces`` is the text of the document a whole-document ``PUT`` replaces, as it
    was read: the surfaces show the body as a line diff against it."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes
    if_match: str | None
    replaces: str | None = None

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "method": self.method,
            "url": self.url,
            "headers": dict(self.headers),
            "body": self.body.decode("utf-8"),
        }
        if self.replaces is not None:
            described["replaces"] = self.replaces
        return described


@dataclass(frozen=True)
class ChangeView:
    """One change as a preview shows it: current vs planned, and what blocks it.

    ``current`` is what the resource shows now, as a side of the change; ``planned`` is
    the side the operation would write (``None`` when it writes nothing: accept observed).
    """

    index: int
    resource_id: str
    kind: str
    current_version: str
    current: SideValue
    planned: SideValue | None
    moved_since_prepare: bool
    reversible: bool
    note: str | None = None
    observation: Observation | None = None
    # The operation can never be undone by the gateway (an unverified create or delete,
    # docs/collections.md): confirming it needs the reviewer's explicit acknowledgement.
    irreversible: bool = False


@dataclass(frozen=True)
class Preview:
    job_id: str
    operation: Operation
    token: str | None
    expires_at: float | None
    changes: tuple[ChangeView, ...]
    blockers: tuple[dict[str, Any], ...] = ()
    # The WebAuthn challenge (base64url of the preview digest, docs/proof.md) when
    # confirming needs the reviewer's passkey; None when it does not.
    passkey_challenge: str | None = None
    # The writes confirming it sends, in order, as this preview's reads planned them and
    # as they will leave (``Wire.describe``); none while something blocks it, and none
    # for accept_observed, which sends none.
    requests: tuple[dict[str, Any], ...] = ()

    @property
    def needs_acknowledgement(self) -> bool:
        """Confirming needs ``acknowledge_irreversible``: a change cannot be undone."""
        return any(v.irreversible for v in self.changes)


@dataclass(frozen=True)
class Confirmation:
    job: Job
    repeated: bool = False
    dry_run: bool = False
    requests: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class UndoOffer:
    """What the ledger shows about one resource's verified undos."""

    resource_id: str
    check_id: int | None  # the latest check under the current identity, if any
    checked_at: float | None
    verified: frozenset[str]  # what that check verified (empty unless it passed)
    accepted: frozenset[str]  # what a reviewer accepted under the current identity
    accepted_at: float | None
    # The WebAuthn challenge of accepting it (base64url), where the resource requires
    # the reviewer's passkey (docs/proof.md), and until when it holds (milliseconds since
    # the epoch; the acceptance sends it back); None where it does not or nothing is
    # verified.
    passkey_challenge: str | None = None
    passkey_expires_at_ms: int | None = None

    def offers(self, need: str) -> bool:
        return need in self.verified and need in self.accepted

    @property
    def awaiting_acceptance(self) -> frozenset[str]:
        return self.verified - self.accepted
