"""The one interface every resource kind implements, and the registry of kinds.

An ``Adapter`` is everything one kind knows, and nothing else in the house asks which
kind it is dealing with: a change, a resource and a job carry their kind as an opaque
key, and whoever needs kind-specific behaviour looks the adapter up with
``adapter_for(kind)``. An adapter is stateless (one instance serves its kind); what it
needs of the world comes in as arguments, and the wire itself is ``remote.Remote``.

What a kind owns, in the order a change lives through it: the checks of its settings
in the config; parsing what a read returns; planning a change (its two sides, which
only the adapter interprets); whether a resource shows a side; the conditional write
that moves it from one side to the other and how that write's answer is classified
(SPEC §4); which other changes it overlaps; and what every surface shows of it (the
event diff, the receipt's and the preview's values, a page's line diff, the words on
reversibility). The endpoint check's kind-specific steps (SPEC §11) live here too,
in ``WholeResourceAdapter``: the kinds whose resource is one object at one URL (a
collection, whose records appear and disappear, is checked by its own probes).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import ClassVar, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ..diffs import Hunk
from ..errors import InvalidRequest
from ..etag import ETag, parse_etag
from ..jobs import ABSENT, AssertionKind, Change, ChangeRequest, ChangeView, SideValue
from ..jobs import ConditionalWrite as ConditionalWrite  # the kinds build it; jobs.py holds it
from ..jsonvalue import JsonObject, JsonValue
from ..net import RemoteResponse
from ..resources import Limits, Resource


class ResourceKind(StrEnum):
    """The names of the kinds this gateway serves: the registry's keys."""

    JSON_RECORD = "json_record"
    WEBDAV_TEXT = "webdav_text"
    JSON_COLLECTION = "json_collection"


class Side(StrEnum):
    BEFORE = "before"
    AFTER = "after"


class Verdict(StrEnum):
    """What a write's answer alone says (SPEC §4)."""

    REFUSED = "refused"  # certain: the server changed nothing
    UNCERTAIN = "uncertain"  # it may or may not have
    READ_BACK = "read_back"  # it says it did: a read-back decides


# SPEC §4: these answers mean the server changed nothing.
REFUSAL_STATUSES = frozenset({401, 403, 404, 405, 409, 412, 415, 422})
SUCCESS_STATUSES = frozenset({200, 204})

# What the endpoint check records of a step: digests, counts, statuses, never values.
Evidence = dict[str, bool | int | str]

# A snapshot's version where the resource does not exist (never a quoted entity-tag).
ABSENT_VERSION = "absent"

# What a change's undo needs verified on a test copy and accepted by a reviewer before
# it is offered (SPEC §12): deleting what a create made, re-creating what a delete took.
UNDO_OF_CREATE = "undo_of_create"
RECREATE = "recreate"


def media_type_is(value: str, allowed: frozenset[str]) -> bool:
    """``value`` is one of ``allowed`` with no parameter or only ``charset=utf-8``.

    Type and parameter names compare case-insensitively; the charset value may be quoted
    and must be utf-8 (SPEC §6: the bytes are strict UTF-8, whatever else is claimed).
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
    the kind parsed it."""

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

    @property
    def version(self) -> str:
        """What a preview pins: the ETag header, or ``absent``."""
        return self.etag.header if self.exists else ABSENT_VERSION


def absent_snapshot(
    content: JsonValue = None, *, address: str | None = None, target: str | None = None
) -> Snapshot:
    """A read that found nothing (SPEC §12: a side on which the resource does not exist)."""
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


class Wire(Protocol):
    """What an adapter may ask of the wire (``remote.Remote``) for its own reads."""

    limits: Limits

    def read(
        self, resource: Resource, deadline: float | None = None, *, absent_ok: bool = False
    ) -> Snapshot: ...

    def send_bare(
        self, resource: Resource, method: str, url: str, deadline: float | None
    ) -> RemoteResponse: ...


def not_for_this_kind(resource: Resource, *, create: bool = False) -> list[tuple[str, str]]:
    """The §12 settings a kind without records that appear refuses (``create``: it
    takes ``create: true``)."""
    problems: list[tuple[str, str]] = []
    if resource.create is not None and not (create and resource.create is True):
        allowed = "only create: true" if create else "no create setting"
        problems.append(("create", f"a {resource.kind} takes {allowed}"))
    for name in ("identity", "lookup", "server_fields"):
        if getattr(resource, name):
            problems.append((name, f"only a json_collection has {name}"))
    if resource.id_field != "id":
        problems.append(("id_field", "only a json_collection has id_field"))
    return problems


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


class Adapter(ABC):
    """Everything one resource kind knows. Stateless: the registry holds one of each."""

    kind: ClassVar[str]  # the registry key
    noun: ClassVar[str]  # what the pages call one resource of this kind
    accept: ClassVar[str]  # the Accept header of a read

    # -- the config ------------------------------------------------------------------

    @abstractmethod
    def config_problems(self, resource: Resource, limits: Limits) -> list[tuple[str, str]]:
        """What is wrong with ``resource``'s settings for this kind: (setting, problem)
        pairs, the setting's path relative to the resource (``fields[2]``)."""

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
        wire: Wire,
        resource: Resource,
        request: ChangeRequest,
        limits: Limits,
        deadline: float | None,
    ) -> tuple[Plan, Snapshot]:
        """Read what a change needs and plan it (the read is returned for prepare's own
        checks). Unless a kind reads more: one read of the resource, then ``plan``.

        Raises: as ``plan`` and ``Remote.read``."""
        snapshot = wire.read(resource, deadline)
        return self.plan(resource, request, snapshot, limits), snapshot

    def read_change(
        self, wire: Wire, resource: Resource, change: Change, deadline: float | None
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

    def undo_guard_holds(self, change: Change, snapshot: Snapshot) -> bool:
        """SPEC §2's undo guard. Unless a kind is stricter: it shows the after side."""
        return self.shows(change, snapshot, Side.AFTER)

    # -- writing -------------------------------------------------------------------------

    @abstractmethod
    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        """The conditional write that moves the resource to ``target`` of the change."""

    def classify(self, write: ConditionalWrite, response: RemoteResponse) -> Verdict:
        """What the answer to ``write`` says on its own (SPEC §4's table)."""
        if response.status in REFUSAL_STATUSES:
            return Verdict.REFUSED
        if response.status not in SUCCESS_STATUSES:
            return Verdict.UNCERTAIN
        return Verdict.READ_BACK

    def read_back_problem(
        self,
        change: Change,
        write: ConditionalWrite,
        response: RemoteResponse,
        snapshot: Snapshot,
        target: Side,
    ) -> str | None:
        """Why the read-back after a successful answer does not show the write landed
        (``None``: it did). SPEC §4/§6: a new version, the one the write answered if it
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


class WholeResourceAdapter(Adapter):
    """A kind whose resource is one object at one URL, and what the endpoint check's §11
    steps (``operations/endpoint_probes``) ask of it. A kind whose records appear and disappear
    (a collection) is checked by its own probes instead (``operations/collection_probes``).
    """

    def sibling_url(self, url: str, name: str) -> str:
        """A URL beside ``url``, made with ``name``, where nothing should exist: unless
        a kind knows better, ``url`` with ``-{name}`` after its path."""
        parts = urlsplit(url)
        path = parts.path
        stem = path.rstrip("/")
        return urlunsplit(parts._replace(path=f"{stem}-{name}{path[len(stem) :]}"))

    @abstractmethod
    def marker_request(self, copy: Resource, start: Snapshot, marker: str) -> ChangeRequest:
        """A change only the check would make: ``marker`` written into the copy."""

    @abstractmethod
    def shows_marker(
        self, copy: Resource, start: Snapshot, now: Snapshot, markers: Sequence[str]
    ) -> bool:
        """The copy shows one of the check's own marker writes (so writing the start back
        loses nothing)."""

    @abstractmethod
    def restored(self, copy: Resource, start: Snapshot, now: Snapshot) -> bool:
        """The copy is as it was at the start, as far as the gateway may change it."""

    @abstractmethod
    def restore_request(self, copy: Resource, start: Snapshot) -> ChangeRequest:
        """The change that puts the start back (planned against the copy as it is now)."""

    @abstractmethod
    def create_attempt(
        self, copy: Resource, start: Snapshot, url: str, tag: ETag, marker: str
    ) -> ConditionalWrite:
        """A write conditional on ``tag`` to ``url``, where nothing exists: it must be
        refused and create nothing."""

    @abstractmethod
    def restore_evidence(
        self, copy: Resource, start: Snapshot, back: Snapshot, ok: bool
    ) -> tuple[Evidence, str]:
        """What the undo step records beyond status and digest, and its summary."""

    @abstractmethod
    def restore_by_hand(
        self,
        copy: Resource,
        start: Snapshot,
        now: Snapshot | None,
        keep: Callable[[bytes], Path | None],
    ) -> str:
        """Exactly what a person must restore by hand (``now``: the copy as last read,
        if it could be). ``keep`` saves bytes privately and says where (None: it could
        not)."""


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


# -- the registry ----------------------------------------------------------------------

_REGISTRY: dict[str, Adapter] = {}
_A = TypeVar("_A", bound=type[Adapter])


def register(cls: _A) -> _A:
    """Class decorator: one stateless instance of ``cls`` serves its kind from now on."""
    key = str(cls.kind)
    if key in _REGISTRY:
        raise RuntimeError(f"two adapters for the kind {key}")
    _REGISTRY[key] = cls()
    return cls


def adapter_for(kind: str) -> Adapter:
    """The adapter of ``kind``.

    Raises:
        InvalidRequest: no adapter serves that kind.
    """
    adapter = _REGISTRY.get(kind)
    if adapter is None:
        raise InvalidRequest(f"resources of kind {kind} are not supported yet")
    return adapter


def kind_names() -> tuple[str, ...]:
    """Every registered kind's name, in registration order."""
    return tuple(_REGISTRY)
