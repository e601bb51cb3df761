"""Request bodies read losslessly (big numbers exact, no duplicate keys) and checked
member by member; ``parse_prepare`` is also how ``/mcp`` and ``undogate mcp`` read a
``prepare_changes`` call."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.exceptions import HTTPException
from starlette.requests import Request

from ..errors import InvalidRequest
from ..jobs import AssertionKind, ChangeRequest, PrepareRequest
from ..jsonvalue import JsonObject, JsonValue
from ..request_body import MAX_BODY_BYTES, parse_object, read_body

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


def _change_request(value: JsonValue, i: int) -> ChangeRequest:
    where = f"changes[{i}]"
    if not isinstance(value, dict):
        raise InvalidRequest(f"{where} must be an object")
    _only(
        value,
        (
            "resource",
            "set",
            "remove",
            "text",
            "expected_version",
            "assertion_kind",
            "id",
            "create",
            "delete",
            "upsert",
        ),
        where,
    )
    resource = _str(value, "resource", required=True, max_len=64)
    assert resource is not None
    set_ = value.get("set")
    if set_ is not None and not isinstance(set_, dict):
        raise InvalidRequest(f"{where}.set must be an object of field values")
    remove = value.get("remove") or []
    if not isinstance(remove, list) or not all(isinstance(r, str) for r in remove):
        raise InvalidRequest(f"{where}.remove must be a list of field names")
    for member in ("create", "upsert"):
        if value.get(member) is not None and not isinstance(value.get(member), dict):
            raise InvalidRequest(f"{where}.{member} must be an object of field values")
    create, upsert = value.get("create"), value.get("upsert")
    kind = _str(value, "assertion_kind", max_len=20)
    try:
        assertion = AssertionKind(kind) if kind is not None else None
    except ValueError:
        raise InvalidRequest(
            f"{where}.assertion_kind must be one of " + ", ".join(k.value for k in AssertionKind)
        ) from None
    return ChangeRequest(
        resource_id=resource,
        set=set_,
        remove=tuple(str(r) for r in remove),
        text=_str(value, "text", max_len=10 * MAX_BODY_BYTES),
        expected_version=_str(value, "expected_version", max_len=300),
        assertion_kind=assertion,
        record_id=_str(value, "id", max_len=128),
        create=create if isinstance(create, dict) else None,
        delete=_bool(value, "delete"),
        upsert=upsert if isinstance(upsert, dict) else None,
    )


def parse_prepare(body: JsonObject) -> PrepareRequest:
    """Raises: InvalidRequest."""
    _only(body, ("summary", "changes", "idempotency_key", "attribution_label"))
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
    )


def _str_list(body: JsonObject, key: str) -> list[str] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidRequest(f"{key} must be a list of strings", member=key)
    return [str(v) for v in value]


__all__ = ["json_body", "parse_prepare"]
