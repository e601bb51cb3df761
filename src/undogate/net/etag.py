"""RFC 9110 entity tags: parsing, strong comparison and ``If-Match`` lists."""

from __future__ import annotations

import re
from dataclasses import dataclass

# etagc = %x21 / %x23-7E / obs-text ; header values arrive latin-1 decoded.
_ENTITY_TAG_RE = re.compile(r'(W/)?"([\x21\x23-\x7e\x80-\xff]*)"')


@dataclass(frozen=True)
class ETag:
    opaque: str
    weak: bool = False

    @property
    def header(self) -> str:
        return f'{"W/" if self.weak else ""}"{self.opaque}"'

    def strong_equals(self, other: ETag) -> bool:
        """RFC 9110 §8.8.3.2 strong comparison: both strong, same opaque tag."""
        return not self.weak and not other.weak and self.opaque == other.opaque

    def __str__(self) -> str:
        return self.header


def parse_etag(value: str) -> ETag:
    """Parse one entity-tag.

    Raises:
        ValueError: the value is not a single well-formed entity-tag.
    """
    match = _ENTITY_TAG_RE.fullmatch(value.strip())
    if not match:
        raise ValueError(f"malformed entity-tag: {value[:80]!r}")
    return ETag(opaque=match.group(2), weak=match.group(1) is not None)


def parse_etag_list(value: str) -> list[ETag] | None:
    """Parse an ``If-Match``/``If-None-Match`` field value; ``None`` means ``*``.

    Raises:
        ValueError: a member is malformed.
    """
    text = value.strip()
    if text == "*":
        return None
    tags: list[ETag] = []
    pos = 0
    while pos < len(text):
        match = _ENTITY_TAG_RE.match(text, pos)
        if not match:
            raise ValueError(f"malformed entity-tag list: {value[:80]!r}")
        tags.append(ETag(opaque=match.group(2), weak=match.group(1) is not None))
        pos = match.end()
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text):
            if text[pos] != ",":
                raise ValueError(f"malformed entity-tag list: {value[:80]!r}")
            pos += 1
            while pos < len(text) and text[pos] in " \t,":
                pos += 1
    if not tags:
        raise ValueError("empty entity-tag list")
    return tags


def if_match_satisfied(header: str | None, current: ETag | None) -> bool:
    """Evaluate ``If-Match`` (RFC 9110 §13.1.1) with strong comparison."""
    if header is None:
        return True
    try:
        tags = parse_etag_list(header)
    except ValueError:
        return False
    if tags is None:
        return current is not None
    return current is not None and any(tag.strong_equals(current) for tag in tags)
