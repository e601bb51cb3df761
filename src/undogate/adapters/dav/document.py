"""One contact or one event at one URL (``vcard``, ``icalendar``): allow-listed
properties set or removed by a conditional ``PUT`` of the document as read, with only
the touched properties' lines replaced (``content``).

A side is the touched properties present on it (``changes``). Every guard and the
read-back compare those properties, never bytes: a server that re-serializes what it
stores (Radicale) shows the write as applied. Undo writes the touched properties back,
only while they still hold what the job wrote, into the document as it is then: an
outside edit of another property is kept. Two changes overlap when they touch a common
property.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from ...jobs import ABSENT, Change, ChangeRequest, ChangeView, SideValue
from ...jsonvalue import JsonObject, JsonValue, dumps
from ...net import RemoteResponse
from ...net.etag import ETag
from ...resources import Limits, Resource
from ..base import ConditionalWrite, Plan, Side, Snapshot
from ..checks.steps import Evidence
from ..checks.whole_resource import WholeResourceAdapter
from ..records.members import REMOVE, SET, remove_of, set_of
from .changes import (
    document,
    parse_body,
    plan_properties,
    properties_side,
    side_properties,
    snapshot_properties,
    text_of,
    touched_show,
)
from .content import Instance, every_property, rewrite
from .formats import CHECK_PROPERTY, Format
from .preconditions import content_refusal
from .settings import PropertySettings, copy_problem, property_problems, property_settings
from .views import property_diff, two_sides


def put_document(
    url: str, media_type: str, etag: str, body: str, replaces: str
) -> ConditionalWrite:
    """The conditional ``PUT`` of a whole document, with the text it replaces."""
    headers = {"Content-Type": media_type, "If-Match": etag}
    return ConditionalWrite("PUT", url, headers, body.encode("utf-8"), etag, replaces)


class PropertyDocumentAdapter(WholeResourceAdapter):
    """What ``vcard`` and ``icalendar`` share; each says its ``format``."""

    format: ClassVar[Format]
    part_names = ("property", "properties")
    settings_model = PropertySettings
    change_members = (SET, REMOVE)

    # -- the config ------------------------------------------------------------------

    def config_problems(self, resource: Resource, limits: Limits) -> list[tuple[str, str]]:
        return property_problems(resource, limits)

    def test_copy_problem(self, copy: Resource, production: Resource) -> str | None:
        return copy_problem(copy, production)

    def agent_fields(self, resource: Resource) -> tuple[str, ...]:
        return property_settings(resource).fields

    # -- reading and planning ----------------------------------------------------------

    def parse(self, resource: Resource, media_type: str, body: bytes, limits: Limits) -> JsonValue:
        return parse_body(resource, self.format, media_type, body, limits)

    def plan(
        self, resource: Resource, request: ChangeRequest, snapshot: Snapshot, limits: Limits
    ) -> Plan:
        self.members(request)
        touched, before, after = plan_properties(
            resource, self.format, text_of(snapshot), set_of(request), remove_of(request), limits
        )
        return Plan(touched, properties_side(before), properties_side(after))

    def payload_size(self, change: Change) -> int:
        sides = (change.before, change.after)
        return sum(len(dumps(side).encode()) for side in sides if side is not ABSENT)

    # -- comparing -----------------------------------------------------------------------

    def current(self, change: Change, snapshot: Snapshot) -> SideValue:
        now = snapshot_properties(snapshot, self.format)
        return properties_side({n: now[n] for n in change.fields if n in now})

    def shows(self, change: Change, snapshot: Snapshot, side: Side) -> bool:
        wanted = side_properties(change.before if side is Side.BEFORE else change.after)
        return touched_show(change.fields, wanted, snapshot_properties(snapshot, self.format))

    def differing(self, change: Change, snapshot: Snapshot) -> tuple[str, ...]:
        now = snapshot_properties(snapshot, self.format)
        before, after = side_properties(change.before), side_properties(change.after)
        return tuple(
            n
            for n in change.fields
            if not touched_show([n], before, now) and not touched_show([n], after, now)
        )

    # -- writing -------------------------------------------------------------------------

    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        goal = side_properties(change.after if target is Side.AFTER else change.before)
        text = text_of(snapshot)
        body = rewrite(
            document(text, self.format), self.format, {n: goal.get(n, ()) for n in change.fields}
        )
        return put_document(resource.url, snapshot.media_type, snapshot.etag.header, body, text)

    # -- other jobs ----------------------------------------------------------------------

    def overlaps(self, held: Sequence[str], wanted: Sequence[str]) -> bool:
        return bool(set(held) & set(wanted))

    # -- what every surface shows --------------------------------------------------------

    def event_diff(self, change: Change, toward: Side) -> JsonObject:
        old = side_properties(change.before if toward is Side.AFTER else change.after)
        return property_diff(
            change.fields,
            old,
            side_properties(change.after if toward is Side.AFTER else change.before),
        )

    def receipt_values(self, change: Change) -> JsonObject:
        before, after = side_properties(change.before), side_properties(change.after)
        return two_sides(self.format, change.fields, before, after)

    def preview_values(self, view: ChangeView, change: Change | None) -> JsonObject:
        current = side_properties(view.current)
        planned = side_properties(view.planned) if view.planned is not None else None
        names = list(change.fields) if change else sorted({*current, *(planned or {})})
        shown = two_sides(
            self.format,
            names,
            current,
            planned if planned is not None else current,
            ("current", "planned"),
        )
        if planned is None:
            shown["planned"] = None
        return shown

    def reversibility(self, change: Change) -> str:
        return (
            f"Reversible: undo puts back only {', '.join(change.fields)} (every instance, "
            "with its parameters), only while they still hold what this job wrote; every "
            f"other line of the {self.noun} is kept as the server holds it then."
        )

    # -- the endpoint check on a test copy (docs/remote-contract.md) ---------------------
    # The check writes a fresh X-UNDOGATE-CHECK property and removes it again; the copy
    # counts as restored when every line reads as at the start (by property: a server
    # may have refolded or reordered it).

    def content_refusal(self, response: RemoteResponse) -> str | None:
        return content_refusal(response)

    def marker_request(self, copy: Resource, start: Snapshot, marker: str) -> ChangeRequest:
        return ChangeRequest(copy.id, set={CHECK_PROPERTY: marker})

    def shows_marker(
        self, copy: Resource, start: Snapshot, now: Snapshot, markers: Sequence[str]
    ) -> bool:
        found = snapshot_properties(now, self.format).get(CHECK_PROPERTY, ())
        return bool(found) and all(i.value in markers for i in found)

    def restored(self, copy: Resource, start: Snapshot, now: Snapshot) -> bool:
        fmt = self.format
        return every_property(document(text_of(now), fmt), fmt) == every_property(
            document(text_of(start), fmt), fmt
        )

    def restore_request(self, copy: Resource, start: Snapshot) -> ChangeRequest:
        kept = snapshot_properties(start, self.format).get(CHECK_PROPERTY)
        if not kept:
            return ChangeRequest(copy.id, remove=(CHECK_PROPERTY,))
        return ChangeRequest(copy.id, set={CHECK_PROPERTY: [i.to_json() for i in kept]})

    def create_attempt(
        self, copy: Resource, start: Snapshot, url: str, tag: ETag, marker: str
    ) -> ConditionalWrite:
        text = text_of(start)
        marked = rewrite(
            document(text, self.format), self.format, {CHECK_PROPERTY: (Instance(marker),)}
        )
        headers = {"Content-Type": start.media_type, "If-Match": tag.header}
        return ConditionalWrite("PUT", url, headers, marked.encode("utf-8"), tag.header)

    def restore_evidence(
        self, copy: Resource, start: Snapshot, back: Snapshot, ok: bool
    ) -> tuple[Evidence, str]:
        if ok:
            return {}, "every property reads as at the start"
        return {}, "a property differs from the start"

    def restore_by_hand(
        self,
        copy: Resource,
        start: Snapshot,
        now: Snapshot | None,
        keep: Callable[[bytes], Path | None],
    ) -> str:
        original = f"{start.size} bytes, {start.media_type}, {start.digest}"
        saved = keep(text_of(start).encode("utf-8"))
        where = f"; a copy is saved at {saved}" if saved is not None else ""
        return (
            f"restore the test copy by hand: PUT the original {self.format.name} object "
            f"({original}) back to {copy.url}, or remove its {CHECK_PROPERTY} property{where}"
        )


__all__ = ["PropertyDocumentAdapter", "put_document"]
