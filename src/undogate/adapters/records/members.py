"""The members of a change to a resource's allow-listed fields: shared by the kinds of
JSON records (top-level fields) and of contacts and calendars (properties)."""

from __future__ import annotations

from ...jobs import ChangeRequest
from ...jsonvalue import JsonObject
from ..shapes import names_member, object_member

SET = object_member(
    "set",
    "allow-listed field -> its new value (a JSON record's top-level field; a contact's or "
    "an event's property, as its kind says)",
    in_every_digest=True,
)
REMOVE = names_member(
    "remove",
    "allow-listed field names to remove (a property: every instance of it)",
    in_every_digest=True,
)


def set_of(request: ChangeRequest) -> JsonObject:
    """The fields a change sets (none when it sets none)."""
    value = request.members.get(SET.name)
    return value if isinstance(value, dict) else {}


def remove_of(request: ChangeRequest) -> tuple[str, ...]:
    """The fields a change removes."""
    value = request.members.get(REMOVE.name)
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


__all__ = ["REMOVE", "SET", "remove_of", "set_of"]
