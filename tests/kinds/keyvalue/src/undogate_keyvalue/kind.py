"""``keyvalue_entry``: one entry of a key-value text store (``store``), replaced whole by
a ``PUT`` with ``If-Match``.

A side of a change is ``{"value": text}``. The reviewer sees one row, the entry's text
before and after. Undo puts the text back only while the entry still holds what the
job wrote. Its endpoint check is the one every kind whose resource is one object at one
URL shares (``WholeResourceAdapter``): this module only says what a marker write is and
how to tell the start.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import Field

from undogate.adapters import (
    Change,
    ChangeRequest,
    ChangeShape,
    ChangeView,
    ConditionalWrite,
    ETag,
    Evidence,
    KindSettings,
    Limits,
    Plan,
    Resource,
    Side,
    SideValue,
    Snapshot,
    WholeResourceAdapter,
    field_rows,
    media_type_is,
    string_member,
)
from undogate.errors import InvalidRequest, RemoteContractBreach
from undogate.jsonvalue import JsonError, JsonObject, JsonValue, loads_object

VALUE = string_member("value", "the entry's new text", 10_000)
JSON = frozenset({"application/json"})


class EntrySettings(KindSettings):
    # The longest text a change may write to the entry.
    max_length: int = Field(200, ge=1, le=10_000)


def _settings(resource: Resource) -> EntrySettings:
    settings = resource.settings
    assert isinstance(settings, EntrySettings)
    return settings


class KeyValueEntry(WholeResourceAdapter):
    kind = "keyvalue_entry"
    noun = "entry"
    accept = "application/json"
    summary = "one entry of a key-value text store; a change replaces its text (PUT, If-Match)"
    agent_guide = "`value` (the entry's new text, at most the resource's max_length characters)."
    settings_model = EntrySettings
    change_members = (VALUE,)
    change_shapes = (
        ChangeShape(("value",), "replace the entry's text", example={"value": "Back Monday"}),
    )

    # -- reading and planning ------------------------------------------------------------

    def parse(self, resource: Resource, media_type: str, body: bytes, limits: Limits) -> JsonValue:
        if not media_type_is(media_type, JSON) or len(body) > limits.max_document_bytes:
            raise RemoteContractBreach(f"{resource.id} is not an entry", resource=resource.id)
        try:
            value = loads_object(body).get("value")
        except JsonError as exc:
            why = f"{resource.id} sent bad JSON"
            raise RemoteContractBreach(why, resource=resource.id) from exc
        if not isinstance(value, str):
            raise RemoteContractBreach(f"{resource.id} has no text value", resource=resource.id)
        return value

    def plan(
        self, resource: Resource, request: ChangeRequest, snapshot: Snapshot, limits: Limits
    ) -> Plan:
        value = self.members(request).get(VALUE.name)
        if not isinstance(value, str):
            raise InvalidRequest(f"a change to {resource.id} needs a value", resource=resource.id)
        limit = _settings(resource).max_length
        if len(value) > limit:
            raise InvalidRequest(
                f"{resource.id} takes at most {limit} characters", resource=resource.id
            )
        if value == snapshot.content:
            raise InvalidRequest(f"the change to {resource.id} is a no-op", resource=resource.id)
        return Plan(("value",), {"value": _text(snapshot)}, {"value": value})

    def payload_size(self, change: Change) -> int:
        return sum(len(json.dumps(side)) for side in (change.before, change.after))

    # -- comparing and writing -----------------------------------------------------------

    def current(self, change: Change, snapshot: Snapshot) -> SideValue:
        return {"value": _text(snapshot)}

    def shows(self, change: Change, snapshot: Snapshot, side: Side) -> bool:
        wanted = change.before if side is Side.BEFORE else change.after
        return isinstance(wanted, dict) and wanted.get("value") == snapshot.content

    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        goal = change.after if target is Side.AFTER else change.before
        value = goal.get("value") if isinstance(goal, dict) else None
        return _put(resource.url, snapshot.etag.header, value)

    def overlaps(self, held: Sequence[str], wanted: Sequence[str]) -> bool:
        return True  # a change holds the whole entry

    # -- what every surface shows --------------------------------------------------------

    def event_diff(self, change: Change, toward: Side) -> JsonObject:
        before, after = change.before, change.after
        old, new = (before, after) if toward is Side.AFTER else (after, before)
        return {"fields": {"value": {"before": _side(old), "after": _side(new)}}}

    def receipt_values(self, change: Change) -> JsonObject:
        before, after = _object(change.before), _object(change.after)
        return {"before": before, "after": after, "rows": field_rows(["value"], before, after)}

    def preview_values(self, view: ChangeView, change: Change | None) -> JsonObject:
        current = _object(view.current)
        planned = _object(view.planned) if view.planned is not None else current
        rows = field_rows(["value"], current, planned, ("current", "planned"))
        return {"current": current, "planned": planned, "rows": rows}

    def reversibility(self, change: Change) -> str:
        return (
            "Reversible: undo puts the entry's previous text back, only while it still "
            "holds the text this job wrote."
        )

    # -- the endpoint check on a test copy -----------------------------------------------

    def marker_request(self, copy: Resource, start: Snapshot, marker: str) -> ChangeRequest:
        return ChangeRequest(copy.id, value=marker)

    def shows_marker(
        self, copy: Resource, start: Snapshot, now: Snapshot, markers: Sequence[str]
    ) -> bool:
        return now.content in markers

    def restored(self, copy: Resource, start: Snapshot, now: Snapshot) -> bool:
        return now.content == start.content

    def restore_request(self, copy: Resource, start: Snapshot) -> ChangeRequest:
        return ChangeRequest(copy.id, value=_text(start))

    def create_attempt(
        self, copy: Resource, start: Snapshot, url: str, tag: ETag, marker: str
    ) -> ConditionalWrite:
        return _put(url, tag.header, marker)

    def restore_evidence(
        self, copy: Resource, start: Snapshot, back: Snapshot, ok: bool
    ) -> tuple[Evidence, str]:
        return {}, "the text is exactly the start" if ok else "the text is not the start"

    def restore_by_hand(
        self,
        copy: Resource,
        start: Snapshot,
        now: Snapshot | None,
        keep: Callable[[bytes], Path | None],
    ) -> str:
        body = json.dumps({"value": _text(start)})
        return f"restore the test copy by hand: PUT {body} to {copy.url}"


def _put(url: str, tag: str, value: JsonValue) -> ConditionalWrite:
    body = json.dumps({"value": value}).encode("utf-8")
    headers = {"Content-Type": "application/json", "If-Match": tag}
    return ConditionalWrite("PUT", url, headers, body, tag)


def _text(snapshot: Snapshot) -> str:
    return snapshot.content if isinstance(snapshot.content, str) else ""


def _object(side: SideValue | None) -> JsonObject | None:
    return side if isinstance(side, dict) else None


def _side(side: SideValue) -> JsonValue:
    return side.get("value") if isinstance(side, dict) else {"absent": True}


__all__ = ["VALUE", "EntrySettings", "KeyValueEntry"]
