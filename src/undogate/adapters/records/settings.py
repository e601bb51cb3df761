"""The settings every kind of JSON records has: its allow-listed top-level ``fields``,
the ``record_pointer`` to the record's fields inside what the server sends, and the
dialect its endpoint speaks (docs/config.md): how a change is written (``write``), where
the version travels (``version``) and what a stale one is refused with
(``stale_status``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ...resources import KindSettings, Resource, StrictModel

# RFC 6902 JSON Patch (the default), RFC 7396 JSON Merge Patch, or a PUT of the whole
# record as read with only the allow-listed fields changed.
WriteMode = Literal["json_patch", "merge_patch", "put"]
DEFAULT_STALE_STATUS = (412,)


class Version(StrictModel):
    """Where a record carries its own version, when its ETag is not the version (CouchDB's
    ``_rev``, Kubernetes' ``/metadata/resourceVersion``)."""

    # A JSON Pointer into the document as read (as ``record_pointer`` is).
    pointer: str = Field(min_length=2, max_length=256)
    # The query parameter a DELETE carries the version in (``rev``: ``?rev=2-…``), the one
    # query parameter the gateway ever adds to a URL.
    delete_query: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


class RecordSettings(KindSettings):
    fields: tuple[str, ...] = ()
    # A JSON Pointer to the record's fields when the server wraps them ({"data": {...}}).
    record_pointer: str = ""
    write: WriteMode = "json_patch"
    version: Version | None = None
    stale_status: tuple[int, ...] = Field(DEFAULT_STALE_STATUS, min_length=1, max_length=8)

    def fingerprint_part(self) -> dict[str, Any]:
        part: dict[str, Any] = {
            "record_pointer": self.record_pointer,
            "fields": sorted(self.fields),
        }
        # The dialect is identity too (a check verified one dialect); at its defaults the
        # digest of a resource declared before dialects stays what it was.
        if self.write != "json_patch":
            part["write"] = self.write
        if self.version is not None:
            part["version"] = self.version.model_dump(mode="json")
        if self.stale_status != DEFAULT_STALE_STATUS:
            part["stale_status"] = sorted(self.stale_status)
        return part


def record_settings(resource: Resource) -> RecordSettings:
    """``resource``'s settings, as a kind of JSON records declared them."""
    settings = resource.settings
    assert isinstance(settings, RecordSettings), f"{resource.id} is not a kind of records"
    return settings


def copy_shape_problem(copy: Resource, production: Resource) -> str | None:
    """A test copy of a kind of records has the same fields, record pointer and dialect:
    the check verifies the requests the production resource's writes would be."""
    mine, theirs = record_settings(copy), record_settings(production)
    if sorted(theirs.fields) != sorted(mine.fields):
        return f"the fields must be the same as {production.id!r}'s"
    for name in ("record_pointer", "write", "version", "stale_status"):
        if getattr(theirs, name) != getattr(mine, name):
            return f"the {name} must be the same as {production.id!r}'s"
    return None


__all__ = [
    "DEFAULT_STALE_STATUS",
    "RecordSettings",
    "Version",
    "WriteMode",
    "copy_shape_problem",
    "record_settings",
]
