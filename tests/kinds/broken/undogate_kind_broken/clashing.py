"""A kind that declares ``set`` with another meaning than the JSON kinds' ``set``."""

from __future__ import annotations

from undogate.adapters import JsonRecordAdapter, string_member


class ClashingThing(JsonRecordAdapter):
    kind = "clashing_thing"
    change_members = (string_member("set", "a string, not an object of fields", 10),)
