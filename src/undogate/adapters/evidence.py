"""Identity evidence (docs/collections.md): the only ways two records are the same one.

``email``: trimmed, lower-cased, its local part in Unicode NFC, its domain in its IDNA 2008
ASCII form (UTS 46 mapping, non-transitional: ``faß.de`` is ``xn--fa-hia.de``, never
``fass.de``). ``domain``: lower-cased, the same IDNA form, with no scheme, ``www.``, path,
port or trailing dot. ``exact``: NFC, then byte-exact. A domain IDNA 2008 refuses gives
no evidence. Nothing else: name similarity, fuzzy matching and the like match nothing,
ever, and a config that asks for them is refused.
"""

from __future__ import annotations

import re
import unicodedata

import idna

from ..jsonvalue import JsonValue

EVIDENCE_KINDS = ("email", "domain", "exact")
_SCHEME_RE = re.compile(r"^[a-z][a-z0-9+.-]*://")


def _idna(host: str) -> str | None:
    # Python's own "idna" codec is IDNA 2003, which maps ß to ss: it would make
    # bob@faß.de the same person as bob@fass.de. The gateway's hosts are IDNA 2008.
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError:
        return None


def _email(text: str) -> str | None:
    local, at, domain = text.strip().lower().rpartition("@")
    if not at or not local or not domain:
        return None
    ascii_domain = _idna(domain.rstrip("."))
    return f"{unicodedata.normalize('NFC', local)}@{ascii_domain}" if ascii_domain else None


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
