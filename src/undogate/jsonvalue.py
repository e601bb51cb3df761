"""Lossless JSON: numbers stay their exact text, duplicate keys are refused.

Records pass through undogate untouched: a 30-digit integer or a 34-digit decimal
read from a server is written back byte-exact in a PATCH body, stored verbatim in the
ledger and compared by value (so ``1.0`` equals ``1`` as RFC 6902 ``test`` requires,
while the text that goes on the wire is always the text that came in).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, TypeAlias

_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z")


class JsonError(ValueError):
    """Data that is not acceptable JSON; ``reason`` is a short stable word."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class JsonNumber:
    """A JSON number kept as its exact source text; equality is by numeric value."""

    __slots__ = ("_value", "text")

    def __init__(self, text: str) -> None:
        if not _NUMBER_RE.match(text):
            raise JsonError("malformed", f"not a JSON number: {text[:40]!r}")
        try:
            value = Decimal(text)
        except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid text
            raise JsonError("malformed", "not a JSON number") from exc
        self.text = text
        self._value = value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JsonNumber):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return f"JsonNumber({self.text!r})"

    def __deepcopy__(self, memo: dict[int, Any]) -> JsonNumber:
        return self

    def __copy__(self) -> JsonNumber:
        return self


JsonValue: TypeAlias = bool | str | JsonNumber | list["JsonValue"] | dict[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, JsonValue]


def _refuse_duplicates(pairs: list[tuple[str, JsonValue]]) -> JsonObject:
    obj: JsonObject = {}
    for key, value in pairs:
        if key in obj:
            raise JsonError("duplicate_key", f"duplicate key {key[:60]!r}")
        obj[key] = value
    return obj


def _refuse_constant(name: str) -> JsonValue:
    raise JsonError("malformed", f"{name} is not JSON")


def _check_strings(value: JsonValue) -> None:
    """Refuse lone surrogates (``"\\ud800"``): they cannot be written back as UTF-8."""
    stack: list[JsonValue] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            for key, sub in item.items():
                _check_text(key)
                stack.append(sub)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise JsonError("malformed", "a string holds an unpaired surrogate") from exc


def check_encodable(value: JsonValue) -> None:
    """Refuse values that cannot be written as UTF-8 (unpaired surrogates).

    Raises:
        JsonError: ``malformed``.
    """
    _check_strings(value)


def decode_utf8(data: bytes) -> str:
    """Strict UTF-8 (no BOM tolerance beyond what the bytes say)."""
    try:
        return data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise JsonError("invalid_utf8", f"not valid UTF-8 at byte {exc.start}") from exc


def loads(data: bytes | str) -> JsonValue:
    """Parse JSON losslessly.

    Raises:
        JsonError: invalid UTF-8, malformed JSON, NaN/Infinity, duplicate keys or
            unpaired surrogates.
    """
    text = decode_utf8(data) if isinstance(data, bytes) else data
    try:
        value: JsonValue = json.loads(
            text,
            object_pairs_hook=_refuse_duplicates,
            parse_int=JsonNumber,
            parse_float=JsonNumber,
            parse_constant=_refuse_constant,
        )
    except JsonError:
        raise
    except (ValueError, RecursionError) as exc:
        raise JsonError("malformed", f"malformed JSON: {exc}") from exc
    _check_strings(value)
    return value


def loads_object(data: bytes | str) -> JsonObject:
    """Parse a JSON document that must be an object.

    Raises:
        JsonError: as ``loads``, or ``not_object``.
    """
    value = loads(data)
    if not isinstance(value, dict):
        raise JsonError("not_object", "the JSON document is not an object")
    return value


def dumps(value: JsonValue, *, sort_keys: bool = True) -> str:
    """Compact JSON text; numbers are written exactly as they were read.

    With ``sort_keys`` (the default) the output is canonical: the same value always
    serialises to the same text, which is what size limits and digests are taken of.
    """
    parts: list[str] = []
    _dump(value, parts, sort_keys)
    return "".join(parts)


# The C string encoder behind json.dumps(..., ensure_ascii=False), without building an
# encoder per call: serialising a record calls it once per string.
_quote: Callable[[str], str] = json.encoder.encode_basestring


def _dump(value: JsonValue, out: list[str], sort_keys: bool) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, JsonNumber):
        out.append(value.text)
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _dump(item, out, sort_keys)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        keys = sorted(value) if sort_keys else list(value)
        for i, key in enumerate(keys):
            if i:
                out.append(",")
            out.append(_quote(key))
            out.append(":")
            _dump(value[key], out, sort_keys)
        out.append("}")
    else:
        raise TypeError(f"not a lossless JSON value: {type(value).__name__}")


def canonical_bytes(value: JsonValue) -> bytes:
    return dumps(value).encode("utf-8")


def canonical_size(value: JsonValue) -> int:
    return len(canonical_bytes(value))


def from_python(value: Any) -> JsonValue:
    """Convert plain Python data (ints, floats via repr, nested containers) to JsonValue."""
    if value is None or isinstance(value, (bool, str, JsonNumber)):
        return value
    if isinstance(value, int):
        return JsonNumber(str(value))
    if isinstance(value, float):
        return JsonNumber(json.dumps(value))
    if isinstance(value, (list, tuple)):
        return [from_python(v) for v in value]
    if isinstance(value, dict):
        return {str(k): from_python(v) for k, v in value.items()}
    raise TypeError(f"not JSON data: {type(value).__name__}")


def _unescape_token(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def escape_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def parse_pointer(pointer: str) -> list[str]:
    """Split an RFC 6901 JSON Pointer into unescaped tokens.

    Raises:
        JsonError: the pointer is not empty and does not start with ``/``.
    """
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise JsonError("bad_pointer", f"JSON Pointer must start with '/': {pointer!r}")
    return [_unescape_token(t) for t in pointer[1:].split("/")]


def resolve_record(document: JsonValue, pointer: str) -> JsonObject:
    """Follow ``pointer`` (object members only) to the record's fields.

    Raises:
        JsonError: the path is missing or does not lead to an object.
    """
    node = document
    for token in parse_pointer(pointer):
        if not isinstance(node, dict) or token not in node:
            raise JsonError("missing_record", f"no object at {pointer!r}")
        node = node[token]
    if not isinstance(node, dict):
        raise JsonError("not_object", f"the value at {pointer!r} is not an object")
    return node
