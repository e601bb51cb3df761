"""``json_record``: allow-listed top-level fields, changed by RFC 6902 PATCH."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InvalidRequest, RemoteContractBreach
from ..jobs import Change, ChangeRequest, ResourceKind
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
from ..resources import Resource
from .base import Adapter, ConditionalWrite, Plan, Side, Snapshot, media_type_is

PATCH_MEDIA_TYPE = "application/json-patch+json"
JSON_MEDIA_TYPES = frozenset({"application/json"})


@dataclass
class JsonRecordAdapter(Adapter):
    kind: ResourceKind = field(init=False, default=ResourceKind.JSON_RECORD)
    accept: str = field(init=False, default="application/json")

    def parse(
        self, resource: Resource, media_type: str, body: bytes
    ) -> tuple[JsonObject | None, str | None]:
        if not media_type_is(media_type, JSON_MEDIA_TYPES):
            raise RemoteContractBreach(
                f"{resource.id} answered with media type {media_type[:60]!r}, not application/json",
                resource=resource.id,
            )
        try:
            document = loads_object(body)
            # The canonical form is never longer than the text it was parsed from, so
            # only a body over the limit needs measuring.
            limit = self.limits.max_document_bytes
            if len(body) > limit and canonical_size(document) > limit:
                raise RemoteContractBreach(
                    f"{resource.id} is over the {self.limits.max_document_bytes}-byte limit",
                    resource=resource.id,
                )
            record = resolve_record(document, resource.record_pointer)
        except JsonError as exc:
            raise RemoteContractBreach(
                f"{resource.id} sent unacceptable JSON ({exc.reason}): {exc}",
                resource=resource.id,
                reason=exc.reason,
            ) from None
        return record, None

    def plan(self, resource: Resource, request: ChangeRequest, snapshot: Snapshot) -> Plan:
        if request.text is not None:
            raise InvalidRequest(
                f"{resource.id} is a JSON record: use set/remove, not text",
                resource=resource.id,
            )
        current = snapshot.fields or {}
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
        if canonical_size(updated) > self.limits.max_document_bytes:
            raise InvalidRequest(
                f"the changed {resource.id} would be over the "
                f"{self.limits.max_document_bytes}-byte limit",
                resource=resource.id,
            )
        return Plan(
            fields=tuple(touched),
            before=before,
            after=after,
            before_text=None,
            after_text=None,
            media_type=snapshot.media_type,
        )

    def shows(self, change: Change, snapshot: Snapshot, side: Side) -> bool:
        values = _side(change, side)
        current = snapshot.fields or {}
        for name in change.fields:
            if (name in values) != (name in current):
                return False
            if name in values and values[name] != current[name]:
                return False
        return True

    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        source = _side(change, Side.BEFORE if target is Side.AFTER else Side.AFTER)
        goal = _side(change, target)
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


def _side(change: Change, side: Side) -> JsonObject:
    values = change.before if side is Side.BEFORE else change.after
    return values or {}
