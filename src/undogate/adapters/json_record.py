"""``json_record``: allow-listed top-level fields, changed by RFC 6902 PATCH.

A side of a record change is the object of the touched fields present on that side (a
touched field missing from it is absent there). Two changes overlap when they touch a
common field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import InvalidRequest, RemoteContractBreach
from ..etag import ETag
from ..jobs import ABSENT, Change, ChangeRequest, ChangeView, SideValue
from ..jsonvalue import (
    JsonError,
    JsonObject,
    JsonValue,
    canonical_size,
    dumps,
    escape_token,
    loads_object,
    resolve_record,
)
from ..resources import Limits, Resource
from .base import (
    Adapter,
    ConditionalWrite,
    Evidence,
    Plan,
    ResourceKind,
    Side,
    Snapshot,
    media_type_is,
    register,
)
from .views import field_rows

PATCH_MEDIA_TYPE = "application/json-patch+json"
JSON_MEDIA_TYPES = frozenset({"application/json"})
_FIELD_RE = re.compile(r"^[^\x00-\x1f]{1,128}$")


@register
class JsonRecordAdapter(Adapter):
    kind = ResourceKind.JSON_RECORD
    noun = "record"
    accept = "application/json"

    # -- the config ------------------------------------------------------------------

    def config_problems(self, resource: Resource, limits: Limits) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        if not resource.fields:
            problems.append(("fields", "a json_record needs at least one field"))
        if len(resource.fields) > limits.max_fields_per_resource:
            problems.append(("fields", f"at most {limits.max_fields_per_resource} fields"))
        if len(set(resource.fields)) != len(resource.fields):
            problems.append(("fields", "duplicate field names"))
        for j, name in enumerate(resource.fields):
            if not _FIELD_RE.match(name):
                problems.append((f"fields[{j}]", "not a valid top-level field name"))
        if resource.record_pointer and not resource.record_pointer.startswith("/"):
            problems.append(("record_pointer", "must be empty or a JSON Pointer starting with '/'"))
        return problems

    # -- reading and planning ----------------------------------------------------------

    def parse(self, resource: Resource, media_type: str, body: bytes, limits: Limits) -> JsonValue:
        if not media_type_is(media_type, JSON_MEDIA_TYPES):
            raise RemoteContractBreach(
                f"{resource.id} answered with media type {media_type[:60]!r}, not application/json",
                resource=resource.id,
            )
        try:
            document = loads_object(body)
            # The canonical form is never longer than the text it was parsed from, so
            # only a body over the limit needs measuring.
            limit = limits.max_document_bytes
            if len(body) > limit and canonical_size(document) > limit:
                raise RemoteContractBreach(
                    f"{resource.id} is over the {limits.max_document_bytes}-byte limit",
                    resource=resource.id,
                )
            return resolve_record(document, resource.record_pointer)
        except JsonError as exc:
            raise RemoteContractBreach(
                f"{resource.id} sent unacceptable JSON ({exc.reason}): {exc}",
                resource=resource.id,
                reason=exc.reason,
            ) from None

    def plan(
        self, resource: Resource, request: ChangeRequest, snapshot: Snapshot, limits: Limits
    ) -> Plan:
        if request.text is not None:
            raise InvalidRequest(
                f"{resource.id} is a JSON record: use set/remove, not text",
                resource=resource.id,
            )
        current = _record(snapshot)
        to_set = request.set or {}
        to_remove = tuple(dict.fromkeys(request.remove))  # a name removed twice is one removal
        if not to_set and not to_remove:
            raise InvalidRequest(
                f"the change to {resource.id} sets or removes nothing", resource=resource.id
            )
        allowed = set(resource.fields)
        for name in [*to_set, *to_remove]:
            if name.startswith("/") or ("/" in name and name not in allowed):
                raise InvalidRequest(
                    f"{name!r} is a path; only top-level fields can change",
                    resource=resource.id,
                    field=name,
                )
            if name not in allowed:
                raise InvalidRequest(
                    f"field {name!r} is not allow-listed for {resource.id}",
                    resource=resource.id,
                    field=name,
                    allowed=sorted(allowed),
                )
        both = set(to_set) & set(to_remove)
        if both:
            raise InvalidRequest(
                f"field {sorted(both)[0]!r} is both set and removed", resource=resource.id
            )
        before: JsonObject = {}
        after: JsonObject = {}
        touched: list[str] = []
        for name, value in to_set.items():
            if name in current and current[name] == value:
                continue
            touched.append(name)
            if name in current:
                before[name] = current[name]
            after[name] = value
        for name in to_remove:
            if name not in current:
                continue
            touched.append(name)
            before[name] = current[name]
        if not touched:
            raise InvalidRequest(
                f"the change to {resource.id} is a no-op: every value is already as asked",
                resource=resource.id,
            )
        updated = dict(current)
        for name in touched:
            if name in after:
                updated[name] = after[name]
            else:
                updated.pop(name, None)
        if canonical_size(updated) > limits.max_document_bytes:
            raise InvalidRequest(
                f"the changed {resource.id} would be over the "
                f"{limits.max_document_bytes}-byte limit",
                resource=resource.id,
            )
        return Plan(fields=tuple(touched), before=before, after=after)

    def payload_size(self, change: Change) -> int:
        return len(dumps(_values(change.before)).encode()) + len(
            dumps(_values(change.after)).encode()
        )

    # -- comparing -----------------------------------------------------------------------

    def current(self, change: Change, snapshot: Snapshot) -> SideValue:
        current = _record(snapshot)
        return {f: current[f] for f in change.fields if f in current}

    def shows(self, change: Change, snapshot: Snapshot, side: Side) -> bool:
        values = _values(_side(change, side))
        current = _record(snapshot)
        for name in change.fields:
            if (name in values) != (name in current):
                return False
            if name in values and values[name] != current[name]:
                return False
        return True

    # -- writing -------------------------------------------------------------------------

    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        source = _values(_side(change, Side.BEFORE if target is Side.AFTER else Side.AFTER))
        goal = _values(_side(change, target))
        ops: list[JsonValue] = []
        for name in change.fields:
            path = f"{resource.record_pointer}/{escape_token(name)}"
            if name in source:
                ops.append({"op": "test", "path": path, "value": source[name]})
            if name in goal:
                ops.append(
                    {
                        "op": "replace" if name in source else "add",
                        "path": path,
                        "value": goal[name],
                    }
                )
            elif name in source:
                ops.append({"op": "remove", "path": path})
        return ConditionalWrite(
            method="PATCH",
            url=resource.url,
            headers={"Content-Type": PATCH_MEDIA_TYPE, "If-Match": snapshot.etag.header},
            body=dumps(ops, sort_keys=False).encode("utf-8"),
            if_match=snapshot.etag.header,
        )

    # -- other jobs ----------------------------------------------------------------------

    def overlaps(self, held: Sequence[str], wanted: Sequence[str]) -> bool:
        return bool(set(held) & set(wanted))

    # -- what every surface shows --------------------------------------------------------

    def event_diff(self, change: Change, toward: Side) -> JsonObject:
        """Field by field, each side's value or ``{"absent": true}`` (toward the before
        side, an undo, the sides swap)."""
        old = _values(_side(change, Side.BEFORE if toward is Side.AFTER else Side.AFTER))
        new = _values(_side(change, toward))
        fields_diff: JsonObject = {}
        for name in change.fields:
            fields_diff[name] = {
                "before": old.get(name) if name in old else {"absent": True},
                "after": new.get(name) if name in new else {"absent": True},
            }
        return {"fields": fields_diff}

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
            f"Reversible: undo patches back only {', '.join(change.fields)}, only while they "
            "still hold the values this job wrote; other fields are never touched."
        )

    # -- the endpoint check on a test copy (SPEC §11) -----------------------------------
    # The check writes a fresh marker into the first allow-listed field, and puts back
    # only that field; the copy counts as restored when every allow-listed field is.

    def marker_request(self, copy: Resource, start: Snapshot, marker: str) -> ChangeRequest:
        return ChangeRequest(resource_id=copy.id, set={copy.fields[0]: marker})

    def shows_marker(
        self, copy: Resource, start: Snapshot, now: Snapshot, markers: Sequence[str]
    ) -> bool:
        value = _record(now).get(copy.fields[0])
        return isinstance(value, str) and value in markers

    def restored(self, copy: Resource, start: Snapshot, now: Snapshot) -> bool:
        return not _differing_fields(copy, start, now)

    def restore_request(self, copy: Resource, start: Snapshot) -> ChangeRequest:
        """The gateway's own undo: ``test`` the current value, then put the start value
        back (or remove a field that did not exist)."""
        touched, fields = copy.fields[0], _record(start)
        if touched in fields:
            return ChangeRequest(resource_id=copy.id, set={touched: fields[touched]})
        return ChangeRequest(resource_id=copy.id, remove=(touched,))

    def create_attempt(
        self, copy: Resource, start: Snapshot, url: str, tag: ETag, marker: str
    ) -> ConditionalWrite:
        first, pointer = copy.fields[0], copy.record_pointer
        op: JsonValue = (
            {"op": "add", "path": pointer, "value": {first: marker}}
            if pointer
            else {"op": "add", "path": "/" + escape_token(first), "value": marker}
        )
        headers = {"Content-Type": PATCH_MEDIA_TYPE, "If-Match": tag.header}
        return ConditionalWrite("PATCH", url, headers, dumps([op]).encode("utf-8"), tag.header)

    def restore_evidence(
        self, copy: Resource, start: Snapshot, back: Snapshot, ok: bool
    ) -> tuple[Evidence, str]:
        before, after = _record(start), _record(back)
        outside = set(before) ^ set(after) | {
            k for k in set(before) & set(after) if before[k] != after[k]
        }
        others = len(outside - set(copy.fields))
        evidence: Evidence = {"fields_checked": len(copy.fields), "other_fields_changed": others}
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
        inside = f" (the fields inside {copy.record_pointer})"
        where = inside if copy.record_pointer else ""
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
    before = _record(start)
    if now is None:
        return list(copy.fields)
    current = _record(now)
    return [
        f
        for f in copy.fields
        if (f in before) != (f in current) or (f in before and before[f] != current[f])
    ]
