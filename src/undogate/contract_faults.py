"""Two ways a server can get ``If-Match`` wrong that only the endpoint check's probes see
(SPEC §11), for the contract server to imitate on demand.

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

from .etag import ETag, parse_etag_list
from .jsonvalue import JsonObject, dumps, loads

WEAK_IF_MATCH = "weak_if_match"
CREATE_UNDER_IF_MATCH = "create_under_if_match"
IF_MATCH_FAULTS = frozenset({WEAK_IF_MATCH, CREATE_UNDER_IF_MATCH})


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
    """The resource a PATCH (JSON Patch applied to ``{}``) or PUT (the text) would
    create at a missing path; ``None`` when the request cannot create one."""
    if method == "PUT":
        return Created("text", body, content_type or "text/plain", None)
    if method != "PATCH":
        return None
    try:
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
