"""Changing members of a JSON document in its text, leaving every other byte as read.

A whole-record ``PUT`` sends the document back as the server gave it, with only the
allow-listed fields changed: re-serializing it would rewrite what undogate never reviewed
(an escape, a number's spelling, spacing, key order). So the document's text is walked
with the standard library's own JSON scanner (``json.decoder``), which says where each
member's key and value begin and end, and only the changed members' bytes are replaced.
The text was already read and checked as JSON (``jsonvalue.loads``): duplicate keys,
bad UTF-8 and the like never reach here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...jsonvalue import JsonError, dumps

_WHITESPACE = re.compile(r"[ \t\n\r]*")
# Values are scanned for their end only: numbers stay text, nothing is built as float.
_SCANNER = json.JSONDecoder(parse_float=str, parse_int=str)


@dataclass(frozen=True)
class _Member:
    key: str
    start: int  # the key's opening quote
    value_start: int
    end: int  # just past the value


def _skip(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    return match.end() if match else at


def _members(text: str, at: int) -> tuple[list[_Member], int]:
    """The members of the object whose ``{`` is at ``at``, and where its ``}`` is.

    Raises:
        JsonError: not an object there (the text changed under us, or a bad pointer).
    """
    if text[at : at + 1] != "{":
        raise JsonError("not_object", "not a JSON object")
    members: list[_Member] = []
    pos = _skip(text, at + 1)
    if text[pos : pos + 1] == "}":
        return members, pos
    while True:
        if text[pos : pos + 1] != '"':
            raise JsonError("malformed", "a member name was expected")
        key, after_key = _SCANNER.raw_decode(text, pos)
        colon = _skip(text, after_key)
        if text[colon : colon + 1] != ":":
            raise JsonError("malformed", "':' was expected")
        value_start = _skip(text, colon + 1)
        try:
            _, end = _SCANNER.raw_decode(text, value_start)
        except ValueError as exc:
            raise JsonError("malformed", str(exc)) from exc
        members.append(_Member(key, pos, value_start, end))
        pos = _skip(text, end)
        if text[pos : pos + 1] == "}":
            return members, pos
        if text[pos : pos + 1] != ",":
            raise JsonError("malformed", "',' or '}' was expected")
        pos = _skip(text, pos + 1)


def _object_at(text: str, path: Sequence[str]) -> int:
    """Where the ``{`` of the object at ``path`` (object member names) is.

    Raises:
        JsonError: ``missing_record``: no object there.
    """
    at = _skip(text, 0)
    for token in path:
        members, _ = _members(text, at)
        found = next((m for m in members if m.key == token), None)
        if found is None or text[found.value_start : found.value_start + 1] != "{":
            raise JsonError("missing_record", f"no object at {token!r}")
        at = found.value_start
    return at


def set_members(text: str, path: Sequence[str], updates: Mapping[str, str | None]) -> str:
    """``text`` with the object at ``path`` given ``updates``: member name → the JSON
    text of its new value (added at the object's end where it is missing), or ``None``
    to remove it. Every other byte stays as it was.

    Raises:
        JsonError: no object at ``path``, or text that is not JSON.
    """
    for key, value in updates.items():
        at = _object_at(text, path)
        members, _ = _members(text, at)
        index = next((i for i, m in enumerate(members) if m.key == key), None)
        if index is None:
            if value is None:
                continue
            member = f"{dumps(key)}:{value}"
            if members:
                last = members[-1].end
                text = f"{text[:last]},{member}{text[last:]}"
            else:
                text = f"{text[: at + 1]}{member}{text[at + 1 :]}"
            continue
        found = members[index]
        if value is not None:
            text = f"{text[: found.value_start]}{value}{text[found.end :]}"
        elif index + 1 < len(members):  # up to the next member: its comma goes too
            text = text[: found.start] + text[members[index + 1].start :]
        elif index > 0:  # the last of several: the comma before it goes
            text = text[: members[index - 1].end] + text[found.end :]
        else:  # the only member
            text = text[: found.start] + text[found.end :]
    return text


__all__ = ["set_members"]
