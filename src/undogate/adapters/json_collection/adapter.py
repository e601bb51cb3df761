"""``json_collection`` (docs/collections.md): records at ``{collection}/{id}`` that come and go.

A change acts on one record, its ``target`` (the record's id; unknown until the server
names it for a ``POST`` create). Its two sides are ``{"record": {...}}`` objects, or
``ABSENT`` where the record does not exist, so the operation is read off the sides:

- an update (both sides): the touched allow-listed fields, written as ``json_record``
  writes them (``records.dialects``: the resource's ``write`` mode and ``version``);
- a create (before absent): the fields the record is created with, and the members the
  server adds that are never compared (``server_fields``, ``id_field``): a record
  "shows" a create only when it holds exactly those fields, so a record someone else
  made with the same values and more is never taken for the job's. A ``POST`` create's
  after side also holds ``preexisting``: the ids of the records that already matched its
  identity evidence, so a lost answer can be resolved by finding the one new record; so
  does an upsert that became a ``PUT`` create (none matched), so that a record matching
  it that appears before the create is sent refuses it instead of making a duplicate;
- a delete (after absent): the whole record as it was (its pre-image), without the
  ``server_fields`` the server rewrites on every write.

Undoing a create deletes exactly that record, only while it carries the version its
read-back gave (in ``If-Match``, or as ``?{delete_query}=`` where the version lives in
the body); undoing a delete re-creates the same id from the pre-image with
``If-None-Match: *``. Both are offered only once verified on a test copy and accepted
(``undo_needs``). Any two changes on one record overlap.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from ...errors import Ambiguous, Conflict, InvalidRequest, NotFound
from ...jobs import ABSENT, Change, ChangeRequest, ChangeState, ChangeView, SideValue
from ...jsonvalue import (
    JsonError,
    JsonNumber,
    JsonObject,
    JsonValue,
    canonical_size,
    dumps,
    loads,
    resolve_record,
)
from ...net import RemoteResponse
from ...net.etag import ETag
from ...resources import Limits, Resource
from ..base import (
    Adapter,
    ConditionalWrite,
    Guard,
    Plan,
    Prober,
    Reader,
    Side,
    Snapshot,
    Verdict,
    absent_snapshot,
)
from ..checks.collection import run_collection_check
from ..checks.steps import CheckRun
from ..records import dialects
from ..records.fields import (
    JSON_MEDIA_TYPE,
    check_allowed,
    differing_fields,
    envelope,
    fields_show,
    parse_record,
    plan_fields,
)
from ..records.members import REMOVE, SET, remove_of, set_of
from ..records.settings import copy_shape_problem
from ..registry import register
from . import sides
from .lookup import (
    RECORD_ID_RE,
    check_record_id,
    evidence_of,
    find_by_evidence,
    record_resource,
    record_url,
)
from .members import CREATE, DELETE, ID, SHAPES, UPSERT, deletes, record_id_of, values_of
from .probes import RecordProbe
from .settings import CollectionSettings, collection_problems, collection_settings
from .sides import (
    current_record,
    member_undo_guard_holds,
    member_undo_needs,
    operation_of,
    preexisting,
    server_fields,
    side_record,
    without,
)


@register
class JsonCollectionAdapter(Adapter):
    kind = "json_collection"
    noun = "record"
    accept = JSON_MEDIA_TYPE
    summary = (
        "a collection of JSON records at {collection}/{id}; a change updates a record's "
        "allow-listed fields, creates a record, deletes one, or upserts one by identity "
        "evidence"
    )
    agent_guide = (
        "exactly one of: `id` + `set`/`remove` (update that record), `create` (field -> "
        "value of a new record; `id` optional where the collection lets you choose it), "
        "`id` + `delete: true`, or `upsert` (field -> value: updates the one record whose "
        "identity evidence matches, creates one if none does; if several match, nothing "
        "is prepared and you get `ambiguous` with the candidates' ids). A person is told "
        "before confirming whether a create or delete can be undone."
    )
    settings_model = CollectionSettings
    change_members = (ID, SET, REMOVE, CREATE, DELETE, UPSERT)
    change_shapes = SHAPES

    # -- the config ------------------------------------------------------------------

    def config_problems(self, resource: Resource, limits: Limits) -> list[tuple[str, str]]:
        return collection_problems(resource, limits)

    def test_copy_problem(self, copy: Resource, production: Resource) -> str | None:
        return copy_shape_problem(copy, production)

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
        return run_collection_check(RecordProbe(self, wire, copy, timeout_s), production)

    # -- reading and planning ----------------------------------------------------------

    def parse(self, resource: Resource, media_type: str, body: bytes, limits: Limits) -> JsonValue:
        return parse_record(resource, media_type, body, limits)

    def guard(self, resource: Resource) -> Guard:
        return dialects.record_guard(resource)

    def body_version(self, resource: Resource, body: bytes) -> ETag:
        return dialects.body_version(resource, body)

    def prepare(
        self,
        wire: Reader,
        resource: Resource,
        request: ChangeRequest,
        limits: Limits,
        deadline: float | None,
    ) -> tuple[Plan, Snapshot]:
        if "text" in request.members:
            raise InvalidRequest(
                f"{resource.id} is a collection of JSON records: use set/remove, create, "
                "delete or upsert, not text",
                resource=resource.id,
            )
        self.members(request)
        create, upsert, record_id = (
            values_of(request, CREATE.name),
            values_of(request, UPSERT.name),
            record_id_of(request),
        )
        shapes = [
            create is not None,
            deletes(request),
            upsert is not None,
            bool(set_of(request) or remove_of(request)),
        ]
        if sum(shapes) != 1:
            raise InvalidRequest(
                f"a change to the collection {resource.id} is exactly one of: set/remove "
                "with id, create, delete with id, or upsert",
                resource=resource.id,
            )
        if upsert is not None:
            if record_id is not None:
                raise InvalidRequest(
                    "an upsert finds its record by identity evidence, never by id",
                    resource=resource.id,
                )
            return self._upsert(wire, resource, upsert, limits, deadline)
        if create is not None:
            return self._create(wire, resource, create, record_id, limits, deadline, None)
        if record_id is None:
            raise InvalidRequest(
                f"name the record of {resource.id} this change acts on (id)", resource=resource.id
            )
        check_record_id(resource, record_id)
        snap = self._read_existing(wire, resource, record_id, deadline)
        if deletes(request):
            return self._delete_plan(resource, snap, record_id, limits), snap
        return self._update_plan(resource, snap, request, limits), snap

    def plan(
        self, resource: Resource, request: ChangeRequest, snapshot: Snapshot, limits: Limits
    ) -> Plan:
        """Planned against one record read (``prepare`` reads what a change needs)."""
        if snapshot.target is None or not snapshot.exists:
            raise InvalidRequest(f"no record of {resource.id} to plan on", resource=resource.id)
        if deletes(request):
            return self._delete_plan(resource, snapshot, snapshot.target, limits)
        return self._update_plan(resource, snapshot, request, limits)

    def _read_existing(
        self, wire: Reader, resource: Resource, record_id: str, deadline: float | None
    ) -> Snapshot:
        snap = wire.read(record_resource(resource, record_id), deadline, absent_ok=True)
        if not snap.exists:
            raise NotFound(
                f"{resource.id} has no record {record_id!r}", resource=resource.id, id=record_id
            )
        return replace(snap, target=record_id)

    def _update_plan(
        self, resource: Resource, snap: Snapshot, request: ChangeRequest, limits: Limits
    ) -> Plan:
        touched, before, after = plan_fields(
            resource, current_record(snap), set_of(request), remove_of(request), limits
        )
        dialects.check_expressible(resource, touched, before, after)
        return Plan(touched, {"record": before}, {"record": after}, target=snap.target)

    def _delete_plan(
        self, resource: Resource, snap: Snapshot, record_id: str, limits: Limits
    ) -> Plan:
        settings = collection_settings(resource)
        kept = settings.rewritten_fields()
        pre_image = without(current_record(snap), kept)
        fields = tuple(f for f in settings.fields if f in pre_image)
        before: JsonObject = {"record": pre_image, "server_fields": [*kept]}
        return Plan(fields, before, ABSENT, target=record_id)

    def _create(
        self,
        wire: Reader,
        resource: Resource,
        values: JsonObject,
        record_id: str | None,
        limits: Limits,
        deadline: float | None,
        looked_up: list[str] | None,
    ) -> tuple[Plan, Snapshot]:
        """``looked_up``: the records an upsert found matching (none, or it would not be a
        create); ``None`` for a create the agent asked for."""
        if not values:
            raise InvalidRequest(f"a create in {resource.id} sets no field", resource=resource.id)
        check_allowed(resource, list(values))
        if canonical_size(values) > limits.max_document_bytes:
            raise InvalidRequest(
                f"the new record would be over the {limits.max_document_bytes}-byte limit",
                resource=resource.id,
            )
        fields = tuple(values)
        settings = collection_settings(resource)
        after: JsonObject = {
            "record": values,
            "server_fields": [*settings.rewritten_fields()],
            "id_field": settings.id_field,
        }
        if settings.create == "post":
            if record_id is not None:
                raise InvalidRequest(
                    f"{resource.id} creates with POST: the server chooses the id",
                    resource=resource.id,
                )
            if not evidence_of(resource, values):
                raise InvalidRequest(
                    f"a create in {resource.id} needs a value for an identity field "
                    f"({', '.join(r.field for r in settings.identity)}): a lost answer to "
                    "its POST is resolved by that evidence",
                    resource=resource.id,
                )
            earlier = find_by_evidence(wire, resource, values, deadline)
            after["preexisting"] = [rid for rid, _ in earlier]
            return Plan(fields, ABSENT, after), absent_snapshot()
        if record_id is None:
            record_id = str(uuid.uuid4())
        check_record_id(resource, record_id)
        snap = wire.read(record_resource(resource, record_id), deadline, absent_ok=True)
        if snap.exists:
            raise Conflict(
                f"{resource.id} already has a record {record_id!r}; a create never overwrites",
                resource=resource.id,
                id=record_id,
            )
        if looked_up is not None:
            after["preexisting"] = [*looked_up]
        plan = Plan(fields, ABSENT, after, target=record_id)
        return plan, replace(snap, target=record_id)

    def _upsert(
        self,
        wire: Reader,
        resource: Resource,
        values: JsonObject,
        limits: Limits,
        deadline: float | None,
    ) -> tuple[Plan, Snapshot]:
        identity = collection_settings(resource).identity
        if not identity:
            raise InvalidRequest(
                f"{resource.id} declares no identity evidence, so it takes no upsert",
                resource=resource.id,
            )
        check_allowed(resource, list(values))
        if not evidence_of(resource, values):
            raise InvalidRequest(
                f"an upsert in {resource.id} needs a value for an identity field ("
                + ", ".join(f"{r.field}: {r.evidence}" for r in identity)
                + ")",
                resource=resource.id,
            )
        matches = find_by_evidence(wire, resource, values, deadline)
        if len(matches) > 1:
            # Each candidate's id, and which of the agent's own evidence it matched: a
            # record's other values (another identity field's) are not the agent's to see.
            sent = evidence_of(resource, values)
            candidates: list[JsonValue] = []
            for rid, record in matches:
                theirs = evidence_of(resource, record)
                matched: JsonObject = {f: v for f, v in sent.items() if theirs.get(f) == v}
                candidates.append({"id": rid, "evidence": matched})
            raise Ambiguous(
                f"{len(matches)} records of {resource.id} match this identity evidence; "
                "nothing was prepared. Name the record by id, or fix the duplicates first",
                resource=resource.id,
                candidates=candidates,
            )
        if not matches:
            return self._create(wire, resource, values, None, limits, deadline, [])
        record_id = matches[0][0]
        snap = self._read_existing(wire, resource, record_id, deadline)
        # The listing names a record by its id field; what is written is the record at
        # that id's URL, which must hold the evidence too (a listing whose ids do not
        # match their URLs, or a record edited between the listing and this read).
        theirs = evidence_of(resource, current_record(snap))
        if not any(theirs.get(f) == v for f, v in evidence_of(resource, values).items()):
            raise Conflict(
                f"the listing of {resource.id} names record {record_id!r} for this identity "
                "evidence, but the record at that id does not hold it; nothing was prepared",
                resource=resource.id,
                id=record_id,
            )
        request = ChangeRequest(resource.id, set=values)
        return self._update_plan(resource, snap, request, limits), snap

    def read_change(
        self, wire: Reader, resource: Resource, change: Change, deadline: float | None
    ) -> Snapshot:
        if change.target is not None:
            snap = wire.read(record_resource(resource, change.target), deadline, absent_ok=True)
            snap = replace(snap, target=change.target)
            if not snap.exists and change.state is ChangeState.PENDING:
                # An upsert that became a create, not sent yet: a record matching it that
                # appeared since would make the create a duplicate, so it shows neither.
                new = self._appeared(wire, resource, change, deadline)
                if new:
                    return replace(snap, content={"located": JsonNumber(str(len(new)))})
            return snap
        # A POST create whose record the server has not named to us: the one record
        # matching its evidence that did not match before it.
        new = self._appeared(wire, resource, change, deadline) or []
        if len(new) == 1:
            snap = wire.read(record_resource(resource, new[0]), deadline, absent_ok=True)
            return replace(snap, target=new[0])
        if not new and change.state is not ChangeState.UNCERTAIN:
            return absent_snapshot()
        # Zero after a lost answer, or several: which record is ours cannot be known.
        return absent_snapshot({"located": JsonNumber(str(len(new)))})

    def _appeared(
        self, wire: Reader, resource: Resource, change: Change, deadline: float | None
    ) -> list[str] | None:
        """The records matching a looked-up create's evidence that did not when it was
        prepared (None: the create was not looked up)."""
        known = preexisting(change)
        if known is None:
            return None
        found = find_by_evidence(wire, resource, side_record(change.after), deadline)
        return [rid for rid, _ in found if rid not in known]

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
        current = current_record(snapshot)
        if operation_of(change) == "update":
            return {"record": {f: current[f] for f in change.fields if f in current}}
        return {"record": without(current, server_fields(change))}

    def shows(self, change: Change, snapshot: Snapshot, side: Side) -> bool:
        value = change.before if side is Side.BEFORE else change.after
        if value is ABSENT:
            return not snapshot.exists and snapshot.content is None
        if not snapshot.exists:
            return False
        current = current_record(snapshot)
        if operation_of(change) != "update":
            # The whole record: a delete deletes nothing that changed, and a record that
            # holds a create's values and more (someone else's) is never the create's.
            return without(current, server_fields(change)) == side_record(value)
        return fields_show(change.fields, side_record(value), current)

    def differing(self, change: Change, snapshot: Snapshot) -> tuple[str, ...]:
        if not snapshot.exists:
            return ()
        current = current_record(snapshot)
        if operation_of(change) == "update":
            before, after = side_record(change.before), side_record(change.after)
            return tuple(
                f
                for f in change.fields
                if not fields_show([f], before, current) and not fields_show([f], after, current)
            )
        whole = side_record(change.after if change.before is ABSENT else change.before)
        now = without(current, server_fields(change))
        return tuple(differing_fields(sorted({*whole, *now}), whole, now))

    def undo_guard_holds(self, change: Change, snapshot: Snapshot) -> bool:
        return member_undo_guard_holds(change, snapshot, self.shows)

    def undo_needs(self, change: Change) -> str | None:
        return member_undo_needs(change)

    # -- writing -------------------------------------------------------------------------

    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        operation = operation_of(change)
        url = record_url(resource, change.target) if change.target else resource.url
        if operation == "update":
            source = side_record(change.before if target is Side.AFTER else change.after)
            goal = side_record(change.after if target is Side.AFTER else change.before)
            return dialects.update_write(resource, url, change.fields, source, goal, snapshot)
        creating = (operation == "create") == (target is Side.AFTER)
        if creating:
            record = side_record(change.after if operation == "create" else change.before)
            pointer = collection_settings(resource).record_pointer
            body = dumps(envelope(pointer, record), sort_keys=False).encode()
            if operation == "create" and change.target is None:
                # create: post. Nothing can make a POST conditional: a lost answer is
                # uncertain, and resolved by the create's evidence.
                headers = {"Content-Type": JSON_MEDIA_TYPE}
                return ConditionalWrite("POST", resource.url, headers, body, None)
            headers = {"Content-Type": JSON_MEDIA_TYPE, "If-None-Match": "*"}
            return ConditionalWrite("PUT", url, headers, body, None)
        # Deleting: what a create made (the tag its read-back gave), or what a delete
        # planned on (the tag its pre-image was read with).
        made = change.applied_etag if operation == "create" else change.prepared_etag
        assert made is not None  # an applied create always has its read-back's tag
        return dialects.delete_write(resource, url, made)

    def read_back_problem(
        self,
        change: Change,
        write: ConditionalWrite,
        response: RemoteResponse,
        snapshot: Snapshot,
        target: Side,
    ) -> str | None:
        known = preexisting(change)
        if write.method == "POST" and known is not None and change.target in known:
            # A store that deduplicates creates answers with the record it holds: one
            # that matched before this create was sent is someone else's, never the job's
            # (its undo would delete it).
            return (
                f"the server answered with record {change.target!r}, which existed before "
                "this create: it is not the record this job made"
            )
        return super().read_back_problem(change, write, response, snapshot, target)

    def classify(self, write: ConditionalWrite, response: RemoteResponse) -> Verdict:
        return dialects.classify_record_write(write, response)

    def written_target(
        self, resource: Resource, change: Change, write: ConditionalWrite, response: RemoteResponse
    ) -> str | None:
        if write.method != "POST":
            return change.target
        location = response.headers.get("location")
        if location:
            collection = urlsplit(resource.url).path.rstrip("/") + "/"
            path = urlsplit(urljoin(resource.url, location)).path
            if path.startswith(collection):
                rid = unquote(path[len(collection) :])
                if RECORD_ID_RE.fullmatch(rid):
                    return rid
        settings = collection_settings(resource)
        try:
            record = resolve_record(loads(response.body), settings.record_pointer)
        except JsonError:
            return None
        given = record.get(settings.id_field)
        return given if isinstance(given, str) and RECORD_ID_RE.fullmatch(given) else None

    # -- other jobs ----------------------------------------------------------------------

    def overlaps(self, held: Sequence[str], wanted: Sequence[str]) -> bool:
        # Reached only for the same record (or one a create has not named yet): a record
        # appears or disappears whole, so any two changes on it overlap.
        return True

    # -- what every surface shows --------------------------------------------------------

    def event_diff(self, change: Change, toward: Side) -> JsonObject:
        return sides.event_diff(change, toward)

    def receipt_values(self, change: Change) -> JsonObject:
        return sides.receipt_values(change)

    def preview_values(self, view: ChangeView, change: Change | None) -> JsonObject:
        return sides.preview_values(view, change)

    def reversibility(self, change: Change) -> str:
        return sides.reversibility(change)
