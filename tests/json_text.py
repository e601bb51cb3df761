"""The exact text of each member of a JSON object, for the tests that show a write kept
every byte it did not change (written apart from the gateway's own splicing, with the
standard library's decoder: each value is read to its end, and its span kept)."""

from __future__ import annotations

import json
from collections.abc import Sequence

_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def member_texts(body: bytes, path: Sequence[str] = ()) -> dict[str, str]:
    """Member name → its value's text, of the object at ``path`` (member names) in
    ``body``."""
    text = body.decode("utf-8")
    at = _skip(text, 0)
    for name in path:
        at = _members(text, at)[name][0]
    return {name: text[start:end] for name, (start, end) in _members(text, at).items()}


def _members(text: str, at: int) -> dict[str, tuple[int, int]]:
    assert text[at] == "{", text[at : at + 20]
    found: dict[str, tuple[int, int]] = {}
    at = _skip(text, at + 1)
    while text[at] != "}":
        name, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        assert text[at] == ":"
        start = _skip(text, at + 1)
        _, end = _DECODER.raw_decode(text, start)
        found[name] = (start, end)
        at = _skip(text, end)
        if text[at] == ",":
            at = _skip(text, at + 1)
    return found


def untouched(before: bytes, after: bytes, changed: set[str], path: Sequence[str] = ()) -> bool:
    """Every member outside ``changed`` is in both, with the same text."""
    old, new = member_texts(before, path), member_texts(after, path)
    keep = set(old) - changed
    return keep == set(new) - changed and all(old[k] == new[k] for k in keep)
