"""The members of a change to a collection beyond a record's fields (docs/collections.md): which
record (``id``), and the operations on records that appear and disappear."""

from __future__ import annotations

from ...jobs import ChangeRequest
from ...jsonvalue import JsonObject
from ..shapes import ChangeShape, flag_member, object_member, string_member

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


SHAPES = (
    ChangeShape(
        ("id", "set"),
        "update the record id: set allow-listed fields (remove may come too)",
        optional=("remove",),
        example={"id": "ann", "set": {"status": "customer"}},
    ),
    ChangeShape(
        ("id", "remove"),
        "update the record id: remove allow-listed fields",
        example={"id": "ann", "remove": ["owner"]},
    ),
    ChangeShape(
        ("create",),
        "create a record with these field values (id: the one asked for, create: put "
        "only; otherwise the gateway or the server names it)",
        optional=("id",),
        example={"create": {"email": "ann@example.com", "name": "Ann"}},
    ),
    ChangeShape(
        ("id", "delete"),
        "delete the record id, keeping its whole pre-image",
        example={"id": "ann", "delete": True},
    ),
    ChangeShape(
        ("upsert",),
        "0 records match the identity evidence: a create; 1: an update of it; 2 or "
        "more: refused as ambiguous, nothing prepared",
        example={"upsert": {"email": "ann@example.com", "status": "customer"}},
    ),
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


__all__ = ["CREATE", "DELETE", "ID", "SHAPES", "UPSERT", "deletes", "record_id_of", "values_of"]
