"""``json_record``: allow-listed top-level fields, changed in the dialect its endpoint
speaks (``records.dialects``: JSON Patch, JSON Merge Patch or a whole-record PUT, the
version in ``If-Match`` or in the body).

A side of a record change is the object of the touched fields present on that side (a
touched field missing from it is absent there). Two changes overlap when they touch a
common field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from ...errors import InvalidRequest
from ...jobs import ABSENT, Change, ChangeRequest, ChangeView, SideValue
from ...jsonvalue import JsonObject, JsonValue, dumps
from ...net import RemoteResponse
from ...net.etag import ETag
from ...resources import Limits, Resource
from ..base import ConditionalWrite, Guard, Plan, Side, Snapshot, Verdict
from ..checks.steps import Evidence
from ..checks.whole_resource import WholeResourceAdapter
from ..records import dialects
from ..records.fields import (
    differing_fields,
    field_problems,
    fields_diff,
    fields_show,
    parse_record,
    plan_fields,
)
from ..records.members import REMOVE, SET, remove_of, set_of
from ..records.settings import RecordSettings, copy_shape_problem, record_settings
from ..registry import register
from ..shapes import ChangeMember, ChangeShape
from ..views import field_rows


@register
class JsonRecordAdapter(WholeResourceAdapter):
    kind = "json_record"
    noun = "record"
    accept = "application/json"
    summary = (
        "one JSON record at one URL; a change sets or removes allow-listed top-level fields "
        "(JSON Patch, JSON Merge Patch or a whole-record PUT, conditional on the version read)"
    )
    agent_guide = (
        "`set` (field -> new JSON value) and/or `remove` (field names); only the listed "
        "top-level `fields`."
    )
    settings_model = RecordSettings
    change_members: ClassVar[tuple[ChangeMember, ...]] = (SET, REMOVE)
    change_shapes = (
        ChangeShape(
            ("set",),
            "set the allow-listed top-level fields to these JSON values",
            optional=("remove",),
            example={"set": {"status": "customer"}},
        ),
        ChangeShape(
            ("remove",),
            "remove these allow-listed top-level fields",
            optional=("set",),
            example={"remove": ["owner"]},
        ),
    )

    # -- the config ------------------------------------------------------------------

    def config_problems(self, resource: Resource, limits: Limits) -> list[tuple[str, str]]:
        return field_problems(resource, limits) + dialects.dialect_problems(resource, deletes=False)

    def test_copy_problem(self, copy: Resource, production: Resource) -> str | None:
        return copy_shape_problem(copy, production)

    def agent_fields(self, resource: Resource) -> tuple[str, ...]:
        return record_settings(resource).fields

    # -- reading and planning ----------------------------------------------------------

    def parse(self, resource: Resource, media_type: str, body: bytes, limits: Limits) -> JsonValue:
        return parse_record(resource, media_type, body, limits)

    def guard(self, resource: Resource) -> Guard:
        return dialects.record_guard(resource)

    def body_version(self, resource: Resource, body: bytes) -> ETag:
        return dialects.body_version(resource, body)

    def plan(
        self, resource: Resource, request: ChangeRequest, snapshot: Snapshot, limits: Limits
    ) -> Plan:
        members = request.members
        if "text" in members:
            raise InvalidRequest(
                f"{resource.id} is a JSON record: use set/remove, not text",
                resource=resource.id,
            )
        collection = ("create", "delete", "upsert")
        if members.get("id") is not None or any(members.get(name) for name in collection):
            raise InvalidRequest(
                f"{resource.id} is one record: create, delete, upsert and id belong to a "
                "collection",
                resource=resource.id,
            )
        self.members(request)
        touched, before, after = plan_fields(
            resource, _record(snapshot), set_of(request), remove_of(request), limits
        )
        dialects.check_expressible(resource, touched, before, after)
        return Plan(fields=touched, before=before, after=after)

    def payload_size(self, change: Change) -> int:
        return len(dumps(_values(change.before)).encode()) + len(
            dumps(_values(change.after)).encode()
        )

    # -- comparing -----------------------------------------------------------------------

    def current(self, change: Change, snapshot: Snapshot) -> SideValue:
        current = _record(snapshot)
        return {f: current[f] for f in change.fields if f in current}

    def shows(self, change: Change, snapshot: Snapshot, side: Side) -> bool:
        return fields_show(change.fields, _values(_side(change, side)), _record(snapshot))

    def undone(self, resource: Resource, change: Change, snapshot: Snapshot) -> Snapshot | None:
        settings = record_settings(resource)
        if settings.write == "put" or settings.version is not None:
            # The next write would carry the record's bytes or its version in the body,
            # which only this undo's read-back will have: a preview could not show that
            # write exactly, so the plan blocks it rather than show another.
            return None
        record = dict(_record(snapshot))
        before = _values(change.before)
        for name in change.fields:
            if name in before:
                record[name] = before[name]
            else:
                record.pop(name, None)
        return replace(snapshot, content=record)

    # -- writing -------------------------------------------------------------------------

    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        source = _values(_side(change, Side.BEFORE if target is Side.AFTER else Side.AFTER))
        goal = _values(_side(change, target))
        return dialects.update_write(resource, resource.url, change.fields, source, goal, snapshot)

    def classify(self, write: ConditionalWrite, response: RemoteResponse) -> Verdict:
        return dialects.classify_record_write(write, response)

    # -- other jobs ----------------------------------------------------------------------

    def overlaps(self, held: Sequence[str], wanted: Sequence[str]) -> bool:
        return bool(set(held) & set(wanted))

    # -- what every surface shows --------------------------------------------------------

    def event_diff(self, change: Change, toward: Side) -> JsonObject:
        """Field by field, each side's value or ``{"absent": true}`` (toward the before
        side, an undo, the sides swap)."""
        old = _values(_side(change, Side.BEFORE if toward is Side.AFTER else Side.AFTER))
        return {"fields": fields_diff(change.fields, old, _values(_side(change, toward)))}

    def receipt_values(self, change: Change) -> JsonObject:
        before, after = _shown(change.before), _shown(change.after)
        return {"before": before, "after": after, "rows": field_rows(change.fields, before, after)}

    def preview_values(self, view: ChangeView, change: Change | None) -> JsonObject:
        current = _shown(view.current)
        planned = _shown(view.planned) if view.planned is not None else None
        fields: Sequence[str] = (
            change.fields if change else sorted(set(current or {}) | set(planned or {}))
        )
        return {
            "current": current,
            "planned": planned,
            "rows": field_rows(
                list(fields),
                current,
                planned if planned is not None else current,
                ("current", "planned"),
            ),
        }

    def reversibility(self, change: Change) -> str:
        return (
            f"Reversible: undo writes back only {', '.join(change.fields)}, only while they "
            "still hold the values this job wrote; other fields are never changed."
        )

    # -- the endpoint check on a test copy (docs/remote-contract.md) ---------------------
    # The check writes a fresh marker into the first allow-listed field, and puts back
    # only that field; the copy counts as restored when every allow-listed field is.

    def marker_request(self, copy: Resource, start: Snapshot, marker: str) -> ChangeRequest:
        return ChangeRequest(copy.id, set={record_settings(copy).fields[0]: marker})

    def shows_marker(
        self, copy: Resource, start: Snapshot, now: Snapshot, markers: Sequence[str]
    ) -> bool:
        value = _record(now).get(record_settings(copy).fields[0])
        return isinstance(value, str) and value in markers

    def restored(self, copy: Resource, start: Snapshot, now: Snapshot) -> bool:
        return not _differing_fields(copy, start, now)

    def restore_request(self, copy: Resource, start: Snapshot) -> ChangeRequest:
        """The gateway's own undo: ``test`` the current value, then put the start value
        back (or remove a field that did not exist)."""
        touched, fields = record_settings(copy).fields[0], _record(start)
        if touched in fields:
            return ChangeRequest(copy.id, set={touched: fields[touched]})
        return ChangeRequest(copy.id, remove=(touched,))

    def create_attempt(
        self, copy: Resource, start: Snapshot, url: str, tag: ETag, marker: str
    ) -> ConditionalWrite:
        return dialects.create_attempt(copy, url, tag, marker)

    def restore_evidence(
        self, copy: Resource, start: Snapshot, back: Snapshot, ok: bool
    ) -> tuple[Evidence, str]:
        before, after = _record(start), _record(back)
        outside = set(before) ^ set(after) | {
            k for k in set(before) & set(after) if before[k] != after[k]
        }
        allowed = record_settings(copy).fields
        others = len(outside - set(allowed))
        evidence: Evidence = {"fields_checked": len(allowed), "other_fields_changed": others}
        summary = (
            "every allow-listed field is back to its start value"
            if ok
            else "an allow-listed field differs from the start"
        )
        if ok and others:
            summary += f" ({others} field(s) outside the allowlist changed: server-kept)"
        return evidence, summary

    def restore_by_hand(
        self,
        copy: Resource,
        start: Snapshot,
        now: Snapshot | None,
        keep: Callable[[bytes], Path | None],
    ) -> str:
        fields = _record(start)
        what = [
            f"set {f!r} to {dumps(fields[f])}" if f in fields else f"remove {f!r}"
            for f in _differing_fields(copy, start, now)
        ]
        pointer = record_settings(copy).record_pointer
        where = f" (the fields inside {pointer})" if pointer else ""
        return (
            f"restore the test copy by hand: at {copy.url}{where}, "
            + "; ".join(what or ["check every allow-listed field"])
            + f" (its version at the start was {start.etag.header})"
        )


def _record(snapshot: Snapshot) -> JsonObject:
    return snapshot.content if isinstance(snapshot.content, dict) else {}


def _side(change: Change, side: Side) -> SideValue:
    return change.before if side is Side.BEFORE else change.after


def _values(side: SideValue) -> JsonObject:
    """The present touched fields of a side (a record that does not exist has none)."""
    return {} if side is ABSENT else side


def _shown(side: SideValue) -> JsonObject | None:
    """A side as the receipts show it (``null`` where the record does not exist)."""
    return None if side is ABSENT else side


def _differing_fields(copy: Resource, start: Snapshot, now: Snapshot | None) -> list[str]:
    """The allow-listed fields not as at the start (all of them when unknown)."""
    fields = record_settings(copy).fields
    return differing_fields(fields, _record(start), _record(now) if now else None)
