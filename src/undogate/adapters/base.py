"""The one interface every resource kind implements: ``Adapter``, and the values it
trades in (``Snapshot``, ``Plan``, ``ConditionalWrite``).

An ``Adapter`` is everything one kind knows, and nothing else in the house asks which
kind it is dealing with: a change, a resource and a job carry their kind as an opaque
key, and whoever needs kind-specific behaviour looks the adapter up in the registry
(``registry.adapter_for``). An adapter is stateless (one instance serves its kind); what
it needs of the world comes in as arguments, and the wire itself is ``wire.Wire``,
handed to a kind as a ``Reader`` (GETs only) or, on a test copy, a ``Prober``.

What a kind owns, in the order a change lives through it: its settings (a model of its
own keys, and the checks that need the whole resource); the members a change of it
takes (``shapes``); parsing what a read returns; planning a change (its two sides,
which only the adapter interprets); whether a resource shows a side; the conditional
write that moves it from one side to the other and how that write's answer is
classified (docs/remote-contract.md); which other changes it overlaps; what surfaces show of it
(the event diff, the receipt's and the preview's values, a page's line diff, the words
on reversibility); and its endpoint check on a test copy (``checks``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import ClassVar, Protocol

from ..diffs import Hunk
from ..errors import InvalidRequest
from ..jobs import ABSENT, AssertionKind, Change, ChangeRequest, ChangeView, SideValue
from ..jobs import ConditionalWrite as ConditionalWrite  # the kinds build it; jobs.py holds it
from ..jsonvalue import JsonObject, JsonValue
from ..net import RemoteResponse
from ..net.etag import ETag, parse_etag
from ..resources import KindSettings, Limits, Resource
from .checks.steps import CheckRun
from .shapes import ChangeMember, ChangeShape


class Side(StrEnum):
    BEFORE = "before"
    AFTER = "after"


class Verdict(StrEnum):
    """What a write's answer alone says (docs/remote-contract.md)."""

    REFUSED = "refused"  # certain: the server changed nothing
    UNCERTAIN = "uncertain"  # it may or may not have
    READ_BACK = "read_back"  # it says it did: a read-back decides


# These answers mean the server changed nothing (docs/remote-contract.md).
REFUSAL_STATUSES = frozenset({401, 403, 404, 405, 409, 412, 415, 422})
SUCCESS_STATUSES = frozenset({200, 204})
# What an endpoint answers a write whose ``If-Match`` no longer matches (RFC 9110).
PRECONDITION_FAILED = 412

# A snapshot's version where the resource does not exist (never a quoted entity-tag).
ABSENT_VERSION = "absent"

# What a change's undo needs verified on a test copy and accepted by a reviewer before
# it is offered (docs/collections.md): deleting what a create made, re-creating what a delete took.
UNDO_OF_CREATE = "undo_of_create"
RECREATE = "recreate"


def media_type_is(value: str, allowed: frozenset[str]) -> bool:
    """``value`` is one of ``allowed`` with no parameter or only ``charset=utf-8``.

    Type and parameter names compare case-insensitively; the charset value may be quoted
    and must be utf-8 (docs/remote-contract.md: the bytes are strict UTF-8, whatever is claimed).
    """
    main, *params = value.split(";")
    if main.strip().lower() not in allowed:
        return False
    seen_charset = False
    for param in params:
        name, sep, val = param.partition("=")
        if not sep or name.strip().lower() != "charset" or seen_charset:
            return False
        val = val.strip()
        if len(val) >= 2 and val[0] == val[-1] == '"':
            val = val[1:-1]
        if val.lower() != "utf-8":
            return False
        seen_charset = True
    return True


@dataclass(frozen=True)
class Snapshot:
    """One read of a resource: its version, media type, digest, and its ``content`` as
    the kind parsed it.

    ``etag`` is the resource's version: the read's strong ETag, or, where the kind keeps
    the version in the body (``Guard.in_body``), that version as an entity-tag (the
    read's own ETag, weak or strong, is then not consulted). ``body`` is the bytes the
    read returned, for a write that sends the document back as read."""

    etag: ETag
    media_type: str
    digest: str
    size: int
    content: JsonValue
    address: str | None = None
    # False: the resource does not exist (a read answered 404 or 410); ``content`` is
    # then whatever the kind says about the absence (``None``: nothing more).
    exists: bool = True
    # The part of the resource this read is of, for kinds with parts (a record's id).
    target: str | None = None
    body: bytes = field(default=b"", repr=False)

    @property
    def version(self) -> str:
        """What a preview pins: the ETag header, or ``absent``."""
        return self.etag.header if self.exists else ABSENT_VERSION


def absent_snapshot(
    content: JsonValue = None, *, address: str | None = None, target: str | None = None
) -> Snapshot:
    """A read that found nothing: a side on which the resource does not exist."""
    return Snapshot(
        etag=ETag(""),
        media_type="",
        digest="",
        size=0,
        content=content,
        address=address,
        exists=False,
        target=target,
    )


class Reader(Protocol):
    """What a kind may ask of the wire (``wire.Wire``) while a change is prepared,
    previewed or confirmed: reads, nothing else. Its writes are the ``ConditionalWrite``
    values it builds, which the preview shows and the confirm sends; the credential is
    added when a request leaves, never handed to a kind."""

    @property
    def limits(self) -> Limits: ...

    def read(
        self, resource: Resource, deadline: float | None = None, *, absent_ok: bool = False
    ) -> Snapshot:
        """GET ``resource`` and check it against the remote contract."""
        ...

    def fetch(
        self,
        resource: Resource,
        url: str,
        deadline: float | None,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        max_body: int | None = None,
    ) -> RemoteResponse:
        """A read of ``url`` (a listing, a query, a ``PROPFIND``) under ``resource``'s
        credentials and flags, its answer read up to ``max_body`` bytes (by default four
        documents' worth); a method that is not a read is refused."""
        ...


class Prober(Reader, Protocol):
    """What an endpoint check may send to a disposable test copy (docs/remote-contract.md) besides
    reads: a kind's own conditional writes, and a bare request (a DELETE of a probe)."""

    def send_write(
        self, resource: Resource, write: ConditionalWrite, deadline: float | None
    ) -> RemoteResponse: ...

    def send_bare(
        self,
        resource: Resource,
        method: str,
        url: str,
        deadline: float | None,
        *,
        max_body: int | None = None,
    ) -> RemoteResponse: ...


@dataclass(frozen=True)
class Plan:
    """What prepare records for one change: the touched parts and both sides."""

    fields: tuple[str, ...]
    before: SideValue
    after: SideValue
    target: str | None = None

    def change(
        self,
        index: int,
        resource: Resource,
        read: Snapshot,
        assertion_kind: AssertionKind | None = None,
    ) -> Change:
        """The planned change as a job records it, against the read it was planned on."""
        return Change(
            index=index,
            resource_id=resource.id,
            kind=resource.kind,
            fingerprint=resource.fingerprint,
            fields=self.fields,
            before=self.before,
            after=self.after,
            media_type=read.media_type,
            prepared_etag=read.version,
            assertion_kind=assertion_kind,
            target=self.target,
        )


@dataclass(frozen=True)
class Guard:
    """How a write to a resource carries the version it was planned on, and how the
    resource's endpoint refuses one that went stale.

    ``in_body``: the version lives in the body (a CouchDB ``_rev``), not in the ETag;
    ``stale_statuses``: what the endpoint answers a stale version (412 for ``If-Match``);
    ``mode``: how the kind writes the resource, in a few words, where it can write in
    more than one way (the endpoint check's verdict names it)."""

    in_body: bool = False
    stale_statuses: frozenset[int] = frozenset({PRECONDITION_FAILED})
    mode: str | None = None


class Adapter(ABC):
    """Everything one resource kind knows. Stateless: the registry holds one of each."""

    kind: ClassVar[str]  # the registry key: the ``kind`` a config names
    noun: ClassVar[str]  # what the pages call one resource of this kind
    # What the pages call one part a change touches, and several (a table's column head).
    part_names: ClassVar[tuple[str, str]] = ("field", "fields")
    accept: ClassVar[str]  # the Accept header of a read
    summary: ClassVar[str]  # what one resource of this kind is, in a line (docs, agents)
    # How an agent writes a change of this kind, in a few sentences of the tool's
    # description (MCP ``prepare_changes``); it names the members below.
    agent_guide: ClassVar[str]
    settings_model: ClassVar[type[KindSettings]] = KindSettings  # its own config keys
    change_members: ClassVar[tuple[ChangeMember, ...]] = ()
    change_shapes: ClassVar[tuple[ChangeShape, ...]] = ()

    # -- the config ------------------------------------------------------------------

    def config_problems(self, resource: Resource, limits: Limits) -> list[tuple[str, str]]:
        """What is wrong with ``resource``'s settings for this kind beyond what its
        ``settings_model`` checks: (setting, problem) pairs, the setting's path relative
        to the resource (``fields[2]``)."""
        return []

    def test_copy_problem(self, copy: Resource, production: Resource) -> str | None:
        """Why ``copy`` (of the same kind) cannot stand for ``production`` in an
        endpoint check (``None``: it can)."""
        return None

    def agent_fields(self, resource: Resource) -> tuple[str, ...]:
        """The parts of the resource an agent may name in a change (its ``fields``)."""
        return ()

    def members(self, request: ChangeRequest) -> JsonObject:
        """The change's members that this kind declares; a member it does not take
        (another kind's) is refused here, so no kind reads what it does not know. One
        that asks nothing (empty, false) is let be, as an absent one.

        Raises:
            InvalidRequest: a member this kind does not take.
        """
        mine = {m.name for m in self.change_members}
        for name, value in request.members.items():
            if name not in mine and value not in (False, "", [], {}):
                taken = ", ".join(sorted(mine)) or "no member"
                raise InvalidRequest(
                    f"{request.resource_id} is a {self.noun}: a change of it takes {taken}, "
                    f"not {name}",
                    resource=request.resource_id,
                    member=name,
                )
        return request.members

    # -- reading and planning ----------------------------------------------------------

    @abstractmethod
    def parse(self, resource: Resource, media_type: str, body: bytes, limits: Limits) -> JsonValue:
        """Check the media type and decode the body into a snapshot's ``content``.

        Raises:
            RemoteContractBreach: unsupported media type, malformed or oversize data.
        """

    @abstractmethod
    def plan(
        self, resource: Resource, request: ChangeRequest, snapshot: Snapshot, limits: Limits
    ) -> Plan:
        """Record before and after for one change.

        Raises:
            InvalidRequest: fields not allow-listed, non-top-level paths, no-op, oversize.
        """

    def prepare(
        self,
        wire: Reader,
        resource: Resource,
        request: ChangeRequest,
        limits: Limits,
        deadline: float | None,
    ) -> tuple[Plan, Snapshot]:
        """Read what a change needs and plan it (the read is returned for prepare's own
        checks). Unless a kind reads more: one read of the resource, then ``plan``.

        Raises: as ``plan`` and ``Reader.read``."""
        snapshot = wire.read(resource, deadline)
        return self.plan(resource, request, snapshot, limits), snapshot

    def read_change(
        self, wire: Reader, resource: Resource, change: Change, deadline: float | None
    ) -> Snapshot:
        """What the change's resource shows now. A change with a side on which the
        resource does not exist may find it absent.

        Raises: RemoteUnavailable, RemoteContractBreach, MissingToken, BlockedAddress."""
        absent_ok = change.before is ABSENT or change.after is ABSENT
        return wire.read(resource, deadline, absent_ok=absent_ok)

    def written_target(
        self, resource: Resource, change: Change, write: ConditionalWrite, response: RemoteResponse
    ) -> str | None:
        """The part a successful write landed on (a POST create learns its record's id
        from the answer); unless a kind says otherwise, the change's own target."""
        return change.target

    def undo_needs(self, change: Change) -> str | None:
        """What the change's undo needs verified on a test copy and accepted before it
        is offered (``UNDO_OF_CREATE``, ``RECREATE``), or ``None``: always offered."""
        return None

    @abstractmethod
    def payload_size(self, change: Change) -> int:
        """The bytes a change's values count for against the job and ledger limits."""

    # -- comparing -----------------------------------------------------------------------

    @abstractmethod
    def current(self, change: Change, snapshot: Snapshot) -> SideValue:
        """What the resource shows now, as a side of ``change`` (a preview's "current")."""

    @abstractmethod
    def shows(self, change: Change, snapshot: Snapshot, side: Side) -> bool:
        """True when the resource currently shows ``side`` of the change."""

    def differing(self, change: Change, snapshot: Snapshot) -> tuple[str, ...]:
        """The parts of the resource that show neither side of ``change``, by name only
        (never a value: whoever may see the job may see these); empty where the kind
        names no parts, or where the resource does not exist."""
        return ()

    def undo_guard_holds(self, change: Change, snapshot: Snapshot) -> bool:
        """The undo guard: it still shows what the job wrote, unless a kind is stricter."""
        return self.shows(change, snapshot, Side.AFTER)

    def undone(self, resource: Resource, change: Change, snapshot: Snapshot) -> Snapshot | None:
        """What the resource will show once the undo of ``change`` lands on
        ``snapshot`` (its version aside: a rewind plan sets that), so that a plan can
        check the guards of the changes before it and show their writes exactly
        (docs/rewind.md). ``None``: this kind cannot foresee it, and a plan blocks the
        older changes on the resource."""
        return None

    # -- writing -------------------------------------------------------------------------

    @abstractmethod
    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        """The conditional write that moves the resource to ``target`` of the change."""

    def guard(self, resource: Resource) -> Guard:
        """How writes to ``resource`` carry their version; unless a kind says otherwise,
        ``If-Match`` with the read's strong ETag, refused with 412."""
        return Guard()

    def body_version(self, resource: Resource, body: bytes) -> ETag:
        """The version a read's ``body`` carries, for a resource whose ``guard`` keeps
        it there (asked only then).

        Raises:
            RemoteContractBreach: the body holds no version the gateway can pin.
        """
        raise NotImplementedError(f"{self.kind} keeps no version in the body")

    def classify(self, write: ConditionalWrite, response: RemoteResponse) -> Verdict:
        """What the answer to ``write`` says on its own (docs/remote-contract.md's table)."""
        if response.status in REFUSAL_STATUSES:
            return Verdict.REFUSED
        if response.status not in SUCCESS_STATUSES:
            return Verdict.UNCERTAIN
        return Verdict.READ_BACK

    def verdict(
        self,
        resource: Resource,
        write: ConditionalWrite,
        response: RemoteResponse,
        seen_stale: frozenset[int],
    ) -> Verdict:
        """What the answer to ``write`` says, knowing what the resource's endpoint was
        seen to do: ``seen_stale`` are the statuses with which it refused a stale write,
        changing nothing, in the latest passing endpoint check of the resource under its
        current identity. A status the resource's guard names for a stale version, other
        than 412, is the operator's word until such a check saw it: uncertain before,
        refused after (docs/remote-contract.md). Everything else: ``classify``."""
        if self.needs_stale_evidence(resource, response):
            return Verdict.REFUSED if response.status in seen_stale else Verdict.UNCERTAIN
        return self.classify(write, response)

    def needs_stale_evidence(self, resource: Resource, response: RemoteResponse) -> bool:
        """Whether ``verdict`` of ``response`` turns on ``seen_stale``: a status the
        resource's guard names for a stale version, other than 412. Any other answer
        needs no endpoint check read."""
        status = response.status
        return status != PRECONDITION_FAILED and status in self.guard(resource).stale_statuses

    def read_back_problem(
        self,
        change: Change,
        write: ConditionalWrite,
        response: RemoteResponse,
        snapshot: Snapshot,
        target: Side,
    ) -> str | None:
        """Why the read-back after a successful answer does not show the write landed
        (``None``: it did; docs/remote-contract.md): a new version, the one the write answered if it
        answered one, and the desired values. A resource that is gone shows only the
        side on which it does not exist."""
        if not snapshot.exists:
            if self.shows(change, snapshot, target):
                return None
            return "read-back finds nothing where the write should have left the resource"
        if write.if_match is not None and snapshot.etag.header == write.if_match:
            return "read-back shows the old version: the write did not take effect"
        answered = _single_strong_etag(response)
        if answered is not None and not answered.strong_equals(snapshot.etag):
            # The write answered one version, the read-back shows another: someone wrote
            # in between, and their version must not be recorded as ours.
            return "read-back shows a different version than the write answered"
        if not self.shows(change, snapshot, target):
            return "read-back does not show the desired values"
        return None

    # -- other jobs ----------------------------------------------------------------------

    @abstractmethod
    def overlaps(self, held: Sequence[str], wanted: Sequence[str]) -> bool:
        """Whether a change that holds ``held`` parts of a resource of this kind stands in
        the way of one that touches ``wanted`` parts of it."""

    # -- what every surface shows --------------------------------------------------------

    @abstractmethod
    def event_diff(self, change: Change, toward: Side) -> JsonObject:
        """What an event records of the change moving toward ``toward``."""

    @abstractmethod
    def receipt_values(self, change: Change) -> JsonObject:
        """The receipt's members that show the change's two sides."""

    @abstractmethod
    def preview_values(self, view: ChangeView, change: Change | None) -> JsonObject:
        """The preview's members that show current against planned."""

    def line_diff(self, old: SideValue, new: SideValue | None) -> list[Hunk] | None:
        """The line diff a page shows between two sides (``None``: the receipt's field
        table shows the change instead)."""
        return None

    @abstractmethod
    def reversibility(self, change: Change) -> str:
        """What undo can restore of the change, in plain words."""

    # -- the endpoint check (docs/remote-contract.md) -------------------------------------

    @abstractmethod
    def endpoint_check(
        self,
        wire: Prober,
        copy: Resource,
        production: Resource,
        timeout_s: float,
        keep: Callable[[bytes], Path | None],
    ) -> CheckRun:
        """Check the endpoint on the disposable test ``copy`` of ``production``: every
        request the gateway would send, each refusal it relies on, and the copy put back
        (or exactly what to restore by hand; ``keep`` saves bytes privately and says
        where, None: it could not). ``production`` is only ever read.
        """


def _single_strong_etag(response: RemoteResponse) -> ETag | None:
    """The write response's ETag, when it carries exactly one strong one (optional: the
    read-back supplies the version otherwise)."""
    values = response.headers.get_list("etag")
    if len(values) != 1:
        return None
    try:
        tag = parse_etag(values[0])
    except ValueError:
        return None
    return None if tag.weak else tag
