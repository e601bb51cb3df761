"""An address book or a calendar (``vcard_collection``, ``icalendar_collection``):
members at ``{collection}{name}`` that appear and disappear (docs/collections.md), each one object
changed by property as a single ``vcard`` or ``icalendar`` is.

- update (``id`` + ``set``/``remove``): a conditional ``PUT`` of the member as read with
  only the touched properties replaced;
- create: ``PUT {collection}{uid}.vcf|.ics`` with ``If-None-Match: *``, the UID minted
  by the gateway; undone by a ``DELETE`` with ``If-Match`` on the tag its read-back gave;
- delete (``id`` + ``delete``): a ``DELETE`` with the tag the pre-image was read with;
  undone by putting the pre-image back with ``If-None-Match: *``;
- upsert: found by identity evidence over one bounded listing (``listing``): none, a
  create; one, an update of it; several, refused as ``ambiguous`` and nothing prepared.

The undo of a create or a delete is offered only once verified on a test copy and
accepted by a reviewer (``undo_needs``). Sides: ``member_sides``. Any two changes to one
member overlap.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from ...errors import Ambiguous, Conflict, InvalidRequest, NotFound
from ...jobs import ABSENT, Change, ChangeRequest, ChangeState, ChangeView, SideValue
from ...jsonvalue import JsonNumber, JsonObject, JsonValue, dumps
from ...net import RemoteResponse
from ...resources import Limits, Resource
from ..base import (
    REFUSAL_STATUSES,
    Adapter,
    ConditionalWrite,
    Plan,
    Prober,
    Reader,
    Side,
    Snapshot,
    Verdict,
)
from ..checks.collection import run_collection_check
from ..checks.steps import CheckRun
from ..json_collection.members import CREATE, DELETE, ID, UPSERT, deletes, record_id_of, values_of
from ..json_collection.sides import member_undo_guard_holds, member_undo_needs, operation_of
from ..records.members import REMOVE, SET, remove_of, set_of
from . import member_sides
from .changes import (
    check_written,
    document,
    parse_body,
    plan_properties,
    properties_side,
    side_properties,
    snapshot_properties,
    text_of,
    touched_show,
    wanted_properties,
)
from .content import (
    Properties,
    new_document,
    object_differences,
    parse_document,
    property_name,
    rewrite,
    ungrouped,
)
from .document import put_document
from .formats import Format
from .listing import (
    check_member_name,
    evidence_given,
    evidence_held,
    evidence_shown,
    find_by_evidence,
    member_resource,
    member_url,
)
from .probes import MemberProbe
from .settings import (
    PropertyCollectionSettings,
    collection_problems,
    collection_settings,
    copy_problem,
)

CREATED_STATUSES = frozenset({200, 201, 204})


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


class PropertyCollectionAdapter(Adapter):
    """What ``vcard_collection`` and ``icalendar_collection`` share; each says its
    ``format``."""

    format: ClassVar[Format]
    part_names = ("property", "properties")
    settings_model = PropertyCollectionSettings
    change_members = (ID, SET, REMOVE, CREATE, DELETE, UPSERT)

    # -- the config ------------------------------------------------------------------

    def config_problems(self, resource: Resource, limits: Limits) -> list[tuple[str, str]]:
        return collection_problems(resource, limits)

    def test_copy_problem(self, copy: Resource, production: Resource) -> str | None:
        return copy_problem(copy, production)

    def agent_fields(self, resource: Resource) -> tuple[str, ...]:
        return collection_settings(resource).fields

    def endpoint_check(
        self,
        wire: Prober,
        copy: Resource,
        production: Resource,
        timeout_s: float,
        keep: Callable[[bytes], Path | None],
    ) -> CheckRun:
        probe = MemberProbe(self, wire, copy, timeout_s, self.format)
        return run_collection_check(probe, production)

    # -- reading and planning ----------------------------------------------------------

    def parse(self, resource: Resource, media_type: str, body: bytes, limits: Limits) -> JsonValue:
        return parse_body(resource, self.format, media_type, body, limits)

    def prepare(
        self,
        wire: Reader,
        resource: Resource,
        request: ChangeRequest,
        limits: Limits,
        deadline: float | None,
    ) -> tuple[Plan, Snapshot]:
        self.members(request)
        create, upsert = values_of(request, CREATE.name), values_of(request, UPSERT.name)
        name = record_id_of(request)
        shapes = [
            create is not None,
            deletes(request),
            upsert is not None,
            bool(set_of(request) or remove_of(request)),
        ]
        if sum(shapes) != 1:
            raise InvalidRequest(
                f"a change to {resource.id} is exactly one of: set/remove with id, create, "
                "delete with id, or upsert",
                resource=resource.id,
            )
        if upsert is not None or create is not None:
            if name is not None:
                raise InvalidRequest(
                    f"a new {self.noun} is named after the UID the gateway mints, and an "
                    "upsert finds its member by identity evidence: neither takes an id",
                    resource=resource.id,
                )
            if upsert is not None:
                return self._upsert(wire, resource, upsert, limits, deadline)
            assert create is not None
            props = wanted_properties(resource, self.format, create, None, "create")
            return self._create(wire, resource, props, None, limits, deadline, None)
        if name is None:
            raise InvalidRequest(
                f"name the {self.noun} of {resource.id} this change acts on (id)",
                resource=resource.id,
            )
        snap = self._read_existing(wire, resource, name, deadline)
        return self.plan(resource, request, snap, limits), snap

    def plan(
        self, resource: Resource, request: ChangeRequest, snapshot: Snapshot, limits: Limits
    ) -> Plan:
        """Planned against one member read (``prepare`` reads what a change needs)."""
        if snapshot.target is None or not snapshot.exists:
            raise InvalidRequest(
                f"no {self.noun} of {resource.id} to plan on", resource=resource.id
            )
        if deletes(request):
            props = snapshot_properties(snapshot, self.format)
            fields = tuple(f for f in collection_settings(resource).fields if f in props)
            before = properties_side(props, document=text_of(snapshot))
            return Plan(fields, before, ABSENT, target=snapshot.target)
        touched, before_props, after_props = plan_properties(
            resource, self.format, text_of(snapshot), set_of(request), remove_of(request), limits
        )
        return Plan(
            touched,
            properties_side(before_props),
            properties_side(after_props),
            target=snapshot.target,
        )

    def _read_existing(
        self, wire: Reader, resource: Resource, name: str, deadline: float | None
    ) -> Snapshot:
        check_member_name(resource, name)
        snap = wire.read(member_resource(resource, name), deadline, absent_ok=True)
        if not snap.exists:
            raise NotFound(
                f"{resource.id} has no {self.noun} {name!r}", resource=resource.id, id=name
            )
        return replace(snap, target=name)

    def _create(
        self,
        wire: Reader,
        resource: Resource,
        props: Properties,
        uid: str | None,
        limits: Limits,
        deadline: float | None,
        looked_up: list[str] | None,
    ) -> tuple[Plan, Snapshot]:
        """``uid``: the one an upsert matched nothing on (the new object carries it, so
        the next upsert finds it); ``looked_up``: the members the upsert found (none),
        ``None`` for a create the agent asked for."""
        fmt = self.format
        missing = [n for n in fmt.required if n not in props]
        if missing:
            raise InvalidRequest(
                f"a new {self.noun} in {resource.id} needs {', '.join(missing)}",
                resource=resource.id,
            )
        minted = str(uuid.uuid4())
        text = new_document(fmt, uid or minted, props, _stamp())
        check_written(resource, fmt, text, list(props), props, limits)
        name = f"{minted}{fmt.suffix}"
        snap = wire.read(member_resource(resource, name), deadline, absent_ok=True)
        if snap.exists:
            raise Conflict(
                f"{resource.id} already has a member {name!r}; a create never overwrites",
                resource=resource.id,
                id=name,
            )
        whole = parse_document(text, fmt).properties(fmt)
        after = properties_side(whole, document=text)
        if looked_up is not None:
            after["preexisting"] = [*looked_up]
        return Plan(tuple(props), ABSENT, after, target=name), replace(snap, target=name)

    def _upsert(
        self,
        wire: Reader,
        resource: Resource,
        values: JsonObject,
        limits: Limits,
        deadline: float | None,
    ) -> tuple[Plan, Snapshot]:
        settings = collection_settings(resource)
        if not settings.identity:
            raise InvalidRequest(
                f"{resource.id} declares no identity evidence, so it takes no upsert",
                resource=resource.id,
            )
        given = {(property_name(k) or k): v for k, v in values.items()}
        uid = given.pop("UID", None) if "UID" not in settings.fields else None
        if uid is not None and not isinstance(uid, str):
            raise InvalidRequest("upsert.UID is a string", resource=resource.id)
        props = wanted_properties(resource, self.format, given, None, "upsert")
        shown = evidence_shown(props)
        if uid is not None:
            shown["UID"] = [uid]
        evidence = evidence_given(resource, shown)
        if not evidence:
            raise InvalidRequest(
                f"an upsert in {resource.id} needs a value for an identity field ("
                + ", ".join(f"{r.field}: {r.evidence}" for r in settings.identity)
                + ")",
                resource=resource.id,
            )
        matches = find_by_evidence(wire, resource, self.format, evidence, deadline)
        if len(matches) > 1:
            candidates: list[JsonValue] = [
                {"id": name, "evidence": dict(matched)} for name, matched in matches
            ]
            raise Ambiguous(
                f"{len(matches)} {self.noun}s of {resource.id} match this identity evidence; "
                "nothing was prepared. Name the one to change by id, or merge the duplicates "
                "first",
                resource=resource.id,
                candidates=candidates,
            )
        if not matches:
            return self._create(wire, resource, props, uid, limits, deadline, [])
        return self._update_match(wire, resource, given, matches[0][0], evidence, limits, deadline)

    def _update_match(
        self,
        wire: Reader,
        resource: Resource,
        given: JsonObject,
        name: str,
        evidence: dict[str, set[str]],
        limits: Limits,
        deadline: float | None,
    ) -> tuple[Plan, Snapshot]:
        """An upsert's update of the one member its listing matched, planned on a read of
        its own: the member may have been edited since the listing read it, and what is
        written is planned on this read, which must still hold the evidence.

        Raises: Conflict (it no longer does: nothing prepared)."""
        snap = self._read_existing(wire, resource, name, deadline)
        held = evidence_held(resource, self.format, text_of(snap), evidence)
        if not held:
            raise Conflict(
                f"{name!r} of {resource.id} matched this identity evidence when listed, but "
                "no longer holds it (edited since); nothing was prepared",
                resource=resource.id,
                id=name,
            )
        # The evidence it matched on stays as the member has it (the same identity,
        # perhaps spelled otherwise, perhaps in a group); the rest is set.
        rest = {k: v for k, v in given.items() if ungrouped(k) not in held}
        return self.plan(resource, ChangeRequest(resource.id, set=rest), snap, limits), snap

    def read_change(
        self, wire: Reader, resource: Resource, change: Change, deadline: float | None
    ) -> Snapshot:
        assert change.target is not None, "a member's change always names its member"
        snap = wire.read(member_resource(resource, change.target), deadline, absent_ok=True)
        snap = replace(snap, target=change.target)
        known = member_sides.preexisting(change)
        if not snap.exists and change.state is ChangeState.PENDING and known is not None:
            # An upsert that became a create, not sent yet: a member matching it that
            # appeared since would make the create a duplicate, so it shows neither.
            evidence = evidence_given(resource, evidence_shown(side_properties(change.after)))
            found = find_by_evidence(wire, resource, self.format, evidence, deadline)
            new = [n for n, _ in found if n not in known]
            if new:
                return replace(snap, content={"located": JsonNumber(str(len(new)))})
        return snap

    def payload_size(self, change: Change) -> int:
        return sum(
            len(dumps(side).encode())
            for side in (change.before, change.after)
            if side is not ABSENT
        )

    # -- comparing -----------------------------------------------------------------------

    def current(self, change: Change, snapshot: Snapshot) -> SideValue:
        if not snapshot.exists:
            return ABSENT
        now = snapshot_properties(snapshot, self.format)
        if operation_of(change) == "update":
            return properties_side({n: now[n] for n in change.fields if n in now})
        return properties_side(now)

    def shows(self, change: Change, snapshot: Snapshot, side: Side) -> bool:
        value = change.before if side is Side.BEFORE else change.after
        if value is ABSENT:
            return not snapshot.exists and snapshot.content is None
        if not snapshot.exists:
            return False
        if operation_of(change) == "update":
            now = snapshot_properties(snapshot, self.format)
            return touched_show(change.fields, side_properties(value), now)
        # The whole object: a delete deletes nothing that changed, and an object that
        # holds a create's properties and more (someone else's: another property, an
        # alarm) is never the create's.
        return not self._whole_differs(change, snapshot)

    def differing(self, change: Change, snapshot: Snapshot) -> tuple[str, ...]:
        if not snapshot.exists:
            return ()
        if operation_of(change) == "update":
            now = snapshot_properties(snapshot, self.format)
            before, after = side_properties(change.before), side_properties(change.after)
            return tuple(
                n
                for n in change.fields
                if not touched_show([n], before, now) and not touched_show([n], after, now)
            )
        return self._whole_differs(change, snapshot)

    def _whole_differs(self, change: Change, snapshot: Snapshot) -> tuple[str, ...]:
        """What the member differs in from the object a create sent or a delete kept."""
        kept = document(member_sides.side_document(change), self.format)
        return object_differences(kept, document(text_of(snapshot), self.format), self.format)

    def undo_guard_holds(self, change: Change, snapshot: Snapshot) -> bool:
        return member_undo_guard_holds(change, snapshot, self.shows)

    def undo_needs(self, change: Change) -> str | None:
        return member_undo_needs(change)

    # -- writing -------------------------------------------------------------------------

    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        assert change.target is not None, "a member's change always names its member"
        url = member_url(resource, change.target)
        operation = operation_of(change)
        if operation == "update":
            goal = side_properties(change.after if target is Side.AFTER else change.before)
            text = text_of(snapshot)
            body = rewrite(
                document(text, self.format),
                self.format,
                {n: goal.get(n, ()) for n in change.fields},
            )
            return put_document(url, snapshot.media_type, snapshot.etag.header, body, text)
        if (operation == "create") == (target is Side.AFTER):
            headers = {"Content-Type": self.format.media_type, "If-None-Match": "*"}
            body_bytes = member_sides.side_document(change).encode("utf-8")
            return ConditionalWrite("PUT", url, headers, body_bytes, None)
        # Deleting: what a create made (the tag its read-back gave), or what a delete
        # planned on (the tag its pre-image was read with).
        made = change.applied_etag if operation == "create" else change.prepared_etag
        assert made is not None, "an applied create always has its read-back's tag"
        return ConditionalWrite("DELETE", url, {"If-Match": made}, b"", made)

    def classify(self, write: ConditionalWrite, response: RemoteResponse) -> Verdict:
        if response.status in REFUSAL_STATUSES:
            return Verdict.REFUSED
        if response.status in CREATED_STATUSES:
            return Verdict.READ_BACK
        return Verdict.UNCERTAIN

    # -- other jobs ----------------------------------------------------------------------

    def overlaps(self, held: Sequence[str], wanted: Sequence[str]) -> bool:
        # Reached only for the same member: it appears or disappears whole, so any two
        # changes on it overlap.
        return True

    # -- what every surface shows --------------------------------------------------------

    def event_diff(self, change: Change, toward: Side) -> JsonObject:
        return member_sides.event_diff(change, toward)

    def receipt_values(self, change: Change) -> JsonObject:
        return member_sides.receipt_values(self.format, change)

    def preview_values(self, view: ChangeView, change: Change | None) -> JsonObject:
        return member_sides.preview_values(self.format, view, change)

    def reversibility(self, change: Change) -> str:
        return member_sides.reversibility(self.noun, change)


__all__ = ["PropertyCollectionAdapter"]
