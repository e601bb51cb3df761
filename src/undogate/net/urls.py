"""Which object a resource URL names: RFC 3986 normalisation, for comparing URLs.

Quarantine and overlap checks are per resource, so one object mapped as two resources
defeats them. Two spellings that every server reads as the same object (``HTTPS://``
and ``https://``, ``%7e`` and ``~``, ``:443`` and no port, ``/a/./b`` and ``/a/b``)
have one ``normalised_url``; the config refuses a second resource with the same one.
The gateway never sends a normalised URL: it requests the URL as written. Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import re
import string
from urllib.parse import unquote, urlsplit

import idna

_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
# What a path may hold unescaped (RFC 3986 §3.3 pchar and "/"); anything else is sent
# percent-encoded as UTF-8, so it is compared that way too.
_PATH_SAFE = _UNRESERVED | frozenset("!$&'()*+,;=:@/")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _normalise_escapes(text: str, safe: frozenset[str]) -> str:
    """RFC 3986 §6.2.2.1-2: escapes in upper case, unreserved characters decoded; and
    (§2.1, RFC 3987 §3.1) a character that must be escaped escaped as its UTF-8 bytes,
    a ``%`` that starts no escape as ``%25``, as the HTTP client sends them."""
    out: list[str] = []
    pos = 0
    while pos < len(text):
        escape = _ESCAPE.match(text, pos)
        if escape:
            byte = int(escape.group(1), 16)
            out.append(chr(byte) if chr(byte) in _UNRESERVED else f"%{byte:02X}")
            pos = escape.end()
            continue
        ch = text[pos]
        out.append(ch if ch in safe else "".join(f"%{b:02X}" for b in ch.encode("utf-8")))
        pos += 1
    return "".join(out)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4: ``/a/b/c/./../../g`` is ``/a/g``."""
    rest = path
    out: list[str] = []
    while rest:
        if rest.startswith("../"):
            rest = rest[3:]
        elif rest.startswith("./"):
            rest = rest[2:]
        elif rest.startswith("/./") or rest == "/.":
            rest = "/" + rest[3:]
        elif rest.startswith("/../") or rest == "/..":
            rest = "/" + rest[4:]
            if out:
                out.pop()
        elif rest in (".", ".."):
            rest = ""
        else:
            end = rest.find("/", 1)
            end = len(rest) if end == -1 else end
            out.append(rest[:end])
            rest = rest[end:]
    return "".join(out)


def dot_segment(path: str) -> str | None:
    """The first segment of ``path`` that a server may read as ``.`` or ``..``, as
    written, or None. Percent-encoded dots count (``%2e``, ``%2E%2E``), and so does a
    dot segment with parameters (``..;x``, which servlet containers read as ``..``)."""
    for segment in path.split("/"):
        if unquote(segment).partition(";")[0] in (".", ".."):
            return segment
    return None


def _host(host: str) -> str:
    """The host as compared: lower case, IPv6 in its compressed form, a non-ASCII name
    in its IDNA 2008 A-label form (what the HTTP client sends)."""
    if ":" in host:
        try:
            return f"[{ipaddress.IPv6Address(host).compressed}]"
        except ValueError:
            return f"[{host}]"
    if not host.isascii():
        try:
            return idna.encode(host).decode("ascii")
        except idna.IDNAError:
            return host
    return host


def normalised_url(url: str) -> str:
    """``url`` in RFC 3986 §6.2.2 normal form: scheme and host in lower case, escapes
    normalised, dot segments removed, the scheme's default port dropped, an empty path
    as ``/``. User-info and a fragment are dropped (neither names the object). A URL
    that does not parse is its own normal form."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    scheme = parts.scheme.lower()
    netloc = _host(parts.hostname or "")
    try:
        port = parts.port
    except ValueError:  # not a port: compared as written
        port = None
        netloc += ":" + parts.netloc.rpartition(":")[2]
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        netloc += f":{port}"
    path = remove_dot_segments(_normalise_escapes(parts.path, _PATH_SAFE)) or "/"
    query = "?" + _normalise_escapes(parts.query, _PATH_SAFE | {"?"}) if parts.query else ""
    return f"{scheme}://{netloc}{path}{query}"


__all__ = ["dot_segment", "normalised_url", "remove_dot_segments"]
