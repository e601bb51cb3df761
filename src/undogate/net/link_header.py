"""RFC 8288 ``Link`` header fields: the links a response announces, under which relation
types.

Read the way the RFC's Appendix B reads them: a parameter value may be a quoted string
holding ``,`` and ``;``; whitespace may surround ``;`` and ``=``; ``rel`` holds one or
more relation types separated by spaces, compared case-insensitively; only the first
``rel`` of a link counts. One difference: where that algorithm would stop part-way and
keep the links read so far, a field value that is not a list of links is refused whole,
since what follows the fault may itself be a link.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

_OWS = " \t"


@dataclass(frozen=True)
class Link:
    target: str  # the URI-Reference as written, unresolved
    relations: frozenset[str]  # lower-cased relation types


def parse_links(field_values: Iterable[str]) -> list[Link]:
    """Every link in the ``Link`` fields of one response, in order.

    Raises:
        ValueError: a field value is not a comma-separated list of link-values.
    """
    links: list[Link] = []
    for value in field_values:
        links.extend(_links(value))
    return links


def _skip(text: str, pos: int, chars: str = _OWS) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _until(text: str, pos: int, stops: str) -> int:
    while pos < len(text) and text[pos] not in stops:
        pos += 1
    return pos


def _links(text: str) -> list[Link]:
    links: list[Link] = []
    pos = 0
    while True:
        pos = _skip(text, pos, _OWS + ",")  # a list may hold empty elements (RFC 9110 §5.6.1)
        if pos == len(text):
            return links
        if text[pos] != "<":
            raise ValueError(f"a Link value starts with {text[pos]!r}, not '<'")
        end = text.find(">", pos + 1)
        if end == -1:
            raise ValueError("a Link target has no closing '>'")
        target = text[pos + 1 : end]
        params, pos = _params(text, end + 1)
        rel = next((value for name, value in params if name == "rel"), "")
        relations = frozenset(t.lower() for t in rel.replace("\t", " ").split(" ") if t)
        links.append(Link(target, relations))


def _params(text: str, pos: int) -> tuple[list[tuple[str, str]], int]:
    """The parameters after one link's target, and where its list element ends."""
    params: list[tuple[str, str]] = []
    while True:
        pos = _skip(text, pos)
        if pos == len(text) or text[pos] == ",":
            return params, pos
        if text[pos] != ";":
            raise ValueError(f"a Link parameter starts with {text[pos]!r}, not ';'")
        pos = _skip(text, pos + 1)
        end = _until(text, pos, _OWS + "=;,")
        name = text[pos:end].lower()
        pos = _skip(text, end)
        value = ""
        if pos < len(text) and text[pos] == "=":
            pos = _skip(text, pos + 1)
            if pos < len(text) and text[pos] == '"':
                value, pos = _quoted(text, pos + 1)
            else:
                end = _until(text, pos, ";,")
                value, pos = text[pos:end].rstrip(_OWS), end
        params.append((name, value))


def _quoted(text: str, pos: int) -> tuple[str, int]:
    """A quoted string's content (``pos`` just past its opening quote), and the position
    after its closing quote."""
    out: list[str] = []
    while pos < len(text):
        char = text[pos]
        if char == '"':
            return "".join(out), pos + 1
        if char == "\\":
            pos += 1
            if pos == len(text):
                break
            char = text[pos]
        out.append(char)
        pos += 1
    raise ValueError("a quoted Link parameter is not closed")


__all__ = ["Link", "parse_links"]
