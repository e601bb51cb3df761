"""The ways the contract server can be told to misbehave, and the faults armed right now.

A fault is armed for the next ``count`` matching requests to one path (or any path) and
is consumed by the request it fires on. Four families, by what consumes them:

- read faults (``weak_etag``, ``duplicate_keys``, ``no_etag``): a GET;
- stale-write faults (``ignore_if_match``: apply despite a stale If-Match;
  ``precondition_status:NNN``: refuse it with NNN instead of 412): a write whose
  If-Match does not match;
- write faults (``apply_then_drop``, ``apply_then_500``, ``apply_then_hang``, ``hang``,
  ``ok_without_apply``, ``status:NNN``): a write that passes validation and If-Match;
  ``answer_existing``: a collection's ``POST`` whose record the collection already holds
  (its id aside) creates nothing and is answered with that record, as a store that
  deduplicates creates does;
- two ways a server can get ``If-Match`` wrong that only the endpoint check's probes see
  (docs/remote-contract.md):

  - ``weak_if_match``: compare ``If-Match`` weakly, so ``W/"tag"`` matches the current
    ``"tag"`` and the write goes ahead (RFC 9110 requires the strong comparison; WsgiDAV
    4.x does this).
  - ``create_under_if_match``: a conditional write to a path where nothing exists creates
    it (RFC 9110: ``If-Match`` with a tag never matches a missing resource; WsgiDAV 4.x
    answers 201). A resource made this way can be deleted again with ``DELETE``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

import jsonpatch
import jsonpointer

from ..jsonvalue import JsonObject, dumps, loads, loads_object
from ..net.etag import ETag, parse_etag_list
from .resources import (
    MERGE_PATCH_MEDIA_TYPE,
    RECORD_MEDIA_TYPE,
    Kind,
    merge_patch,
    parse_media_type,
)

WEAK_IF_MATCH = "weak_if_match"
CREATE_UNDER_IF_MATCH = "create_under_if_match"
IF_MATCH_FAULTS = frozenset({WEAK_IF_MATCH, CREATE_UNDER_IF_MATCH})
READ_FAULTS = frozenset({"weak_etag", "duplicate_keys", "no_etag"})
ANSWER_EXISTING = "answer_existing"
WRITE_FAULTS = frozenset(
    {
        "apply_then_drop",
        "apply_then_500",
        "apply_then_hang",
        "hang",
        "ok_without_apply",
        ANSWER_EXISTING,
    }
)
APPLYING_FAULTS = ("apply_then_drop", "apply_then_500", "apply_then_hang")


def weakly_matches(if_match: str, current: ETag) -> bool:
    """RFC 9110 weak comparison of an ``If-Match`` value with the current tag."""
    try:
        tags = parse_etag_list(if_match)
    except ValueError:
        return False
    return tags is None or any(tag.opaque == current.opaque for tag in tags)


@dataclass(frozen=True)
class Created:
    """What a server that creates under ``If-Match`` stores for one request."""

    kind: Literal["record", "text"]
    body: bytes
    media_type: str
    document: JsonObject | None


def created_by(method: str, content_type: str, body: bytes) -> Created | None:
    """The resource a PATCH (a JSON Patch or a JSON Merge Patch applied to ``{}``) or a
    PUT (a record, or the text) would create at a missing path; ``None`` when the request
    cannot create one."""
    main = parse_media_type(content_type)[0]
    if method == "PUT" and main != RECORD_MEDIA_TYPE:
        return Created("text", body, content_type or "text/plain", None)
    if method not in ("PUT", "PATCH"):
        return None
    try:
        if method == "PUT":
            document: object = loads_object(body)
        elif main == MERGE_PATCH_MEDIA_TYPE:
            document = merge_patch({}, loads(body))
        else:
            operations = loads(body)
            patch = jsonpatch.JsonPatch(cast(list[dict[str, Any]], operations))
            document = patch.apply({}, in_place=False)
    except (  # JsonError is a ValueError
        jsonpatch.JsonPatchException,
        jsonpointer.JsonPointerException,
        KeyError,
        IndexError,
        TypeError,
        ValueError,
    ):
        return None
    if not isinstance(document, dict):
        return None
    record = cast(JsonObject, document)
    return Created(
        "record", dumps(record, sort_keys=False).encode("utf-8"), "application/json", record
    )


def duplicate_first_key(body: bytes) -> bytes:
    """The same record with its first member repeated at the end (a contract breach)."""
    document = loads_object(body)
    if not document:
        return b'{"_":0,"_":0}'
    key = next(iter(document))
    member = dumps({key: document[key]}, sort_keys=False)[1:-1]
    text = body.decode("utf-8")
    return (text[:-1] + "," + member + "}").encode("utf-8")


@dataclass(slots=True)
class Fault:
    name: str
    path: str | None
    remaining: int

    def matches(self, path: str) -> bool:
        return self.path is None or self.path == path


def is_precondition_fault(name: str) -> bool:
    """Faults consumed by a write whose If-Match is stale (all others need it to pass)."""
    return name == "ignore_if_match" or name.startswith("precondition_status:")


def _is_collection(path: str | None) -> bool:
    """``/collections/<name>`` (docs in ``collections``), not a record under it."""
    parts = (path or "").split("/")
    return len(parts) == 3 and parts[1] == "collections" and bool(parts[2])


def _valid_fault(name: str) -> bool:
    if name in READ_FAULTS or name in WRITE_FAULTS or name in IF_MATCH_FAULTS:
        return True
    if name == "ignore_if_match":
        return True
    prefix, sep, code = name.partition(":")
    valid_code = bool(sep) and code.isdigit() and 200 <= int(code) <= 599
    return prefix in ("status", "precondition_status") and valid_code


class ArmedFaults:
    """The faults waiting for their requests, in the order they were armed.

    Not locked itself: the contract server calls it under its one lock.
    """

    def __init__(self) -> None:
        self._faults: list[Fault] = []

    def arm(self, name: str, path: str | None, count: int) -> None:
        """Raises: ValueError: unknown fault, bad count or path."""
        if not _valid_fault(name):
            raise ValueError(f"unknown fault {name!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError("count must be a positive integer")
        if path is not None and not path.startswith("/"):
            raise ValueError("path must start with '/'")
        if name == ANSWER_EXISTING and not _is_collection(path):
            raise ValueError(f"{name} is armed on a collection's path: only its POST creates")
        self._faults.append(Fault(name, path, count))

    def clear(self) -> None:
        self._faults.clear()

    def listing(self) -> list[tuple[str, str | None, int]]:
        return [(f.name, f.path, f.remaining) for f in self._faults]

    def named(self, name: str, path: str) -> Fault | None:
        return next((f for f in self._faults if f.name == name and f.matches(path)), None)

    def precondition(self, path: str) -> Fault | None:
        for fault in self._faults:
            if is_precondition_fault(fault.name) and fault.matches(path):
                return fault
        return None

    def take_read(self, path: str, kind: Kind) -> str | None:
        for fault in self._faults:
            if fault.name not in READ_FAULTS or not fault.matches(path):
                continue
            if fault.name == "duplicate_keys" and kind != "record":
                continue
            self.consume(fault)
            return fault.name
        return None

    def peek_write(self, path: str) -> Fault | None:
        for fault in self._faults:
            if (
                fault.name not in READ_FAULTS
                and fault.name not in IF_MATCH_FAULTS
                and not is_precondition_fault(fault.name)
                and fault.matches(path)
            ):
                return fault
        return None

    def consume(self, fault: Fault) -> None:
        fault.remaining -= 1
        if fault.remaining <= 0:
            self._faults.remove(fault)
