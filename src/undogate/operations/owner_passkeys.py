"""An owner's passkeys (docs/proof.md, "Who may add or revoke a passkey"):
registered and revoked here, each with its event, so the chain holds every public key
an approval is checked against, and every act that changed which keys count.

- **The first passkey** of an owner (none live) is enrolled only with a one-time code
  an operator prints on the server's host (``issue_enrolment``, ``undogate passkeys
  enrol``): random, kept as its SHA-256 only, good for ``ENROLMENT_TTL_S``, spent once,
  tied to one owner. An operator key alone, or a session signed in with it, cannot make
  one: a stolen key cannot enrol a passkey of its own and approve what needs one.
- **Once the owner has a live passkey**, adding another (``register``) or revoking one
  (``revoke``) needs the approval of a live passkey of that owner over exactly that act
  (the new passkey whole, or the one revoked) with an expiry (as long as a preview),
  spent once; it is a ``passkey_approved`` event just before the act's own, checked
  again offline by ``ledger verify``. An enrolment code adds nothing then.
- **A lost device**: ``issue_enrolment(replace=True)`` revokes every live passkey of the
  owner and makes a code, in one write, each revocation and the code an event.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import (
    EnrolmentCodeExpired,
    EnrolmentCodeRequired,
    EnrolmentCodeUnknown,
    EnrolmentCodeUsed,
    EnrolmentNotNeeded,
    InvalidRequest,
    NotFound,
    PasskeyApprovalRequired,
    PasskeyWrongAct,
)
from ..jobs import Actor
from ..jsonvalue import JsonObject, JsonValue
from ..ledger import StoredEnrolment, StoredPasskey, Transaction
from ..passkeys import (
    ActChallenge,
    Addition,
    Approval,
    AssertionParts,
    assertion_parts,
    enrolment_code_sha256,
    new_enrolment_code,
)
from ..proof.assertions import REGISTERED, REVOKED
from ..proof.preview_digest import addition_document, revocation_document
from ..views import number
from . import step_up
from .context import Context

#: How long an enrolment code holds: time to walk from the host to a browser.
ENROLMENT_TTL_S = 15 * 60.0
ENROLMENT_ISSUED = "passkey_enrolment_issued"


@dataclass(frozen=True)
class IssuedEnrolment:
    """A code made for ``owner_id``: shown once (the ledger keeps its SHA-256), good
    until ``expires_at``; ``revoked`` names the live passkeys a replacement revoked."""

    code: str
    owner_id: str
    expires_at: float
    revoked: tuple[str, ...]

    def to_json(self) -> JsonObject:
        return {
            "code": self.code,
            "owner_id": self.owner_id,
            "expires_at": number(self.expires_at),
            "revoked": [*self.revoked],
        }


def issue_enrolment(
    gw: Context, actor: Actor, owner_id: str, *, replace: bool = False
) -> IssuedEnrolment:
    """A one-time code that enrols ``owner_id``'s first passkey; with ``replace``, every
    live passkey of the owner is revoked first (a lost device), in the same write.

    Raises:
        NotFound: no live operator key is that owner.
        EnrolmentNotNeeded: the owner has a live passkey and ``replace`` is not set.
    """
    code = new_enrolment_code()
    now = gw.clock()
    enrolment = StoredEnrolment(
        code_sha256=enrolment_code_sha256(code),
        owner_id=owner_id,
        created_at=now,
        expires_at=now + ENROLMENT_TTL_S,
        used_at=None,
        passkey_id=None,
    )

    def record(tx: Transaction) -> tuple[str, ...]:
        owner = tx.credential(owner_id)
        if owner is None or owner.kind != "operator" or owner.revoked_at is not None:
            raise NotFound(f"no live operator key has the id {owner_id!r}", owner=owner_id)
        live = tuple(p.id for p in tx.passkeys(owner_id) if p.revoked_at is None)
        if live and not replace:
            raise EnrolmentNotNeeded(
                f"{owner_id} has {len(live)} live passkey(s): one of them approves another "
                "on the passkeys page; if they are lost, enrol with --replace, which "
                "revokes them",
                owner=owner_id,
            )
        for passkey_id in live:
            tx.revoke_passkey(passkey_id)
            _event(tx, actor, REVOKED, passkey_id, {"replaced_by_enrolment": True})
        tx.insert_passkey_enrolment(enrolment)
        revoked: list[JsonValue] = [*live]
        _event(
            tx,
            actor,
            ENROLMENT_ISSUED,
            owner_id,
            {
                "code_sha256": enrolment.code_sha256,
                "expires_at": number(enrolment.expires_at),
                "revoked": revoked,
            },
        )
        return live

    revoked = gw.ledger.write(record)
    return IssuedEnrolment(code, owner_id, enrolment.expires_at, revoked)


def act_challenge(gw: Context, owner_id: str, act: Addition | str) -> ActChallenge:
    """What a live passkey of ``owner_id`` signs, from now on, to add ``act`` (an
    ``Addition``) or to revoke it (a passkey id)."""
    expires_at_ms = step_up.approval_expiry(gw)
    if isinstance(act, Addition):
        document = _addition(owner_id, act, expires_at_ms)
    else:
        document = revocation_document(
            owner_id=owner_id, passkey_id=act, expires_at_ms=expires_at_ms
        )
    return ActChallenge(step_up.challenge_text(document), expires_at_ms)


def register(
    gw: Context,
    actor: Actor,
    addition: Addition,
    enrolment_code: str | None = None,
    approval: Approval | None = None,
) -> StoredPasskey:
    """Keep a verified registration under the actor's owner, with its event (which
    carries the public key, so the chain holds it): with an enrolment code when the
    owner has no live passkey, else with a live one's approval of exactly this addition.

    Raises:
        InvalidRequest: that credential is registered already (to anyone); an approval
            without its expiry.
        EnrolmentCodeRequired, EnrolmentCodeUnknown, EnrolmentCodeExpired,
            EnrolmentCodeUsed: a first passkey without a code that holds.
        PasskeyApprovalRequired: another passkey without an approval.
        PasskeyRefused (its subclasses): an approval that does not hold.
    """
    registered = addition.registered
    now = gw.clock()
    approved = _approved(gw, approval)
    passkey = StoredPasskey(
        id=registered.id,
        owner_id=actor.owner_id,
        label=addition.label,
        public_key=registered.public_key,
        sign_count=registered.sign_count,
        rp_id=addition.rp_id,
        origin=addition.origin,
        created_at=now,
        revoked_at=None,
    )

    def record(tx: Transaction) -> None:
        live = [p for p in tx.passkeys(actor.owner_id) if p.revoked_at is None]
        if tx.passkey(passkey.id) is not None:
            raise InvalidRequest("that passkey is registered already")
        how: JsonObject
        if live:
            if approved is None:
                raise PasskeyApprovalRequired(
                    "you have a live passkey: adding another needs its approval of this "
                    "one (an enrolment code enrols only a first passkey)"
                )
            document = _addition(actor.owner_id, addition, approved[1])
            approver = step_up.approve_in(
                tx,
                actor,
                document,
                approved[0],
                job_id=None,
                signed_another=PasskeyWrongAct(
                    "the passkey approved adding another passkey, not this one; add it again"
                ),
            )
            how = {"approved_by": approver.id}
        else:
            how = {"enrolment_code_sha256": _spend(tx, passkey, enrolment_code, now)}
        tx.insert_passkey(passkey)
        _event(
            tx,
            actor,
            REGISTERED,
            passkey.id,
            {
                "owner_id": passkey.owner_id,
                "label": passkey.label,
                "public_key": passkey.public_key,
                "rp_id": passkey.rp_id,
                "origin": passkey.origin,
                **how,
            },
        )

    gw.ledger.write(record)
    return passkey


def revoke(gw: Context, actor: Actor, passkey_id: str, approval: Approval | None) -> None:
    """Revoke one of the owner's live passkeys, with the approval of a live passkey of
    the owner (itself, or another) over exactly this revocation.

    Raises:
        NotFound: not one of the owner's live passkeys.
        InvalidRequest: an approval without its expiry.
        PasskeyApprovalRequired: no approval. PasskeyRefused (its subclasses): an
            approval that does not hold.
    """
    approved = _approved(gw, approval)

    def record(tx: Transaction) -> None:
        live = {p.id for p in tx.passkeys(actor.owner_id) if p.revoked_at is None}
        if passkey_id not in live:
            raise NotFound("no live passkey of yours has that id")
        if approved is None:
            raise PasskeyApprovalRequired(
                "revoking a passkey needs the approval of one of your live passkeys (the "
                "one revoked, or another); a lost device is replaced on the server's host "
                "with `undogate passkeys enrol --replace`"
            )
        document = revocation_document(
            owner_id=actor.owner_id, passkey_id=passkey_id, expires_at_ms=approved[1]
        )
        approver = step_up.approve_in(
            tx,
            actor,
            document,
            approved[0],
            job_id=None,
            signed_another=PasskeyWrongAct(
                "the passkey approved another revocation, not this one; revoke it again"
            ),
        )
        tx.revoke_passkey(passkey_id)
        _event(tx, actor, REVOKED, passkey_id, {"approved_by": approver.id})

    gw.ledger.write(record)


def _approved(gw: Context, approval: Approval | None) -> tuple[AssertionParts, int] | None:
    """An approval's assertion and the expiry its page gave, when one came and holds.

    Raises: InvalidRequest (not an assertion, or no expiry), PasskeyApprovalExpired."""
    if approval is None:
        return None
    expires_at_ms = step_up.refuse_expired(gw, approval.expires_at_ms)
    return assertion_parts(approval.assertion), expires_at_ms


def _spend(tx: Transaction, passkey: StoredPasskey, code: str | None, now: float) -> str:
    """Spend the owner's enrolment code on ``passkey``, when it holds; its SHA-256.

    Raises: EnrolmentCodeRequired, EnrolmentCodeUnknown, EnrolmentCodeExpired,
    EnrolmentCodeUsed."""
    owner_id = passkey.owner_id
    if not code:
        raise EnrolmentCodeRequired(
            "a first passkey is enrolled with a one-time code: an operator prints one on "
            f"the server's host with `undogate passkeys enrol --owner {owner_id}`"
        )
    found = tx.passkey_enrolment(enrolment_code_sha256(code))
    if found is None or found.owner_id != owner_id:
        raise EnrolmentCodeUnknown("that is not an enrolment code made for your key")
    if found.used_at is not None:
        raise EnrolmentCodeUsed("that enrolment code was used already; ask for a new one")
    if found.expires_at < now:
        raise EnrolmentCodeExpired("that enrolment code expired; ask for a new one")
    tx.spend_passkey_enrolment(found.code_sha256, passkey_id=passkey.id, at=now)
    return found.code_sha256


def _addition(owner_id: str, addition: Addition, expires_at_ms: int) -> dict[str, object]:
    return addition_document(
        owner_id=owner_id,
        credential_id=addition.registered.id,
        public_key=addition.registered.public_key,
        label=addition.label,
        rp_id=addition.rp_id,
        origin=addition.origin,
        expires_at_ms=expires_at_ms,
    )


def _event(tx: Transaction, actor: Actor, operation: str, target: str, detail: JsonObject) -> None:
    tx.add_event(
        job_id=None,
        actor=actor.label,
        access_path=actor.access_path,
        operation=operation,
        target=target,
        detail=detail,
    )


__all__ = [
    "ENROLMENT_ISSUED",
    "ENROLMENT_TTL_S",
    "IssuedEnrolment",
    "act_challenge",
    "issue_enrolment",
    "register",
    "revoke",
]
