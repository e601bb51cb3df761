"""What the sides of a change to an address book or a calendar hold, and how every
surface shows them.

A change acts on one member, its ``target`` (its name in the collection). Its sides are
``{"properties": ...}`` (``changes``), or ``ABSENT`` where the member does not exist:

- an update (both sides): the touched properties, as a single contact or event has them;
- a create (before absent): every property of the object's component as the gateway
  writes it (its minted UID and, for an event, its DTSTAMP included), and the whole
  ``document`` it sends; a member shows the create only when it is that object whole
  (those properties, and no component inside it that the document lacks), so a contact
  or event someone else made with the same values and more is never the job's.
  A create an upsert became also holds ``preexisting``: the members that matched its
  evidence when it was prepared, so that one appearing since refuses the create;
- a delete (after absent): every property and the whole ``document`` as read (its
  pre-image), which an undo puts back with ``If-None-Match: *``.
"""

from __future__ import annotations

from ...jobs import ABSENT, Change, ChangeView
from ...jsonvalue import JsonObject
from ..base import Side
from ..json_collection.sides import operation_of
from .changes import side_properties
from .formats import Format
from .views import names_of, property_diff, two_sides


def side_document(change: Change) -> str:
    """The whole text a create writes or a delete keeps."""
    side = change.after if change.before is ABSENT else change.before
    text = side.get("document") if side is not ABSENT else None
    return text if isinstance(text, str) else ""


def preexisting(change: Change) -> set[str] | None:
    """The members that matched a create's evidence when it was prepared (None: a
    create that was not looked up)."""
    kept = change.after.get("preexisting") if change.after is not ABSENT else None
    return {r for r in kept if isinstance(r, str)} if isinstance(kept, list) else None


def _names(change: Change | None, *sides: JsonObject | None) -> list[str]:
    if change is not None and operation_of(change) == "update":
        return list(change.fields)
    return names_of(*(side_properties(s) for s in sides))


def event_diff(change: Change, toward: Side) -> JsonObject:
    old = change.before if toward is Side.AFTER else change.after
    new = change.after if toward is Side.AFTER else change.before
    names = _names(change, None if old is ABSENT else old, None if new is ABSENT else new)
    return {
        "operation": operation_of(change),
        "record_id": change.target,
        **property_diff(names, side_properties(old), side_properties(new)),
    }


def receipt_values(fmt: Format, change: Change) -> JsonObject:
    before = None if change.before is ABSENT else side_properties(change.before)
    after = None if change.after is ABSENT else side_properties(change.after)
    names = _names(
        change,
        None if change.before is ABSENT else change.before,
        None if change.after is ABSENT else change.after,
    )
    return {
        "operation": operation_of(change),
        "record_id": change.target,
        **two_sides(fmt, names, before, after),
    }


def preview_values(fmt: Format, view: ChangeView, change: Change | None) -> JsonObject:
    current = None if view.current is ABSENT else side_properties(view.current)
    planned_side = view.planned
    planned = (
        None if planned_side is None or planned_side is ABSENT else side_properties(planned_side)
    )
    shown_planned = planned if planned_side is not None else current
    names = (
        list(change.fields)
        if change is not None and operation_of(change) == "update"
        else names_of(current, planned)
    )
    shown = two_sides(fmt, names, current, shown_planned, ("current", "planned"))
    shown["planned"] = None if planned is None else shown["planned"]
    return {
        "operation": operation_of(change) if change is not None else None,
        "record_id": change.target if change is not None else None,
        "planned_absent": planned_side is ABSENT,
        **shown,
    }


def reversibility(noun: str, change: Change) -> str:
    named = change.target or f"the new {noun}"
    operation = operation_of(change)
    if operation == "create":
        return (
            f"Undo deletes exactly the {noun} this job created ({named}), only while it is "
            "unchanged since (DELETE with If-Match on the tag its read-back gave). Offered "
            "only once verified on a test copy and accepted by a reviewer."
        )
    if operation == "delete":
        return (
            f"Undo puts {named} back from its kept text (PUT with If-None-Match: *), only "
            f"while nothing has that name. Offered only where a test copy showed a deleted "
            "name can be re-created and a reviewer accepted it."
        )
    return (
        f"Reversible: undo puts back only {', '.join(change.fields)} of {named} (every "
        "instance, with its parameters), only while they still hold what this job wrote; "
        f"every other line of the {noun} is kept as the server holds it then."
    )


__all__ = [
    "event_diff",
    "preexisting",
    "preview_values",
    "receipt_values",
    "reversibility",
    "side_document",
]
