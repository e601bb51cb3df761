"""The passkey step-up (docs/proof.md): a preview that touches a resource with
``require_passkey`` (or any preview, with ``server.require_passkey``) is confirmed
only with an assertion whose challenge is that preview's digest
(``proof.preview_digest``), from a live passkey of the confirming owner, with user
verification, used once. The approval is recorded, with its preview document and the
assertion, as a ``passkey_approved`` event in the chain before anything is sent.

The same check (``approve_in``) approves the other documents a passkey signs: the
acceptance of a verified undo (``undo_offer``), and adding or revoking a passkey
(``owner_passkeys``, where passkeys are registered and revoked).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence

from ..config import Resource
from ..errors import (
    InvalidRequest,
    PasskeyApprovalExpired,
    PasskeyRefused,
    PasskeyReplayed,
    PasskeyRequired,
    PasskeyRevoked,
    PasskeyUnknown,
    PasskeyWrongPreview,
)
from ..jobs import Actor, Change, ConditionalWrite, Job, Operation
from ..jsonvalue import JsonObject, from_python
from ..ledger import StoredPasskey, Transaction
from ..passkeys import AssertionParts, assertion_parts, verify_assertion
from ..proof.assertions import APPROVED
from ..proof.preview_digest import preview_digest, preview_document
from .context import Context

#: How far ahead of this process's clock the clock of another process of a shared ledger
#: (which may have made the page) may run.
CLOCK_SKEW_MS = 5_000


def required(gw: Context, targets: Iterable[Change]) -> bool:
    """Whether confirming these changes needs a passkey."""
    if gw.config.server.require_passkey:
        return True
    return any(gw.resource(c.resource_id).require_passkey for c in targets)


def resource_required(gw: Context, resource: Resource) -> bool:
    """Whether accepting a verified undo of ``resource`` needs a passkey."""
    return gw.config.server.require_passkey or resource.require_passkey


def approval_expiry(gw: Context) -> int:
    """Until when (milliseconds since the epoch) an approval asked for now holds: as
    long as a preview (``server.preview_ttl_s``)."""
    return round((gw.clock() + gw.config.server.preview_ttl_s) * 1000)


def refuse_expired(gw: Context, expires_at_ms: int | None) -> int:
    """The expiry an approval's document carried (its page showed it), while it holds.

    Raises: InvalidRequest (none given), PasskeyApprovalExpired (past, or later than any
    page of this gateway gives).
    """
    if expires_at_ms is None:
        raise InvalidRequest("a passkey approval needs the expiry its page or offer showed")
    now_ms = gw.clock() * 1000
    if expires_at_ms < now_ms:
        raise PasskeyApprovalExpired(
            "this passkey approval expired before it was sent; open the page again"
        )
    if expires_at_ms > approval_expiry(gw) + CLOCK_SKEW_MS:
        raise PasskeyApprovalExpired("this passkey approval carries an expiry no page gives")
    return expires_at_ms


def challenge_text(document: dict[str, object]) -> str:
    """The WebAuthn challenge (base64url of the digest) a page shows for ``document``."""
    digest = preview_digest(document)
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def preview_challenge(
    gw: Context,
    job: Job,
    operation: Operation,
    targets: Sequence[Change],
    writes: Sequence[ConditionalWrite],
    expires_at: float,
    token_hash: str,
) -> str | None:
    """The challenge a preview shows (base64url), when confirming it needs a passkey:
    the digest of the writes it planned, which a confirm sends only after re-reading
    the same versions (it refuses to send anything once a version moved)."""
    if not required(gw, targets):
        return None
    return challenge_text(_document(job, operation, writes, expires_at, token_hash))


def refuse_replay(gw: Context, assertion: str) -> AssertionParts:
    """Refuse an assertion whose challenge approved a confirm already.

    Raises: InvalidRequest (not an assertion), PasskeyNotVerified, PasskeyReplayed.
    """
    parts = assertion_parts(assertion)
    challenge = parts.challenge.hex()
    if gw.ledger.read(lambda tx: tx.passkey_challenge_used(challenge)):
        raise PasskeyReplayed("this passkey approval was used already; preview again")
    return parts


def approve(
    gw: Context,
    actor: Actor,
    job: Job,
    operation: Operation,
    requests: Sequence[ConditionalWrite],
    expires_at: float,
    token_hash: str,
    assertion: AssertionParts | None,
) -> None:
    """Check the assertion over this preview's digest and record the approval (and the
    passkey's sign count) in one write; nothing is recorded when it is refused.

    Raises:
        PasskeyRequired: no assertion. PasskeyUnknown, PasskeyRevoked,
        PasskeyReplayed, PasskeyWrongPreview, PasskeyNotVerified.
    """
    if assertion is None:
        raise PasskeyRequired(
            "this preview touches a resource that requires the reviewer's passkey: open "
            "the preview's page in a browser and confirm it there",
            job=job.id,
        )
    document = _document(job, operation, requests, expires_at, token_hash)
    gw.ledger.write(lambda tx: approve_in(tx, actor, document, assertion, job_id=job.id))


def approve_in(
    tx: Transaction,
    actor: Actor,
    document: dict[str, object],
    assertion: AssertionParts,
    *,
    job_id: str | None,
    signed_another: PasskeyRefused | None = None,
) -> StoredPasskey:
    """Inside ``tx``: check ``assertion`` over ``document``'s digest and record the
    approval (its challenge spent, the sign count, a ``passkey_approved`` event).
    Returns the passkey that approved it.

    Raises: PasskeyUnknown, PasskeyRevoked, PasskeyReplayed, PasskeyNotVerified;
    ``signed_another`` (by default PasskeyWrongPreview) when it signed another document.
    """
    digest = preview_digest(document)
    passkey = tx.passkey(assertion.credential_id)
    if passkey is None or passkey.owner_id != actor.owner_id:
        raise PasskeyUnknown("that passkey is not one of this owner's passkeys")
    if passkey.revoked_at is not None:
        raise PasskeyRevoked("that passkey was revoked; approve with another one")
    signed = assertion.challenge
    if tx.passkey_challenge_used(signed.hex()):
        raise PasskeyReplayed("this passkey approval was used already; preview again")
    if signed != digest:
        raise signed_another or PasskeyWrongPreview(
            "the passkey approved another preview, not this one; preview again",
            **({"job": job_id} if job_id is not None else {}),
        )
    count = verify_assertion(
        assertion,
        challenge=digest,
        rp_id=passkey.rp_id,
        origin=passkey.origin,
        public_key=passkey.public_key,
        sign_count=passkey.sign_count,
    )
    tx.record_passkey_use(
        challenge=digest.hex(), passkey_id=passkey.id, job_id=job_id, sign_count=count
    )
    tx.add_event(
        job_id=job_id,
        actor=actor.label,
        access_path=actor.access_path,
        operation=APPROVED,
        target=passkey.id,
        detail=_object(
            {"preview": document, "digest": digest.hex(), "assertion": assertion.as_json()}
        ),
    )
    return passkey


def _document(
    job: Job,
    operation: Operation,
    requests: Sequence[ConditionalWrite],
    expires_at: float,
    token_hash: str,
) -> dict[str, object]:
    return preview_document(
        job_id=job.id,
        operation=operation.value,
        requests=requests,
        expires_at=expires_at,
        token_hash=token_hash,
    )


def _object(value: object) -> JsonObject:
    found = from_python(value)
    assert isinstance(found, dict)
    return found
