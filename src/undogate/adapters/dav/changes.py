"""Reading a contact or an event, planning a change of its properties, and telling
which side it shows: what a single resource and a collection's update share.

A snapshot's ``content`` is ``{"text": ...}``: the document exactly as read (a write is
made from it). A change's sides are ``{"properties": {NAME: [instance, ...]}}`` of the
touched properties present on that side (``content.Instance.to_json``); a touched
property missing from a side is absent there.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from ...errors import InvalidRequest, RemoteContractBreach
from ...jobs import ABSENT, SideValue
from ...jsonvalue import JsonObject, JsonValue
from ...resources import Limits, Resource
from ..base import Snapshot, media_type_is
from .content import (
    ContentError,
    Document,
    Properties,
    parse_document,
    properties_from_json,
    properties_to_json,
    property_name,
    rewrite,
    same,
    ungrouped,
)
from .formats import CHECK_PROPERTY, Format
from .settings import property_settings
from .values import check_dates, wanted


def parse_body(
    resource: Resource, fmt: Format, media_type: str, body: bytes, limits: Limits
) -> JsonValue:
    """A read's body as a snapshot's content.

    Raises:
        RemoteContractBreach: not the format's media type, oversize, not UTF-8, or not one
            object of the format.
    """
    if not media_type_is(media_type, frozenset({fmt.media_type})):
        raise RemoteContractBreach(
            f"{resource.id} answered with media type {media_type[:60]!r}, not "
            f"{fmt.media_type} (with no charset or charset=utf-8)",
            resource=resource.id,
        )
    if len(body) > limits.max_document_bytes:
        raise RemoteContractBreach(
            f"{resource.id} is over the {limits.max_document_bytes}-byte limit",
            resource=resource.id,
        )
    try:
        text = body.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise RemoteContractBreach(
            f"{resource.id} is not valid UTF-8", resource=resource.id
        ) from None
    try:
        document(text, fmt)
    except ContentError as exc:
        raise RemoteContractBreach(
            f"{resource.id} is not a {fmt.name} object undogate can change: {exc}",
            resource=resource.id,
        ) from exc
    return {"text": text}


@lru_cache(maxsize=64)
def document(text: str, fmt: Format) -> Document:
    """The parsed document (parsed once per text: every guard asks again).

    Raises: ContentError."""
    return parse_document(text, fmt)


def text_of(snapshot: Snapshot) -> str:
    content = snapshot.content
    text = content.get("text") if isinstance(content, dict) else None
    return text if isinstance(text, str) else ""


def snapshot_properties(snapshot: Snapshot, fmt: Format) -> Properties:
    """The object's own properties as the snapshot shows them (none where it does not
    exist)."""
    if not snapshot.exists:
        return {}
    return document(text_of(snapshot), fmt).properties(fmt)


def side_properties(side: SideValue | None) -> Properties:
    if side is None or side is ABSENT:
        return {}
    return properties_from_json(side.get("properties"))


def properties_side(props: Properties, **more: JsonValue) -> JsonObject:
    return {"properties": properties_to_json(props), **more}


def touched_show(fields: Sequence[str], wanted_props: Properties, now: Properties) -> bool:
    """The touched properties hold exactly the wanted instances (absent: none)."""
    return all(same(wanted_props.get(n, ()), now.get(n, ())) for n in fields)


def allowed_names(resource: Resource, fmt: Format) -> tuple[str, ...]:
    """The properties a change of ``resource`` may name: its fields, and on a test copy
    the endpoint check's own marker and what its probe of a new object needs."""
    fields = property_settings(resource).fields
    if not resource.test_copy_of:
        return fields
    return tuple(dict.fromkeys([*fields, CHECK_PROPERTY, *fmt.required]))


def _name(resource: Resource, fmt: Format, given: str, allowed: Sequence[str]) -> str:
    """The property ``given`` names, known by ``content.property_name``; a grouped one
    (``item1.EMAIL``) is allowed where its property is.

    Raises: InvalidRequest."""
    name = property_name(given)
    grouped = name is not None and name != ungrouped(name)
    if name is None or ungrouped(name) not in allowed or (grouped and not fmt.groups):
        raise InvalidRequest(
            f"{given[:64]!r} is not a property {resource.id}'s fields allow "
            f"({', '.join(property_settings(resource).fields)})",
            resource=resource.id,
            field=given[:64],
        )
    return name


def wanted_properties(
    resource: Resource, fmt: Format, values: JsonObject, zones: Sequence[str] | None, member: str
) -> Properties:
    """The instances a change gives each property it sets, names in capitals.

    Raises: InvalidRequest (a property not allowed, named twice, or a bad value)."""
    allowed = allowed_names(resource, fmt)
    found: Properties = {}
    for given, value in values.items():
        name = _name(resource, fmt, given, allowed)
        if name in found:
            raise InvalidRequest(f"{name} is named twice in {member}", resource=resource.id)
        where = f"{member}.{given[:64]}"
        instances = wanted(fmt, name, value, where)
        check_dates(fmt, name, instances, zones, where)
        found[name] = instances
    return found


def plan_properties(
    resource: Resource,
    fmt: Format,
    text: str,
    sets: JsonObject,
    removes: Sequence[str],
    limits: Limits,
) -> tuple[tuple[str, ...], Properties, Properties]:
    """The touched properties and both sides of a change to the object in ``text``.

    Raises:
        InvalidRequest: a property not allowed or both set and removed, a bad value, a
            no-op, a result over the document limit, or one that would not read back as
            asked.
    """
    doc = document(text, fmt)
    after = wanted_properties(resource, fmt, sets, doc.timezones(), "set")
    allowed = allowed_names(resource, fmt)
    removed = [_name(resource, fmt, given, allowed) for given in removes]
    both = set(after) & set(removed)
    if both:
        raise InvalidRequest(f"{sorted(both)[0]} is both set and removed", resource=resource.id)
    if not after and not removed:
        raise InvalidRequest(
            f"a change to {resource.id} sets or removes a property", resource=resource.id
        )
    now = doc.properties(fmt)
    changing = [n for n, instances in after.items() if not same(instances, now.get(n, ()))]
    touched = tuple(dict.fromkeys([*changing, *(n for n in removed if n in now)]))
    if not touched:
        raise InvalidRequest(
            f"the change to {resource.id} is a no-op: its properties already hold these values",
            resource=resource.id,
        )
    before = {n: now[n] for n in touched if n in now}
    after = {n: after[n] for n in touched if n in after}
    written = rewrite(doc, fmt, {n: after.get(n, ()) for n in touched})
    check_written(resource, fmt, written, touched, after, limits)
    return touched, before, after


def check_written(
    resource: Resource,
    fmt: Format,
    text: str,
    touched: Sequence[str],
    goal: Properties,
    limits: Limits,
) -> None:
    """What a write would send fits the limit and reads back as planned: a value the
    format cannot carry as given is refused now, never found out by a read-back.

    Raises: InvalidRequest."""
    if len(text.encode("utf-8")) > limits.max_document_bytes:
        raise InvalidRequest(
            f"{resource.id} would be over the {limits.max_document_bytes}-byte limit",
            resource=resource.id,
        )
    try:
        back = parse_document(text, fmt).properties(fmt)
    except ContentError as exc:
        raise InvalidRequest(
            f"the change to {resource.id} would not make a {fmt.name} object ({exc})",
            resource=resource.id,
        ) from exc
    if not touched_show(touched, goal, back):
        raise InvalidRequest(
            f"the change to {resource.id} cannot be written as given: a value would not "
            "read back as it is (write TEXT as plain text; other values as the format "
            "writes them)",
            resource=resource.id,
        )


__all__ = [
    "allowed_names",
    "check_written",
    "document",
    "parse_body",
    "plan_properties",
    "properties_side",
    "side_properties",
    "snapshot_properties",
    "text_of",
    "touched_show",
    "wanted_properties",
]
