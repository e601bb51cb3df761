"""Request bodies read losslessly (big numbers exact, no duplicate keys) and checked
member by member; ``parse_prepare`` is also how ``/mcp`` and ``undogate mcp`` read a
``prepare_changes`` call."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.exceptions import HTTPException
from starlette.requests import Request

from ..adapters import change_member
from ..errors import InvalidRequest
from ..jobs import AssertionKind, ChangeRequest, PrepareRequest
from ..jsonvalue import JsonObject, JsonValue
from .request_body import parse_object, read_body

# -- bodies --------------------------------------------------------------------------


async def json_body(request: Request, *, optional: bool = False) -> JsonObject:
    """The request body as a lossless JSON object (big numbers exact, no duplicate keys).

    Raises:
        InvalidRequest: not JSON or not an object. PayloadTooLarge: over the limit.
        HTTPException: 415, the wrong media type.
    """
    raw = await read_body(request.scope, request.receive)
    if not raw.strip():
        if optional:
            return {}
        raise InvalidRequest("a JSON object body is required")
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise HTTPException(415, "send the body as application/json")
    return parse_object(raw)


def _only(body: JsonObject, allowed: Sequence[str], where: str = "body") -> None:
    extra = sorted(set(body) - set(allowed))
    if extra:
        raise InvalidRequest(f"{where}: unknown member {extra[0]!r}", member=extra[0])


def _str(
    body: JsonObject, key: str, *, required: bool = False, max_len: int = 10_000
) -> str | None:
    value = body.get(key)
    if value is None:
        if required:
            raise InvalidRequest(f"{key} is required (a string)", member=key)
        return None
    if not isinstance(value, str) or len(value) > max_len:
        raise InvalidRequest(f"{key} must be a string of at most {max_len} characters", member=key)
    return value


def _bool(body: JsonObject, key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidRequest(f"{key} must be true or false", member=key)
    return value


# The members every change has; the others are its kind's (``adapters.change_member``).
CHANGE_COMMON = ("resource", "expected_version", "assertion_kind")


def _change_request(value: JsonValue, i: int) -> ChangeRequest:
    where = f"changes[{i}]"
    if not isinstance(value, dict):
        raise InvalidRequest(f"{where} must be an object")
    known = {name: change_member(name) for name in value if name not in CHANGE_COMMON}
    _only(value, [*CHANGE_COMMON, *(name for name, m in known.items() if m)], where)
    resource = _str(value, "resource", required=True, max_len=64)
    assert resource is not None
    members: JsonObject = {}
    for name, member in known.items():
        given = value[name]
        if member is not None and given is not None:
            members[name] = member.parse(given, where)
    kind = _str(value, "assertion_kind", max_len=20)
    try:
        assertion = AssertionKind(kind) if kind is not None else None
    except ValueError:
        raise InvalidRequest(
            f"{where}.assertion_kind must be one of " + ", ".join(k.value for k in AssertionKind)
        ) from None
    return ChangeRequest(
        resource,
        members,
        expected_version=_str(value, "expected_version", max_len=300),
        assertion_kind=assertion,
    )


def parse_prepare(body: JsonObject) -> PrepareRequest:
    """Raises: InvalidRequest."""
    _only(body, ("summary", "changes", "idempotency_key", "attribution_label", "session"))
    summary = _str(body, "summary", required=True)
    assert summary is not None
    changes = body.get("changes")
    if not isinstance(changes, list) or not changes:
        raise InvalidRequest("changes must be a non-empty list")
    if len(changes) > 64:
        raise InvalidRequest("too many changes")
    return PrepareRequest(
        summary=summary,
        changes=tuple(_change_request(c, i) for i, c in enumerate(changes)),
        idempotency_key=_str(body, "idempotency_key", max_len=1000),
        attribution_label=_str(body, "attribution_label", max_len=1000),
        session=_str(body, "session", max_len=1000),
    )


def _str_list(body: JsonObject, key: str) -> list[str] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidRequest(f"{key} must be a list of strings", member=key)
    return [str(v) for v in value]


__all__ = ["json_body", "parse_prepare"]
