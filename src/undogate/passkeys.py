"""WebAuthn, in the few verbs undogate needs (py_webauthn underneath; pure, no I/O):
the options a browser registers a passkey with, the check of that registration, and
the check of an assertion over a preview digest, online (with the sign count) or
offline (``ledger verify``, ``verify-receipt``). User verification is always required.

What leaves here is plain data: base64url strings, the assertion's four parts as the
ledger stores them with the confirmation (``AssertionParts``), and what an owner's
passkeys are managed with: the one-time code that enrols a first passkey
(``new_enrolment_code``, ``enrolment_code_sha256``) and the challenge a live passkey
signs to add or revoke one (``ActChallenge``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

# py_webauthn (and the cryptography it loads) is imported by the verbs below, when a
# passkey is used: a gateway or a CLI command that never sees one does not pay for it.
from .errors import InvalidRequest, PasskeyNotVerified

RP_NAME = "undogate"
#: How long a browser may wait for the person (a hint to the browser).
TIMEOUT_MS = 120_000
_MAX_CREDENTIAL_CHARS = 8192
#: An enrolment code: 120 random bits in base32, typed by a person in groups of four.
_ENROLMENT_BYTES = 15
_ENROLMENT_GROUP = 4


@dataclass(frozen=True)
class Registered:
    """A verified registration: what the ledger keeps of a passkey."""

    id: str  # the credential id, base64url
    public_key: str  # COSE, base64url
    sign_count: int


@dataclass(frozen=True)
class Addition:
    """A verified registration to keep under an owner, as the page named it and the
    relying party and origin it was made on."""

    registered: Registered
    label: str
    rp_id: str
    origin: str


@dataclass(frozen=True)
class ActChallenge:
    """What a page asks a live passkey to sign to add or revoke one: the challenge
    (base64url) and the expiry its document carries, which the form sends back."""

    challenge: str
    expires_at_ms: int


@dataclass(frozen=True)
class Approval:
    """A live passkey's approval of adding or revoking one, as a form sent it: the
    assertion (``PublicKeyCredential`` JSON text) and the expiry its page showed (None
    when the form carried none: refused)."""

    assertion: str
    expires_at_ms: int | None


@dataclass(frozen=True)
class AssertionParts:
    """An assertion as the ledger stores it with a confirmation (base64url each)."""

    credential_id: str
    authenticator_data: str
    client_data_json: str
    signature: str

    def as_json(self) -> dict[str, str]:
        return {
            "credential_id": self.credential_id,
            "authenticator_data": self.authenticator_data,
            "client_data_json": self.client_data_json,
            "signature": self.signature,
        }

    @property
    def challenge(self) -> bytes:
        """The challenge the browser says it signed (checked again by the signature)."""
        from webauthn.helpers import base64url_to_bytes, parse_client_data_json
        from webauthn.helpers.exceptions import WebAuthnException

        try:
            return bytes(
                parse_client_data_json(base64url_to_bytes(self.client_data_json)).challenge
            )
        except (WebAuthnException, ValueError, KeyError, TypeError):
            raise PasskeyNotVerified("the passkey's client data is not readable") from None

    def _credential(self) -> dict[str, Any]:
        return {
            "id": self.credential_id,
            "rawId": self.credential_id,
            "type": "public-key",
            "response": {
                "authenticatorData": self.authenticator_data,
                "clientDataJSON": self.client_data_json,
                "signature": self.signature,
            },
        }


def registration_options(
    *, rp_id: str, owner_id: str, label: str, existing: list[str], challenge: bytes
) -> str:
    """The options for ``navigator.credentials.create`` (JSON text) over ``challenge``."""
    from webauthn import generate_registration_options, options_to_json
    from webauthn.helpers.structs import (
        AuthenticatorSelectionCriteria,
        PublicKeyCredentialDescriptor,
        ResidentKeyRequirement,
        UserVerificationRequirement,
    )

    options = generate_registration_options(
        rp_id=rp_id,
        challenge=challenge,
        rp_name=RP_NAME,
        user_name=label,
        user_id=owner_id.encode(),
        user_display_name=label,
        timeout=TIMEOUT_MS,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
        exclude_credentials=[PublicKeyCredentialDescriptor(id=_bytes(c)) for c in existing],
    )
    return options_to_json(options)


def request_options(*, rp_id: str, challenge: bytes, credentials: list[str]) -> str:
    """The options for ``navigator.credentials.get`` over one preview digest (JSON)."""
    from webauthn import generate_authentication_options, options_to_json
    from webauthn.helpers.structs import (
        PublicKeyCredentialDescriptor,
        UserVerificationRequirement,
    )

    options = generate_authentication_options(
        rp_id=rp_id,
        challenge=challenge,
        timeout=TIMEOUT_MS,
        allow_credentials=[PublicKeyCredentialDescriptor(id=_bytes(c)) for c in credentials],
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    return options_to_json(options)


def verify_registration(
    credential: str, *, challenge: bytes, rp_id: str, origin: str
) -> Registered:
    """Raises: PasskeyNotVerified (with the reason), InvalidRequest (not a credential)."""
    from webauthn import verify_registration_response
    from webauthn.helpers import bytes_to_base64url
    from webauthn.helpers.exceptions import WebAuthnException

    try:
        verified = verify_registration_response(
            credential=_credential_json(credential),
            expected_challenge=challenge,
            expected_rp_id=rp_id,
            expected_origin=origin,
            require_user_verification=True,
        )
    except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
        raise PasskeyNotVerified(f"the passkey registration did not verify: {exc}") from None
    return Registered(
        id=bytes_to_base64url(verified.credential_id),
        public_key=bytes_to_base64url(verified.credential_public_key),
        sign_count=verified.sign_count,
    )


def assertion_parts(credential: str) -> AssertionParts:
    """The four parts of an assertion as the browser sent it (``PublicKeyCredential``
    JSON: id, response.authenticatorData, .clientDataJSON, .signature).

    Raises:
        InvalidRequest: it is not an assertion.
    """
    found = _credential_json(credential)
    response = found.get("response")
    parts = (
        found.get("id"),
        *(
            response.get(k) if isinstance(response, dict) else None
            for k in ("authenticatorData", "clientDataJSON", "signature")
        ),
    )
    if not all(isinstance(p, str) and p for p in parts):
        raise InvalidRequest("the passkey assertion lacks its id, data or signature")
    return AssertionParts(*(str(p) for p in parts))


def verify_assertion(
    parts: AssertionParts,
    *,
    challenge: bytes,
    rp_id: str,
    origin: str,
    public_key: str,
    sign_count: int,
) -> int:
    """Check the signature over ``challenge`` with user verification; returns the new
    sign count. Offline checks pass ``sign_count=0`` (the order is the chain's).

    Raises:
        PasskeyNotVerified: any check failed (the reason is in the message).
    """
    from webauthn import verify_authentication_response
    from webauthn.helpers.exceptions import WebAuthnException

    try:
        verified = verify_authentication_response(
            credential=parts._credential(),
            expected_challenge=challenge,
            expected_rp_id=rp_id,
            expected_origin=origin,
            credential_public_key=_bytes(public_key),
            credential_current_sign_count=sign_count,
            require_user_verification=True,
        )
    except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
        raise PasskeyNotVerified(f"the passkey approval did not verify: {exc}") from None
    return int(verified.new_sign_count)


def new_enrolment_code() -> str:
    """A fresh one-time enrolment code, as a person reads and types it
    (``ABCD-EFGH-...``)."""
    text = base64.b32encode(secrets.token_bytes(_ENROLMENT_BYTES)).decode("ascii")
    return "-".join(text[i : i + _ENROLMENT_GROUP] for i in range(0, len(text), _ENROLMENT_GROUP))


def enrolment_code_sha256(code: str) -> str:
    """The SHA-256 the ledger keeps of a code, however it was typed (case, spaces and
    dashes do not matter)."""
    typed = "".join(c for c in code.upper() if c.isascii() and c.isalnum())
    return hashlib.sha256(typed.encode("ascii")).hexdigest()


def _credential_json(text: str) -> dict[str, Any]:
    if len(text) > _MAX_CREDENTIAL_CHARS:
        raise InvalidRequest("the passkey credential is too large")
    try:
        found = json.loads(text)
    except ValueError:
        raise InvalidRequest("the passkey credential is not JSON") from None
    if not isinstance(found, dict):
        raise InvalidRequest("the passkey credential is not a JSON object")
    return found


def _bytes(b64: str) -> bytes:
    from webauthn.helpers import base64url_to_bytes

    try:
        return base64url_to_bytes(b64)
    except ValueError:
        raise InvalidRequest("not base64url") from None


__all__ = [
    "ActChallenge",
    "Addition",
    "Approval",
    "AssertionParts",
    "Registered",
    "assertion_parts",
    "enrolment_code_sha256",
    "new_enrolment_code",
    "registration_options",
    "request_options",
    "verify_assertion",
    "verify_registration",
]
