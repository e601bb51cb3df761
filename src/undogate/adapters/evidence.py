"""Identity evidence (SPEC §12): the only ways two records are the same one.

``email``: trimmed, lower-cased, its domain in IDNA (ASCII) form. ``domain``: lower-cased,
IDNA, with no scheme, ``www.``, path, port or trailing dot. ``exact``: NFC, then
byte-exact. Nothing else: name similarity, fuzzy matching and the like match nothing,
ever, and a config that asks for them is refused.
"""

from __future__ import annotations

import re
import unicodedata

from ..jsonvalue import JsonValue

EVIDENCE_KINDS = ("email", "domain", "exact")
_SCHEME_RE = re.compile(r"^[a-z][a-z0-9+.-]*://")


def _idna(host: str) -> str | None:
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return None


def _email(text: str) -> str | None:
    local, at, domain = text.strip().lower().rpartition("@")
    if not at or not local or not domain:
        return None
    ascii_domain = _idna(domain.rstrip("."))
    return f"{local}@{ascii_domain}" if ascii_domain else None


def _domain(text: str) -> str | None:
    host = _SCHEME_RE.sub("", text.strip().lower())
    host = re.split(r"[/?#]", host, maxsplit=1)[0]
    host = host.rpartition("@")[2]  # user-info is never part of a domain
    if host.startswith("["):
        return None
    host = host.partition(":")[0].rstrip(".")
    if host.startswith("www."):
        host = host[4:]
    return _idna(host) if host else None


def normalize(kind: str, value: JsonValue) -> str | None:
    """The evidence ``value`` gives under ``kind``; ``None`` when it gives none (not a
    string, empty, or not an email or a domain at all)."""
    if not isinstance(value, str) or not value.strip():
        return None
    if kind == "email":
        return _email(value)
    if kind == "domain":
        return _domain(value)
    if kind == "exact":
        return unicodedata.normalize("NFC", value)
    return None


__all__ = ["EVIDENCE_KINDS", "normalize"]
