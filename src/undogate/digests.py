"""The one SHA-256 helper: keys, session ids and preview tokens are kept only as their
digests, and fingerprints and evidence name content by digest. Pure; HMACs stay where
they sign (``web.sessions``)."""

from __future__ import annotations

import hashlib


def sha256_hex(data: str | bytes) -> str:
    """The SHA-256 of ``data`` as 64 lowercase hex digits (text as UTF-8).

    Raises:
        UnicodeEncodeError: text with a lone surrogate (encode such text yourself).
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def sha256_label(data: str | bytes) -> str:
    """``sha256:<hex>``, the form fingerprints and evidence digests take."""
    return "sha256:" + sha256_hex(data)


__all__ = ["sha256_hex", "sha256_label"]
