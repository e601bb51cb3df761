"""A software WebAuthn authenticator for tests that need no browser: an ES256 key, the
``none`` attestation, and assertions with or without user verification, byte for byte
as an authenticator builds them (the real checks in ``undogate.passkeys`` verify them).
The browser flows are tested with Chromium's virtual authenticator
(tests/test_passkeys_browser.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import struct
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn.helpers import encode_cbor

ORIGIN = "http://localhost:8080"
RP_ID = "localhost"
_UP, _UV, _AT = 0x01, 0x04, 0x40


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class SoftAuthenticator:
    origin: str = ORIGIN
    rp_id: str = RP_ID
    counts: bool = True  # keep a sign count (some authenticators always send 0)
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    credential_id: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    sign_count: int = 0

    def _auth_data(self, flags: int, extra: bytes = b"") -> bytes:
        if self.counts:
            self.sign_count += 1
        rp_hash = hashlib.sha256(self.rp_id.encode()).digest()
        return rp_hash + bytes([flags]) + struct.pack(">I", self.sign_count) + extra

    def register(self, challenge: bytes, *, verified: bool = True) -> str:
        """The ``navigator.credentials.create`` answer, as JSON text."""
        numbers = self.key.public_key().public_numbers()
        cose = encode_cbor(
            {
                1: 2,
                3: -7,
                -1: 1,
                -2: numbers.x.to_bytes(32, "big"),
                -3: numbers.y.to_bytes(32, "big"),
            }
        )
        attested = (
            bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id + cose
        )
        flags = _UP | _AT | (_UV if verified else 0)
        auth_data = self._auth_data(flags, attested)
        client = self._client("webauthn.create", challenge)
        attestation = encode_cbor({"fmt": "none", "attStmt": {}, "authData": auth_data})
        cid = b64(self.credential_id)
        return json.dumps(
            {
                "id": cid,
                "rawId": cid,
                "type": "public-key",
                "response": {"clientDataJSON": b64(client), "attestationObject": b64(attestation)},
                "clientExtensionResults": {},
            }
        )

    def approve(self, challenge: bytes, *, verified: bool = True, origin: str | None = None) -> str:
        """The ``navigator.credentials.get`` answer over ``challenge``, as JSON text."""
        auth_data = self._auth_data(_UP | (_UV if verified else 0))
        client = self._client("webauthn.get", challenge, origin)
        signature = self.key.sign(
            auth_data + hashlib.sha256(client).digest(), ec.ECDSA(hashes.SHA256())
        )
        cid = b64(self.credential_id)
        return json.dumps(
            {
                "id": cid,
                "rawId": cid,
                "type": "public-key",
                "response": {
                    "authenticatorData": b64(auth_data),
                    "clientDataJSON": b64(client),
                    "signature": b64(signature),
                },
                "clientExtensionResults": {},
            }
        )

    def _client(self, kind: str, challenge: bytes, origin: str | None = None) -> bytes:
        data: dict[str, Any] = {
            "type": kind,
            "challenge": b64(challenge),
            "origin": origin or self.origin,
            "crossOrigin": False,
        }
        return json.dumps(data).encode()
