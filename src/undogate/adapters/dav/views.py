"""How every surface shows a change of contacts and calendars: a property table, each
property's instances as the lines a person reads (a time with its zone), before and
after (or current and planned)."""

from __future__ import annotations

from collections.abc import Sequence

from ...jsonvalue import JsonObject, JsonValue
from ..records.fields import fields_diff
from ..views import field_rows
from .content import Properties, properties_to_json, same
from .formats import Format
from .values import shown


def shown_properties(fmt: Format, props: Properties | None) -> JsonObject | None:
    """Each property as the table shows it (``None`` where the object does not exist)."""
    if props is None:
        return None
    return {name: shown(fmt, name, instances) for name, instances in props.items()}


def property_rows(
    fmt: Format,
    names: Sequence[str],
    left: Properties | None,
    right: Properties | None,
    sides: tuple[str, str] = ("before", "after"),
) -> list[JsonValue]:
    """One row per property: both sides as lines; it ``changes`` unless both sides hold
    the same instances (in whatever order)."""
    rows = field_rows(names, shown_properties(fmt, left), shown_properties(fmt, right), sides)
    a, b = left or {}, right or {}
    for row, name in zip(rows, names, strict=True):
        assert isinstance(row, dict)
        row["changes"] = (name in a) != (name in b) or not same(a.get(name, ()), b.get(name, ()))
    return rows


def names_of(*sides: Properties | None) -> list[str]:
    """Every property either side holds, in the order they come."""
    names: dict[str, None] = {}
    for side in sides:
        names.update(dict.fromkeys(side or {}))
    return list(names)


def two_sides(
    fmt: Format,
    names: Sequence[str],
    left: Properties | None,
    right: Properties | None,
    sides: tuple[str, str] = ("before", "after"),
) -> JsonObject:
    """A change's two sides as a receipt or a preview shows them: each side's instances
    (``null`` where the object does not exist), and the property table."""
    return {
        sides[0]: None if left is None else properties_to_json(left),
        sides[1]: None if right is None else properties_to_json(right),
        "rows": property_rows(fmt, names, left, right, sides),
    }


def property_diff(names: Sequence[str], old: Properties, new: Properties) -> JsonObject:
    """What the job's history records of a change: each touched property's instances,
    old and new (or absent)."""
    return {
        "properties": fields_diff(list(names), properties_to_json(old), properties_to_json(new))
    }


__all__ = ["names_of", "property_diff", "property_rows", "shown_properties", "two_sides"]
