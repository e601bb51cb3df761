"""The shapes a change takes: its members and their JSON Schemas, declared by the kinds.

A change is ``{"resource": id, ...}`` plus the members its resource's kind takes
(``set``, ``text``, ``create``...). Each kind declares them here, as ``ChangeMember``
(one member: its JSON Schema, how a value is checked, what an absent one means) and
``ChangeShape`` (a combination of members that makes one change, with its meaning).
From these alone the surfaces build the request schemas (OpenAPI, the MCP tool's input
schema) and the docs' tables; the API checks each member with its ``parse`` before any
resource is looked up, and the kind then reads the checked values.

Members form one vocabulary across the installed kinds: two kinds may share a member
(the JSON kinds share ``set``), but only as one definition; the registry refuses a kind
that redefines a member another kind declares differently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidRequest
from ..jsonvalue import JsonValue

# Checks one member's value (``where``: the change's path, ``changes[2]``) and returns it
# as the kind will read it. Raises InvalidRequest.
MemberParser = Callable[[JsonValue, str], JsonValue]


@dataclass(frozen=True)
class ChangeMember:
    """One member a change may carry."""

    name: str
    schema: dict[str, Any]  # the JSON Schema of its value (plain JSON), description included
    parse: MemberParser = field(compare=False)
    default: JsonValue = None  # what an absent (or null) member means
    # Part of every prepare's idempotency digest, even where absent: the members of the
    # first release were, and a digest of a job prepared then must stay what it was.
    # Only a built-in kind may declare one (a new one would change every digest).
    in_every_digest: bool = False


@dataclass(frozen=True)
class ChangeShape:
    """One combination of members that makes a change of a kind, as the docs, the
    OpenAPI document and the agent's tool description show it."""

    members: tuple[str, ...]  # required, in the order they are shown
    meaning: str  # what such a change does, in a sentence
    optional: tuple[str, ...] = ()
    # The members of an example change (plain JSON).
    example: dict[str, Any] = field(default_factory=dict)


def object_member(name: str, description: str, *, in_every_digest: bool = False) -> ChangeMember:
    """A member whose value is an object of field (or property) values."""

    def parse(value: JsonValue, where: str) -> JsonValue:
        if not isinstance(value, dict):
            raise InvalidRequest(f"{where}.{name} must be an object of field values")
        return value

    schema: dict[str, Any] = {"type": "object", "description": description}
    return ChangeMember(name, schema, parse, in_every_digest=in_every_digest)


def names_member(name: str, description: str, *, in_every_digest: bool = False) -> ChangeMember:
    """A member whose value is a list of field (or property) names."""

    def parse(value: JsonValue, where: str) -> JsonValue:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidRequest(f"{where}.{name} must be a list of field names")
        return value

    schema: dict[str, Any] = {
        "type": "array",
        "items": {"type": "string"},
        "description": description,
    }
    return ChangeMember(name, schema, parse, default=[], in_every_digest=in_every_digest)


def string_member(
    name: str, description: str, max_length: int, *, in_every_digest: bool = False
) -> ChangeMember:
    """A member whose value is a string of at most ``max_length`` characters."""

    def parse(value: JsonValue, where: str) -> JsonValue:
        if not isinstance(value, str) or len(value) > max_length:
            raise InvalidRequest(
                f"{name} must be a string of at most {max_length} characters", member=name
            )
        return value

    schema: dict[str, Any] = {"type": "string", "maxLength": max_length, "description": description}
    return ChangeMember(name, schema, parse, in_every_digest=in_every_digest)


def flag_member(name: str, description: str) -> ChangeMember:
    """A member that is true or false (absent: false)."""

    def parse(value: JsonValue, where: str) -> JsonValue:
        if not isinstance(value, bool):
            raise InvalidRequest(f"{name} must be true or false", member=name)
        return value

    schema: dict[str, Any] = {"type": "boolean", "description": description}
    return ChangeMember(name, schema, parse, default=False)


__all__ = [
    "ChangeMember",
    "ChangeShape",
    "MemberParser",
    "flag_member",
    "names_member",
    "object_member",
    "string_member",
]
