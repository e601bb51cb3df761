"""The preview digest: what a passkey signs to approve one preview and nothing else.

The **preview document** names the job and the operation, every request the confirm
will send in order (method, URL, ``If-Match``, the SHA-256 of the body), when the
preview expires (integer milliseconds since the epoch) and the SHA-256 of the preview
token. Its **digest** is the SHA-256 of the document as canonical JSON (keys sorted,
no spaces, ASCII only with ``\\uXXXX`` escapes); those 32 bytes are the WebAuthn
challenge. The acceptance of a verified undo (docs/collections.md) has its own document, digested
the same way: the resource, its identity, the check and the undos it verified, and the
acceptance it follows; so do adding a passkey beside a live one (the new passkey, whole)
and revoking one, which a live passkey of the same owner approves. docs/proof.md spells
them out; pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ..jobs import ConditionalWrite

FORMAT = "undogate.preview/1"
ACCEPTANCE_FORMAT = "undogate.undo_acceptance/1"
ADDITION_FORMAT = "undogate.passkey_addition/1"
REVOCATION_FORMAT = "undogate.passkey_revocation/1"


def preview_document(
    *,
    job_id: str,
    operation: str,
    requests: Sequence[ConditionalWrite],
    expires_at: float,
    token_hash: str,
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "job_id": job_id,
        "operation": operation,
        "requests": [
            {
                "method": r.method,
                "url": r.url,
                "if_match": r.if_match,
                "body_sha256": hashlib.sha256(r.body).hexdigest(),
            }
            for r in requests
        ],
        "expires_at_ms": round(expires_at * 1000),
        "token_sha256": token_hash,
    }


def acceptance_document(
    *,
    resource_id: str,
    fingerprint: str,
    check_id: int,
    undos: Sequence[str],
    after_acceptance: int | None,
    expires_at_ms: int,
) -> dict[str, Any]:
    """What a passkey signs to accept the undos one endpoint check verified, until
    ``expires_at_ms``. ``after_acceptance`` (the id of the resource's latest acceptance
    event, or None) makes each acceptance's challenge new, so an approval never accepts
    twice."""
    return {
        "format": ACCEPTANCE_FORMAT,
        "resource_id": resource_id,
        "fingerprint": fingerprint,
        "check_id": check_id,
        "undos": sorted(undos),
        "after_acceptance": after_acceptance,
        "expires_at_ms": expires_at_ms,
    }


def addition_document(
    *,
    owner_id: str,
    credential_id: str,
    public_key: str,
    label: str,
    rp_id: str,
    origin: str,
    expires_at_ms: int,
) -> dict[str, Any]:
    """What a live passkey signs to add this one (its id and public key, name, relying
    party and origin) under ``owner_id``, until ``expires_at_ms``."""
    return {
        "format": ADDITION_FORMAT,
        "owner_id": owner_id,
        "credential_id": credential_id,
        "public_key": public_key,
        "label": label,
        "rp_id": rp_id,
        "origin": origin,
        "expires_at_ms": expires_at_ms,
    }


def revocation_document(*, owner_id: str, passkey_id: str, expires_at_ms: int) -> dict[str, Any]:
    """What a live passkey signs to revoke ``passkey_id`` of ``owner_id`` (itself or
    another), until ``expires_at_ms``."""
    return {
        "format": REVOCATION_FORMAT,
        "owner_id": owner_id,
        "passkey_id": passkey_id,
        "expires_at_ms": expires_at_ms,
    }


def canonical(document: Any) -> bytes:
    """The one encoding a digest is taken of."""
    text = json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )
    return text.encode("ascii")


def preview_digest(document: Any) -> bytes:
    """The 32 bytes a passkey signs (the WebAuthn challenge)."""
    return hashlib.sha256(canonical(document)).digest()


__all__ = [
    "ACCEPTANCE_FORMAT",
    "ADDITION_FORMAT",
    "FORMAT",
    "REVOCATION_FORMAT",
    "acceptance_document",
    "addition_document",
    "canonical",
    "preview_digest",
    "preview_document",
    "revocation_document",
]
