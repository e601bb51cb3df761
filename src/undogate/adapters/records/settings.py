"""The settings every kind of JSON records has: its allow-listed top-level ``fields`` and
the ``record_pointer`` to the record's fields inside what the server sends."""

from __future__ import annotations

from typing import Any

from ...resources import KindSettings, Resource


class RecordSettings(KindSettings):
    fields: tuple[str, ...] = ()
    # A JSON Pointer to the record's fields when the server wraps them ({"data": {...}}).
    record_pointer: str = ""

    def fingerprint_part(self) -> dict[str, Any]:
        return {"record_pointer": self.record_pointer, "fields": sorted(self.fields)}


def record_settings(resource: Resource) -> RecordSettings:
    """``resource``'s settings, as a kind of JSON records declared them."""
    settings = resource.settings
    assert isinstance(settings, RecordSettings), f"{resource.id} is not a kind of records"
    return settings


def copy_shape_problem(copy: Resource, production: Resource) -> str | None:
    """A test copy of a kind of records has the same fields and record pointer."""
    mine, theirs = record_settings(copy), record_settings(production)
    if sorted(theirs.fields) != sorted(mine.fields):
        return f"the fields must be the same as {production.id!r}'s"
    if theirs.record_pointer != mine.record_pointer:
        return f"the record_pointer must be the same as {production.id!r}'s"
    return None


__all__ = ["RecordSettings", "copy_shape_problem", "record_settings"]
