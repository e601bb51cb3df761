"""What the sides of a collection change hold (see ``adapter``), and how every surface
shows them: the operation they make, the record on each side, and the receipt's, the
preview's and the event's views of it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...jobs import ABSENT, Change, ChangeView, SideValue
from ...jsonvalue import JsonObject
from ..base import RECREATE, UNDO_OF_CREATE, Side, Snapshot
from ..records.fields import fields_diff
from ..views import field_rows


def operation_of(change: Change) -> str:
    """``create``, ``delete`` or ``update``: what the change's sides say it is."""
    if change.before is ABSENT:
        return "create"
    if change.after is ABSENT:
        return "delete"
    return "update"


def member_undo_guard_holds(
    change: Change, snapshot: Snapshot, shows: Callable[[Change, Snapshot, Side], bool]
) -> bool:
    """A member's undo guard, for every collection kind (``shows``: the kind's own)."""
    if operation_of(change) == "create":
        # Exactly what the create made: the tag its read-back gave, and the member whole.
        return (
            snapshot.exists
            and snapshot.etag.header == change.applied_etag
            and shows(change, snapshot, Side.AFTER)
        )
    return shows(change, snapshot, Side.AFTER)


def member_undo_needs(change: Change) -> str | None:
    """What a member change's undo needs verified first: a create's is a delete, a
    delete's a re-create."""
    return {"create": UNDO_OF_CREATE, "delete": RECREATE}.get(operation_of(change))


def side_record(side: SideValue | None) -> JsonObject:
    """The record fields a side holds (none where the record does not exist)."""
    if side is None or side is ABSENT:
        return {}
    record = side.get("record")
    return record if isinstance(record, dict) else {}


def current_record(snapshot: Snapshot) -> JsonObject:
    return snapshot.content if snapshot.exists and isinstance(snapshot.content, dict) else {}


def without(record: JsonObject, names: Sequence[str]) -> JsonObject:
    return {k: v for k, v in record.items() if k not in names}


def server_fields(change: Change) -> list[str]:
    """The members of a whole record (a delete's pre-image, a create's record) that are
    never compared: those the server rewrites, and the id it gives a record it creates."""
    side = change.before if change.before is not ABSENT else change.after
    if side is ABSENT:
        return []
    kept = side.get("server_fields")
    names = [f for f in kept if isinstance(f, str)] if isinstance(kept, list) else []
    id_field = side.get("id_field")
    if isinstance(id_field, str) and id_field not in side_record(side):
        names.append(id_field)
    return names


def preexisting(change: Change) -> set[str] | None:
    """The records that matched a create's evidence when it was prepared (None: a create
    that was not looked up)."""
    kept = change.after.get("preexisting") if change.after is not ABSENT else None
    return {r for r in kept if isinstance(r, str)} if isinstance(kept, list) else None


def _rows_fields(change: Change | None, *sides: JsonObject | None) -> list[str]:
    if change is not None and operation_of(change) == "update":
        return list(change.fields)
    names: dict[str, None] = {}
    for side in sides:
        names.update(dict.fromkeys(side or {}))
    return list(names)


def event_diff(change: Change, toward: Side) -> JsonObject:
    old = side_record(change.before if toward is Side.AFTER else change.after)
    new = side_record(change.after if toward is Side.AFTER else change.before)
    return {
        "operation": operation_of(change),
        "record_id": change.target,
        "fields": fields_diff(_rows_fields(change, old, new), old, new),
    }


def receipt_values(change: Change) -> JsonObject:
    before = side_record(change.before) if change.before is not ABSENT else None
    after = side_record(change.after) if change.after is not ABSENT else None
    return {
        "operation": operation_of(change),
        "record_id": change.target,
        "before": before,
        "after": after,
        "rows": field_rows(_rows_fields(change, before, after), before, after),
    }


def preview_values(view: ChangeView, change: Change | None) -> JsonObject:
    current = side_record(view.current) if view.current is not ABSENT else None
    planned = None if view.planned is None or view.planned is ABSENT else side_record(view.planned)
    shown_planned = planned if view.planned is not None else current
    fields = _rows_fields(change, current, planned)
    return {
        "operation": operation_of(change) if change is not None else None,
        "record_id": change.target if change is not None else None,
        "current": current,
        "planned": planned,
        "planned_absent": view.planned is ABSENT,
        "rows": field_rows(fields, current, shown_planned, ("current", "planned")),
    }


def reversibility(change: Change) -> str:
    named = change.target or "(the id the server gives it)"
    operation = operation_of(change)
    if operation == "create":
        return (
            f"Undo deletes exactly the record this job created ({named}), only while "
            "it is unchanged since (DELETE with If-Match on the tag its read-back gave). "
            "Offered only once verified on a test copy and accepted by a reviewer."
        )
    if operation == "delete":
        return (
            f"Undo re-creates record {named} from its kept pre-image (PUT with "
            "If-None-Match: *), only while no record has that id. Offered only where a "
            "test copy showed a deleted id can be re-created and a reviewer accepted it."
        )
    return (
        f"Reversible: undo patches back only {', '.join(change.fields)} of record {named}, "
        "only while they still hold the values this job wrote; other fields are never "
        "touched."
    )
