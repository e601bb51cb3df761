"""How the JSON kinds write a record in each dialect an endpoint may speak (docs/config.md).

``write`` says how a change of allow-listed fields goes out:

- ``json_patch`` (the default): ``PATCH`` with an RFC 6902 patch, a ``test`` for every
  touched field that exists, then its replace, add or remove;
- ``merge_patch``: ``PATCH`` with the RFC 7396 patch that turns the fields read into the
  planned ones (a removal is ``null``, so a ``null`` to store cannot be said:
  ``not_expressible``, at prepare, for the change and for its undo);
- ``put``: ``PUT`` of the whole document as read, only the touched fields changed, every
  other member's JSON text kept byte for byte (``jsontext``).

``version`` says where the version the write was planned on travels: by default in
``If-Match`` (the read's strong ETag); with ``version: {pointer}`` in the body, at that
pointer of the document (a ``test`` operation, a member of the merge patch, the member
of the document as read), and a ``DELETE`` carries it as ``?{delete_query}=``.
``stale_status`` is what the endpoint answers a stale one (412 by default).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import urlencode, urlsplit

from ...errors import NotExpressible, RemoteContractBreach
from ...jsonvalue import (
    JsonError,
    JsonObject,
    JsonValue,
    dumps,
    escape_token,
    loads,
    parse_pointer,
)
from ...net import RemoteResponse
from ...net.etag import ETag, parse_etag
from ...resources import Resource
from ..base import (
    REFUSAL_STATUSES,
    SUCCESS_STATUSES,
    ConditionalWrite,
    Guard,
    Snapshot,
    Verdict,
)
from .fields import JSON_MEDIA_TYPE, PATCH_MEDIA_TYPE, envelope, patch_ops
from .jsontext import set_members
from .settings import RecordSettings, record_settings

MERGE_PATCH_MEDIA_TYPE = "application/merge-patch+json"
# What each method's success may be answered with (the read-back decides the rest): a
# PUT may create (201, CouchDB answers every write so), a DELETE may be accepted (202).
SUCCESS_BY_METHOD: dict[str, frozenset[int]] = {
    "PATCH": frozenset({200, 204}),
    "PUT": frozenset({200, 201, 204}),
    "POST": frozenset({200, 201}),
    "DELETE": frozenset({200, 202, 204}),
}
# A version the gateway pins and sends back: a JSON string an entity-tag could hold.
_VERSION_RE = re.compile(r"[\x21\x23-\x7e]{1,256}")


class _Unsayable(Exception):
    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


_MISSING = object()


# -- the config ----------------------------------------------------------------------


def dialect_problems(resource: Resource, *, deletes: bool) -> list[tuple[str, str]]:
    """What is wrong with the resource's ``write``/``version``/``stale_status``
    (``deletes``: its kind sends DELETEs)."""
    settings = record_settings(resource)
    problems: list[tuple[str, str]] = []
    for j, status in enumerate(settings.stale_status):
        if not 400 <= status <= 499:
            problems.append((f"stale_status[{j}]", "a stale version is refused with a 4xx status"))
    if len(set(settings.stale_status)) != len(settings.stale_status):
        problems.append(("stale_status", "duplicate statuses"))
    version = settings.version
    if version is None:
        return problems
    try:
        tokens = parse_pointer(version.pointer)
        record = parse_pointer(settings.record_pointer)
    except JsonError:
        problems.append(("version.pointer", "must be a JSON Pointer starting with '/'"))
        return problems
    if tokens == record[: len(tokens)]:
        problems.append(
            (
                "version.pointer",
                "must not be the record_pointer or above it: a write would replace the "
                "version with the record",
            )
        )
    elif tokens[: len(record)] == record and tokens[len(record)] in settings.fields:
        problems.append(
            (
                "version.pointer",
                f"{tokens[len(record)]!r} is an allow-listed field: the version is the "
                "server's, no change may write it",
            )
        )
    if deletes and version.delete_query is None:
        problems.append(
            (
                "version.delete_query",
                "a collection whose version lives in the body needs delete_query: a DELETE "
                "has no body, so only its query can carry the version",
            )
        )
    if not deletes and version.delete_query is not None:
        problems.append(("version.delete_query", f"a {resource.kind} never sends a DELETE"))
    return problems


def version_member(settings: RecordSettings) -> str | None:
    """The record member that holds the version, where it lives inside the record
    (a member the server rewrites on every write: never compared, never sent back by a
    re-create)."""
    if settings.version is None:
        return None
    tokens = parse_pointer(settings.version.pointer)
    record = parse_pointer(settings.record_pointer)
    inside = tokens[: len(record)] == record and len(tokens) > len(record)
    return tokens[len(record)] if inside else None


# -- reading -------------------------------------------------------------------------


def record_guard(resource: Resource) -> Guard:
    settings = record_settings(resource)
    version = settings.version
    if version is None:
        where = "version in If-Match"
    else:
        where = f"version in the body at {version.pointer}"
        if version.delete_query is not None:
            where += f" (DELETE ?{version.delete_query}=)"
    statuses = ", ".join(str(s) for s in settings.stale_status)
    return Guard(
        in_body=version is not None,
        stale_statuses=frozenset(settings.stale_status),
        mode=f"{settings.write}, {where}, stale {statuses}",
    )


def body_version(resource: Resource, body: bytes) -> ETag:
    """The version at ``version.pointer`` of a read's document.

    Raises:
        RemoteContractBreach: no string there an entity-tag could hold.
    """
    settings = record_settings(resource)
    assert settings.version is not None, "asked only where the version lives in the body"
    pointer = settings.version.pointer
    try:
        node: JsonValue = loads(body)
    except JsonError as exc:
        raise RemoteContractBreach(
            f"{resource.id} sent unacceptable JSON ({exc.reason}): {exc}",
            resource=resource.id,
            reason=exc.reason,
        ) from None
    for token in parse_pointer(pointer):
        node = node.get(token) if isinstance(node, dict) else None
    if not isinstance(node, str) or not _VERSION_RE.fullmatch(node):
        raise RemoteContractBreach(
            f"{resource.id} carries no version at {pointer} that undogate can pin (a string "
            "of printable ASCII without quotes or spaces)",
            resource=resource.id,
        )
    return ETag(node)


# -- writing -------------------------------------------------------------------------


def update_write(
    resource: Resource,
    url: str,
    fields: Sequence[str],
    source: JsonObject,
    goal: JsonObject,
    snapshot: Snapshot,
) -> ConditionalWrite:
    """The write that moves ``fields`` of the record read in ``snapshot`` from ``source``
    to ``goal``, in the resource's dialect, carrying the snapshot's version.

    Raises:
        NotExpressible: a merge patch cannot say ``goal`` (prepare refuses such a change
            first, so only a check's own write could meet this).
    """
    settings = record_settings(resource)
    tag = snapshot.etag
    version = tag.opaque if settings.version is not None else None
    headers = {} if version is not None else {"If-Match": tag.header}
    if settings.write == "json_patch":
        ops = patch_ops(settings.record_pointer, fields, source, goal)
        if settings.version is not None:
            ops.insert(0, {"op": "test", "path": settings.version.pointer, "value": version})
        method, media_type, body = "PATCH", PATCH_MEDIA_TYPE, dumps(ops, sort_keys=False)
    elif settings.write == "merge_patch":
        try:
            patch = merge_patch_of(fields, source, goal)
        except _Unsayable as unsayable:
            raise _not_expressible(resource, unsayable.where, undo=False) from None
        document = _with_version(settings, envelope(settings.record_pointer, patch), version)
        method, media_type = "PATCH", MERGE_PATCH_MEDIA_TYPE
        body = dumps(document, sort_keys=False)
    else:
        method, media_type = "PUT", JSON_MEDIA_TYPE
        body = _whole_record(resource, settings, snapshot, fields, goal, version)
    return ConditionalWrite(
        method, url, {"Content-Type": media_type, **headers}, body.encode("utf-8"), tag.header
    )


def classify_record_write(write: ConditionalWrite, response: RemoteResponse) -> Verdict:
    """docs/remote-contract.md's table, with the successes each method may answer
    (``SUCCESS_BY_METHOD``)."""
    if response.status in REFUSAL_STATUSES:
        return Verdict.REFUSED
    if response.status in SUCCESS_BY_METHOD.get(write.method, SUCCESS_STATUSES):
        return Verdict.READ_BACK
    return Verdict.UNCERTAIN


def delete_write(resource: Resource, url: str, version: str) -> ConditionalWrite:
    """A DELETE conditional on ``version`` (an entity-tag's text, as a snapshot pins it):
    in ``If-Match``, or as the ``delete_query`` parameter where the version lives in the
    body."""
    settings = record_settings(resource)
    if settings.version is None:
        return ConditionalWrite("DELETE", url, {"If-Match": version}, b"", version)
    assert settings.version.delete_query is not None, "the config requires it of a collection"
    query = urlencode({settings.version.delete_query: parse_etag(version).opaque})
    joined = f"{url}{'&' if urlsplit(url).query else '?'}{query}"
    return ConditionalWrite("DELETE", joined, {}, b"", version)


def create_attempt(resource: Resource, url: str, tag: ETag, marker: str) -> ConditionalWrite:
    """A write of ``marker`` into the first allow-listed field at ``url`` (where nothing
    exists), conditional on ``tag`` the way the resource's writes are: the endpoint check
    asks that it creates nothing."""
    settings = record_settings(resource)
    first, pointer = settings.fields[0], settings.record_pointer
    version = tag.opaque if settings.version is not None else None
    headers = {} if version is not None else {"If-Match": tag.header}
    if settings.write == "json_patch":
        op: JsonValue = (
            {"op": "add", "path": pointer, "value": {first: marker}}
            if pointer
            else {"op": "add", "path": "/" + escape_token(first), "value": marker}
        )
        ops: list[JsonValue] = [op]
        if settings.version is not None:
            ops.insert(0, {"op": "test", "path": settings.version.pointer, "value": version})
        method, media_type, body = "PATCH", PATCH_MEDIA_TYPE, dumps(ops)
    else:
        document = _with_version(settings, envelope(pointer, {first: marker}), version)
        method = "PATCH" if settings.write == "merge_patch" else "PUT"
        media_type = MERGE_PATCH_MEDIA_TYPE if settings.write == "merge_patch" else JSON_MEDIA_TYPE
        body = dumps(document)
    headers["Content-Type"] = media_type
    return ConditionalWrite(method, url, headers, body.encode("utf-8"), tag.header)


def _with_version(
    settings: RecordSettings, document: JsonObject, version: str | None
) -> JsonObject:
    """``document`` with ``version`` at the version pointer (objects made on the way)."""
    if version is None or settings.version is None:
        return document
    *path, last = parse_pointer(settings.version.pointer)
    node = document
    for token in path:
        inner = node.get(token)
        if not isinstance(inner, dict):
            inner = {}
            node[token] = inner
        node = inner
    node[last] = version
    return document


def _whole_record(
    resource: Resource,
    settings: RecordSettings,
    snapshot: Snapshot,
    fields: Sequence[str],
    goal: JsonObject,
    version: str | None,
) -> str:
    """The document as read, with ``fields`` as in ``goal`` (absent: removed) and the
    version to carry at its pointer; every other byte as read."""
    try:
        text = snapshot.body.decode("utf-8")
        updates = {
            name: dumps(goal[name], sort_keys=False) if name in goal else None for name in fields
        }
        text = set_members(text, parse_pointer(settings.record_pointer), updates)
        carried = settings.version is not None and version is not None
        if carried and body_version(resource, snapshot.body).opaque != version:
            assert settings.version is not None and version is not None
            *path, last = parse_pointer(settings.version.pointer)
            text = set_members(text, path, {last: dumps(version)})
    except (UnicodeDecodeError, JsonError) as exc:
        raise RemoteContractBreach(
            f"{resource.id}'s record as read cannot be written back whole: {exc}",
            resource=resource.id,
        ) from None
    return text


# -- RFC 7396 ------------------------------------------------------------------------


def merge_patch_of(fields: Sequence[str], source: JsonObject, goal: JsonObject) -> JsonObject:
    """The RFC 7396 patch that turns ``fields`` of ``source`` into ``goal`` (a field
    missing from ``goal`` is removed).

    Raises:
        _Unsayable: ``goal`` holds a ``null`` that a merge patch would read as a removal.
    """
    patch: JsonObject = {}
    for name in fields:
        if name in goal:
            patch[name] = _merge_value(source.get(name, _MISSING), goal[name], name)
        elif name in source:
            patch[name] = None
    return patch


def _merge_value(old: object, new: JsonValue, where: str) -> JsonValue:
    if isinstance(new, dict) and isinstance(old, dict):
        # Objects merge member by member: only what differs, removals as null.
        out: JsonObject = {key: None for key in old if key not in new}
        for key, value in new.items():
            if key not in old or old[key] != value:
                out[key] = _merge_value(old.get(key, _MISSING), value, f"{where}.{key}")
        return out
    if _holds_null(new):
        raise _Unsayable(where)
    return new  # anything else is replaced whole, an array with whatever it holds


def _holds_null(value: JsonValue) -> bool:
    """A null a merge patch would apply as "remove": the value itself, or a member of an
    object reached through objects (arrays are replaced whole, nulls and all)."""
    if value is None:
        return True
    return isinstance(value, dict) and any(_holds_null(v) for v in value.values())


def check_expressible(
    resource: Resource, fields: Sequence[str], before: JsonObject, after: JsonObject
) -> None:
    """A change of a merge-patch resource must be sayable, and so must its undo.

    Raises:
        NotExpressible: naming the field, and whether the change or its undo cannot.
    """
    if record_settings(resource).write != "merge_patch":
        return
    for source, goal, undo in ((before, after, False), (after, before, True)):
        try:
            merge_patch_of(fields, source, goal)
        except _Unsayable as unsayable:
            raise _not_expressible(resource, unsayable.where, undo=undo) from None


def _not_expressible(resource: Resource, where: str, *, undo: bool) -> NotExpressible:
    what = (
        f"its undo would have to put back the null that {where} holds now"
        if undo
        else f"it would store a null in {where}"
    )
    return NotExpressible(
        f"{resource.id} is written with JSON Merge Patch (RFC 7396), where null means "
        f"remove: {what}, which a merge patch cannot say. Nothing was prepared",
        resource=resource.id,
        field=where,
        undo=undo,
    )


__all__ = [
    "MERGE_PATCH_MEDIA_TYPE",
    "SUCCESS_BY_METHOD",
    "body_version",
    "check_expressible",
    "classify_record_write",
    "create_attempt",
    "delete_write",
    "dialect_problems",
    "merge_patch_of",
    "record_guard",
    "update_write",
    "version_member",
]
