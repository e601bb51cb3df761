"""The change shapes of the kinds of contacts and calendars, as the docs, the OpenAPI
document and the agent's tool description show them. Their members are the ones the
JSON kinds declare (``set``, ``remove``, ``id``, ``create``, ``delete``, ``upsert``):
a member means one thing across kinds, here a property where a record has a field."""

from __future__ import annotations

from typing import Any

from ..shapes import ChangeShape


def document_shapes(noun: str, example: dict[str, Any]) -> tuple[ChangeShape, ...]:
    return (
        ChangeShape(
            ("set",),
            f"set these allow-listed properties of the {noun}: each replaces every "
            "instance of that property",
            optional=("remove",),
            example={"set": example},
        ),
        ChangeShape(
            ("remove",),
            f"remove every instance of these allow-listed properties of the {noun}",
            optional=("set",),
            example={"remove": ["NOTE"]},
        ),
    )


def collection_shapes(
    noun: str, member: str, create: dict[str, Any], upsert: dict[str, Any]
) -> tuple[ChangeShape, ...]:
    return (
        ChangeShape(
            ("id", "set"),
            f"change the {noun} id: set allow-listed properties (remove may come too)",
            optional=("remove",),
            example={"id": member, "set": {"NOTE": "Call back Monday"}},
        ),
        ChangeShape(
            ("id", "remove"),
            f"change the {noun} id: remove every instance of allow-listed properties",
            example={"id": member, "remove": ["NOTE"]},
        ),
        ChangeShape(
            ("create",),
            f"create one new {noun} with these properties; the gateway mints its UID and "
            "names it after it",
            example={"create": create},
        ),
        ChangeShape(
            ("id", "delete"),
            f"delete the {noun} id, keeping its whole text as its pre-image",
            example={"id": member, "delete": True},
        ),
        ChangeShape(
            ("upsert",),
            f"0 {noun}s match the identity evidence: a create; 1: an update of it; 2 or "
            "more: refused as ambiguous, nothing prepared",
            example={"upsert": upsert},
        ),
    )


__all__ = ["collection_shapes", "document_shapes"]
