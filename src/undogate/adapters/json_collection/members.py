"""The members of a change to a collection beyond a record's fields (SPEC §12): which
record (``id``), and the operations on records that appear and disappear."""

from __future__ import annotations

from ...jobs import ChangeRequest
from ...jsonvalue import JsonObject
from ..shapes import flag_member, object_member, string_member

ID = string_member(
    "id",
    "the record a set/remove or delete acts on, or the id a create asks for (create: put)",
    128,
)
CREATE = object_member("create", "the field values of a new record")
DELETE = flag_member("delete", "true deletes the record id")
UPSERT = object_member(
    "upsert",
    "field -> value; updates the one record whose identity evidence matches, or creates "
    "one; several matches are refused as ambiguous with the candidates (ids and evidence "
    "only), and nothing is prepared",
)


def record_id_of(request: ChangeRequest) -> str | None:
    value = request.members.get(ID.name)
    return value if isinstance(value, str) else None


def values_of(request: ChangeRequest, name: str) -> JsonObject | None:
    """The field values of ``create`` or ``upsert`` (None: the change has none)."""
    value = request.members.get(name)
    return value if isinstance(value, dict) else None


def deletes(request: ChangeRequest) -> bool:
    return request.members.get(DELETE.name) is True


__all__ = ["CREATE", "DELETE", "ID", "UPSERT", "deletes", "record_id_of", "values_of"]
