"""Exact text on a narrow screen: values and request bodies shown byte for byte, wrapped
only where a reader expects a break, long ones folded behind their length.

Pure. Wrapping never breaks a word or a number: the only break opportunities are
``<wbr>`` after JSON punctuation (``,`` ``:`` ``{`` ``[``) and URL separators (``/``
``?`` ``&``), and every 16 digits of a run of 32 hex digits or more (a hash, an
entity tag: Radicale's are 64, S3's 32, and no reader takes one in as a word), which
add no character to the text (what is copied is what is sent).
Every piece passes through ``invisibles.visible`` and is escaped, so a value stays inert
text with each invisible character marked.

A marker on a page is an element (``<span class="inv">``, drawn as a dark badge with
an accessible name), so an agent's literal text ``⟨U+200B⟩`` can never look like one.
Rendering leaves each marker as a placeholder made of two private-use characters
(``MARK_OPEN``/``MARK_CLOSE``); a value's own private-use characters are themselves
marked, so a placeholder can only come from the marker rule. ``markers_as_html`` turns
the finished page's placeholders into elements where the page has text, and into the
plain ``⟨U+XXXX⟩`` inside a tag or a title (never markup inside an attribute).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from markupsafe import Markup, escape

from ..invisibles import mark, visible
from ..jsonvalue import JsonNumber, JsonObject, JsonValue, dumps

#: A value longer than this (in characters of its JSON text) is folded behind its length.
LONG_VALUE = 120
#: How much of a folded value its summary shows.
GLIMPSE = 48
#: A body over this many bytes or lines is folded (the request line and headers are not).
LONG_BODY_BYTES = 1500
LONG_BODY_LINES = 30

_BREAK_AFTER = re.compile(r"(?<=[,:{\[/?&])")
_LONG_HEX = re.compile(r"[0-9A-Fa-f]{32,}")
HEX_CHUNK = 16
# A browser also breaks after a hyphen; inside exact text that reads as hyphenation, so a
# hyphenated word is kept whole.
_HYPHENATED = re.compile(r"[^\s]*-[^\s]*")
_WHOLE = Markup('<span class="whole">{}</span>')


MARK_OPEN = "\ue000"
MARK_CLOSE = "\ue001"
_PLACEHOLDER = re.compile("\ue000([0-9A-F]{4,6})\ue001")
_STRAY = re.compile("[\ue000\ue001]")
# A page's tags, and the elements whose content is text only (no element inside).
_TAG = re.compile(r"(<[^>]*>)")
_TEXT_ONLY = re.compile(r"<(/?)(title|option|textarea)\b", re.IGNORECASE)
_MARKER_HTML = '<span class="inv"><span class="sr">invisible character </span>U+{}</span>'


def placeholder(ch: str) -> str:
    """A marked character as the placeholder ``markers_as_html`` turns into a marker."""
    return f"{MARK_OPEN}{ord(ch):04X}{MARK_CLOSE}"


def shown_text(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` with each marked character as a placeholder (not yet markup)."""
    return visible(text, keep_newlines=keep_newlines, marker=placeholder)


def markers_as_html(page: str) -> str:
    """A rendered page with each placeholder as a marker element in text, and as plain
    ``⟨U+XXXX⟩`` inside a tag or a text-only element (a title, an option)."""
    if MARK_OPEN not in page:
        return page
    out: list[str] = []
    text_only = False
    for piece in _TAG.split(page):
        if piece.startswith("<"):
            found = _TEXT_ONLY.match(piece)
            if found:
                text_only = not found.group(1)
            out.append(_as_text(piece))
        elif text_only:
            out.append(_as_text(piece))
        else:
            shown = _PLACEHOLDER.sub(lambda m: _MARKER_HTML.format(m.group(1)), piece)
            out.append(_STRAY.sub(lambda m: mark(m.group(0)), shown))
    return "".join(out)


def _as_text(piece: str) -> str:
    shown = _PLACEHOLDER.sub(lambda m: mark(chr(int(m.group(1), 16))), piece)
    return _STRAY.sub(lambda m: mark(m.group(0)), shown)


def breakable(text: Any) -> Markup:
    """``text`` as inert markup that may wrap after punctuation or at a space, never
    inside a word (a hyphenated one included)."""
    shown = shown_text(str(text), keep_newlines=False)
    pieces = [cut for piece in _BREAK_AFTER.split(shown) for cut in _hex_cut(piece)]
    return Markup("<wbr>").join(_whole_words(piece) for piece in pieces)


def _hex_cut(piece: str) -> list[str]:
    """``piece`` cut every ``HEX_CHUNK`` digits inside each run of 32 or more hex
    digits, and nowhere else."""
    cuts = [0]
    for found in _LONG_HEX.finditer(piece):
        cuts.extend(range(found.start() + HEX_CHUNK, found.end(), HEX_CHUNK))
    cuts.append(len(piece))
    return [piece[a:b] for a, b in pairwise(cuts)]


def _whole_words(piece: str) -> Markup:
    out: list[Markup] = []
    pos = 0
    for found in _HYPHENATED.finditer(piece):
        out.append(escape(piece[pos : found.start()]))
        out.append(_WHOLE.format(found.group(0)))
        pos = found.end()
    out.append(escape(piece[pos:]))
    return Markup("").join(out)


def json_text(value: JsonValue) -> str:
    """A value as exact JSON text (numbers keep their digits, keys their order)."""
    return dumps(value, sort_keys=False)


def is_long(text: str) -> bool:
    return len(text) > LONG_VALUE


def glimpse(text: str) -> str:
    return text[:GLIMPSE]


def nested_rows(old: JsonValue, new: JsonValue) -> list[dict[str, Any]] | None:
    """When both sides of a field are objects: one row per member, so a reviewer sees
    which members change inside the one field (None otherwise)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None
    rows: list[dict[str, Any]] = []
    for key in [*old, *(k for k in new if k not in old)]:
        rows.append(
            {
                "key": key,
                "old": old.get(key),
                "old_present": key in old,
                "new": new.get(key),
                "new_present": key in new,
                "changes": (key in old) != (key in new) or old.get(key) != new.get(key),
            }
        )
    return rows


def with_nested(rows: Sequence[Mapping[str, Any]], old: str, new: str) -> list[dict[str, Any]]:
    """Field rows (``adapters.views.field_rows``) with ``nested`` member rows added where
    both sides are objects."""
    out: list[dict[str, Any]] = []
    for row in rows:
        shown = dict(row)
        both = row.get(f"{old}_present") and row.get(f"{new}_present")
        shown["nested"] = nested_rows(row.get(old), row.get(new)) if both else None
        out.append(shown)
    return out


def request_blocks(requests: Sequence[JsonObject]) -> list[dict[str, Any]]:
    """The planned requests (``views.request_view``) as the preview shows them: each
    with whether its body is long enough to fold."""
    blocks: list[dict[str, Any]] = []
    for request in requests:
        block: dict[str, Any] = dict(request)
        counted = request["body_bytes"]
        size = int(counted.text if isinstance(counted, JsonNumber) else str(counted))
        lines = request["body_lines"]
        count = len(lines) if isinstance(lines, list) else 0
        block["line_count"] = count
        block["long"] = size > LONG_BODY_BYTES or count > LONG_BODY_LINES
        blocks.append(block)
    return blocks


__all__ = [
    "MARK_CLOSE",
    "MARK_OPEN",
    "breakable",
    "glimpse",
    "is_long",
    "json_text",
    "markers_as_html",
    "nested_rows",
    "placeholder",
    "request_blocks",
    "shown_text",
    "with_nested",
]
