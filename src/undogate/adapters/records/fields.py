"""What every kind made of JSON records shares (``json_record``, ``json_collection``):
the allow-listed top-level fields, reading a record at its ``record_pointer``, planning
``set``/``remove`` on it, comparing fields, the JSON Patch that moves them, and how the
surfaces show them. Pure functions over field objects: the kinds decide what a side is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...errors import InvalidRequest, RemoteContractBreach
from ...jsonvalue import (
    JsonError,
    JsonObject,
    JsonValue,
    canonical_size,
    escape_token,
    loads,
    loads_object,
    parse_pointer,
    resolve_record,
)
from ...resources import Limits, Resource
from ..base import media_type_is
from .settings import record_settings

PATCH_MEDIA_TYPE = "application/json-patch+json"
JSON_MEDIA_TYPE = "application/json"
JSON_MEDIA_TYPES = frozenset({JSON_MEDIA_TYPE})
# In a listing's records pointer: every item of the array there.
EVERY_ITEM = "*"
_FIELD_RE = re.compile(r"[^\x00-\x1f]{1,128}")


def field_problems(resource: Resource, limits: Limits) -> list[tuple[str, str]]:
    """The allowlist and ``record_pointer`` rules every record kind shares."""
    problems: list[tuple[str, str]] = []
    settings = record_settings(resource)
    fields = settings.fields
    if not fields:
        problems.append(("fields", f"a {resource.kind} needs at least one field"))
    if len(fields) > limits.max_fields_per_resource:
        problems.append(("fields", f"at most {limits.max_fields_per_resource} fields"))
    if len(set(fields)) != len(fields):
        problems.append(("fields", "duplicate field names"))
    for j, name in enumerate(fields):
        if not _FIELD_RE.fullmatch(name):
            problems.append((f"fields[{j}]", "not a valid top-level field name"))
    if settings.record_pointer and not settings.record_pointer.startswith("/"):
        problems.append(("record_pointer", "must be empty or a JSON Pointer starting with '/'"))
    return problems


def _breach(resource: Resource, exc: JsonError) -> RemoteContractBreach:
    return RemoteContractBreach(
        f"{resource.id} sent unacceptable JSON ({exc.reason}): {exc}",
        resource=resource.id,
        reason=exc.reason,
    )


def parse_record(resource: Resource, media_type: str, body: bytes, limits: Limits) -> JsonObject:
    """The record a read returned: a JSON object, the fields at ``record_pointer``.

    Raises:
        RemoteContractBreach: not application/json, malformed, duplicate keys, oversize.
    """
    check_json_media_type(resource, media_type)
    try:
        document = loads_object(body)
        # The canonical form is never longer than the text it was parsed from, so only a
        # body over the limit needs measuring.
        limit = limits.max_document_bytes
        if len(body) > limit and canonical_size(document) > limit:
            raise RemoteContractBreach(
                f"{resource.id} is over the {limits.max_document_bytes}-byte limit",
                resource=resource.id,
            )
        return resolve_record(document, record_settings(resource).record_pointer)
    except JsonError as exc:
        raise _breach(resource, exc) from None


def parse_listing(resource: Resource, body: bytes, records: str | None = None) -> list[JsonObject]:
    """A collection listing: a JSON array of records, or an object holding one at
    ``record_pointer`` (``{"data": [...]}``); with ``records`` (a declared listing's
    pointer, ``*`` for every item of an array: ``/rows/*/doc``), the records there.

    Raises:
        RemoteContractBreach: malformed, duplicate keys, not a list of objects.
    """
    try:
        document = loads(body)
        if records is not None:
            document = _every(document, parse_pointer(records))
        elif isinstance(document, dict):
            for token in parse_pointer(record_settings(resource).record_pointer):
                inner = document.get(token) if isinstance(document, dict) else None
                if inner is None:
                    break
                document = inner
    except JsonError as exc:
        raise _breach(resource, exc) from None
    if not isinstance(document, list) or not all(isinstance(r, dict) for r in document):
        raise RemoteContractBreach(
            f"{resource.id}'s listing is not a list of records", resource=resource.id
        )
    return [r for r in document if isinstance(r, dict)]


def _every(node: JsonValue, tokens: Sequence[str]) -> JsonValue:
    """What ``tokens`` lead to, ``*`` standing for every item of an array (the results
    of each item in one list); None where a member is missing."""
    for i, name in enumerate(tokens):
        if name == EVERY_ITEM:
            if not isinstance(node, list):
                return None
            return [_every(item, tokens[i + 1 :]) for item in node]
        node = node.get(name) if isinstance(node, dict) else None
    return node


def check_json_media_type(resource: Resource, media_type: str) -> None:
    """Raises: RemoteContractBreach: not application/json (or with a charset but utf-8)."""
    if not media_type_is(media_type, JSON_MEDIA_TYPES):
        raise RemoteContractBreach(
            f"{resource.id} answered with media type {media_type[:60]!r}, not application/json",
            resource=resource.id,
        )


def check_allowed(resource: Resource, names: Sequence[str]) -> None:
    """Raises: InvalidRequest: a name is a path or is not allow-listed."""
    allowed = set(record_settings(resource).fields)
    for name in names:
        if name.startswith("/") or ("/" in name and name not in allowed):
            raise InvalidRequest(
                f"{name!r} is a path; only top-level fields can change",
                resource=resource.id,
                field=name,
            )
        if name not in allowed:
            raise InvalidRequest(
                f"field {name!r} is not allow-listed for {resource.id}",
                resource=resource.id,
                field=name,
                allowed=sorted(allowed),
            )


def plan_fields(
    resource: Resource,
    current: JsonObject,
    to_set: JsonObject,
    to_remove: Sequence[str],
    limits: Limits,
) -> tuple[tuple[str, ...], JsonObject, JsonObject]:
    """The touched fields and their two sides (a field absent on a side is missing from
    it), for ``set``/``remove`` on ``current``.

    Raises:
        InvalidRequest: nothing asked, fields not allow-listed, a field both set and
            removed, a no-op, or an oversize result.
    """
    removals = tuple(dict.fromkeys(to_remove))  # a name removed twice is one removal
    if not to_set and not removals:
        raise InvalidRequest(
            f"the change to {resource.id} sets or removes nothing", resource=resource.id
        )
    check_allowed(resource, [*to_set, *removals])
    both = set(to_set) & set(removals)
    if both:
        raise InvalidRequest(
            f"field {sorted(both)[0]!r} is both set and removed", resource=resource.id
        )
    before: JsonObject = {}
    after: JsonObject = {}
    touched: list[str] = []
    for name, value in to_set.items():
        if name in current and current[name] == value:
            continue
        touched.append(name)
        if name in current:
            before[name] = current[name]
        after[name] = value
    for name in removals:
        if name not in current:
            continue
        touched.append(name)
        before[name] = current[name]
    if not touched:
        raise InvalidRequest(
            f"the change to {resource.id} is a no-op: every value is already as asked",
            resource=resource.id,
        )
    updated = dict(current)
    for name in touched:
        if name in after:
            updated[name] = after[name]
        else:
            updated.pop(name, None)
    if canonical_size(updated) > limits.max_document_bytes:
        raise InvalidRequest(
            f"the changed {resource.id} would be over the {limits.max_document_bytes}-byte limit",
            resource=resource.id,
        )
    return tuple(touched), before, after


def fields_show(fields: Sequence[str], values: JsonObject, current: JsonObject) -> bool:
    """``current`` holds exactly ``values`` in each of ``fields`` (present or absent)."""
    for name in fields:
        if (name in values) != (name in current):
            return False
        if name in values and values[name] != current[name]:
            return False
    return True


def patch_ops(
    pointer: str, fields: Sequence[str], source: JsonObject, goal: JsonObject
) -> list[JsonValue]:
    """The JSON Patch from ``source`` to ``goal``: a ``test`` for every touched field
    that exists, then its replace, add or remove (docs/remote-contract.md)."""
    ops: list[JsonValue] = []
    for name in fields:
        path = f"{pointer}/{escape_token(name)}"
        if name in source:
            ops.append({"op": "test", "path": path, "value": source[name]})
        if name in goal:
            ops.append(
                {"op": "replace" if name in source else "add", "path": path, "value": goal[name]}
            )
        elif name in source:
            ops.append({"op": "remove", "path": path})
    return ops


def fields_diff(fields: Sequence[str], old: JsonObject, new: JsonObject) -> JsonObject:
    """Field by field, each side's value or ``{"absent": true}``."""
    out: JsonObject = {}
    for name in fields:
        out[name] = {
            "before": old.get(name) if name in old else {"absent": True},
            "after": new.get(name) if name in new else {"absent": True},
        }
    return out


def envelope(pointer: str, record: JsonObject) -> JsonObject:
    """The document that holds ``record`` at ``pointer`` (``/data`` → ``{"data": …}``)."""
    document: JsonObject = record
    for token in reversed(parse_pointer(pointer)):
        document = {token: document}
    return document


def differing_fields(fields: Sequence[str], start: JsonObject, now: JsonObject | None) -> list[str]:
    """The fields not as at the start (all of them when unknown)."""
    if now is None:
        return list(fields)
    return [f for f in fields if (f in start) != (f in now) or (f in start and start[f] != now[f])]


__all__ = [
    "JSON_MEDIA_TYPE",
    "PATCH_MEDIA_TYPE",
    "check_allowed",
    "differing_fields",
    "envelope",
    "field_problems",
    "fields_diff",
    "fields_show",
    "parse_listing",
    "parse_record",
    "patch_ops",
    "plan_fields",
]
