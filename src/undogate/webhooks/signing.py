"""The Standard Webhooks signature (https://www.standardwebhooks.com): HMAC-SHA256 over
``{webhook-id}.{webhook-timestamp}.{body}`` with the endpoint's secret, sent as
``webhook-signature: v1,<base64>``. Pure."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format's prefix, not a secret
#: Standard Webhooks secrets are 24 to 64 random bytes.
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64


class BadSecret(ValueError):
    """The secret is not ``whsec_`` followed by the base64 of 24 to 64 bytes."""


def secret_key(secret: str) -> bytes:
    """The HMAC key a ``whsec_…`` secret holds.

    Raises:
        BadSecret: the secret is malformed (the message never repeats it).
    """
    if not secret.startswith(SECRET_PREFIX):
        raise BadSecret("a webhook secret starts with whsec_")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise BadSecret("a webhook secret is whsec_ followed by base64") from None
    if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
        raise BadSecret(
            f"a webhook secret holds {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes "
            f"(this one holds {len(key)})"
        )
    return key


def sign(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header value for one attempt."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


__all__ = ["SECRET_PREFIX", "BadSecret", "secret_key", "sign"]
