"""The parts of the OpenAPI document the installed kinds decide, generated from the
registry: the members a change may carry (each kind's ``change_members``, with which
kinds take it), the shapes each kind's changes take, and the kinds' names."""

from __future__ import annotations

from typing import Any

from ...adapters import Adapter, adapters, member_takers
from ...jobs import AssertionKind
from .schemas import _STR, S, _obj

# The members every change has, whatever its kind.
COMMON_MEMBERS: S = {
    "resource": {"type": "string", "maxLength": 64, "description": "a resource id"},
    "expected_version": {
        "type": "string",
        "maxLength": 300,
        "description": "the version (entity tag) the change is based on; a mismatch is "
        "refused as stale_version and nothing is prepared",
    },
    "assertion_kind": {"enum": [k.value for k in AssertionKind]},
}


def shape_text(adapter: Adapter) -> list[str]:
    """Each change shape of a kind in a line: its members, then what it does."""
    lines = []
    for shape in adapter.change_shapes:
        named = " + ".join(f"`{m}`" for m in shape.members)
        optional = "".join(f" (+ `{m}`)" for m in shape.optional)
        lines.append(f"{named}{optional}: {shape.meaning}")
    return lines


def change_members() -> S:
    """Every member a change may carry: the common ones, then the kinds', each with
    which kinds take it."""
    members: dict[str, Any] = dict(COMMON_MEMBERS)
    for name, (member, kinds) in member_takers().items():
        described = f"{', '.join(kinds)}: {member.schema.get('description', '')}"
        members[name] = {**member.schema, "description": described}
    return members


def kind_schemas() -> S:
    """``ChangeRequest`` and ``ResourceList``, as the installed kinds make them."""
    kinds = adapters()
    described = "; ".join(
        f"{a.kind}: " + " | ".join(shape_text(a)) for a in kinds if a.change_shapes
    )
    return {
        "ChangeRequest": {
            "type": "object",
            "required": ["resource"],
            "additionalProperties": False,
            "description": "a change to one resource; the members besides resource, "
            f"expected_version and assertion_kind are its kind's. {described}",
            "properties": change_members(),
        },
        "ResourceList": _obj(
            ["agent", "resources"],
            {
                "agent": _STR,
                "resources": {
                    "type": "array",
                    "items": _obj(
                        ["id", "name", "kind", "fields"],
                        {
                            "id": _STR,
                            "name": _STR,
                            "kind": {"enum": [a.kind for a in kinds]},
                            "fields": {"type": "array", "items": _STR},
                        },
                    ),
                },
            },
        ),
    }


__all__ = ["COMMON_MEMBERS", "change_members", "kind_schemas", "shape_text"]
