"""Undo offered only where it works (docs/collections.md).

Some undos are offered only once they were shown to work: deleting what a create made
(``UNDO_OF_CREATE``) and re-creating what a delete took (``RECREATE``). The latest
passing endpoint check of the resource under its current identity says which of them
its test copy verified (its evidence lists them); a reviewer then accepts that verified
undo once, a recorded ``undo_accepted`` event. Until both, such a change is
irreversible before the click: its preview says so and confirming it needs an explicit
acknowledgement.

Where the resource requires a passkey (docs/proof.md), accepting needs one too: the offer
shows the challenge (the digest of ``proof.preview_digest.acceptance_document``), and
the approval is checked and recorded in the same write as the acceptance.
"""

from __future__ import annotations

from dataclasses import replace

from ..adapters import adapter_for
from ..config import Resource
from ..errors import PasskeyRequired, UndoNotVerified
from ..jobs import Actor, Change, UndoOffer
from ..jsonvalue import JsonValue
from ..ledger import Reader, Transaction
from ..proof.preview_digest import acceptance_document
from . import step_up
from .context import Context

UNDO_ACCEPTED = "undo_accepted"


def _names(value: JsonValue) -> frozenset[str]:
    return (
        frozenset(v for v in value if isinstance(v, str))
        if isinstance(value, list)
        else frozenset()
    )


def undo_offer(tx: Reader, resource: Resource) -> UndoOffer:
    check = tx.latest_check(resource.id, resource.fingerprint)
    verified = (
        _names(check.evidence.get("undos")) if check is not None and check.passed else frozenset()
    )
    accepted: frozenset[str] = frozenset()
    accepted_at: float | None = None
    acceptance = tx.latest_undo_acceptance(resource.id)
    # An acceptance belongs to the check it accepted: any later check (one that failed,
    # then one that passed again) asks for a new one.
    if (
        acceptance is not None
        and check is not None
        and acceptance.detail.get("check") == str(check.id)
        and acceptance.detail.get("fingerprint") == resource.fingerprint
    ):
        accepted = _names(acceptance.detail.get("undos")) & verified
        accepted_at = acceptance.at
    return UndoOffer(
        resource_id=resource.id,
        check_id=check.id if check is not None else None,
        checked_at=check.at if check is not None else None,
        verified=verified,
        accepted=accepted,
        accepted_at=accepted_at,
    )


def undo_offered(gw: Context, change: Change) -> bool:
    """Whether the change's undo is offered now (always, unless its kind says it needs
    a verified and accepted undo)."""
    resource = gw.resource(change.resource_id)
    if adapter_for(change.kind).undo_needs(change) is None:
        return True  # nothing to read (on PostgreSQL a read is a transaction of its own)
    return gw.ledger.read(lambda tx: offered_in(tx, resource, change))


def offered_in(tx: Reader, resource: Resource, change: Change) -> bool:
    """``undo_offered``, read inside ``tx``."""
    need = adapter_for(change.kind).undo_needs(change)
    return need is None or undo_offer(tx, resource).offers(need)


def _acceptance(
    tx: Reader, resource: Resource, offer: UndoOffer, expires_at_ms: int
) -> dict[str, object]:
    """The document a passkey signs to accept ``offer`` (its check verified something)
    until ``expires_at_ms``."""
    assert offer.check_id is not None
    latest = tx.latest_undo_acceptance(resource.id)
    return acceptance_document(
        resource_id=resource.id,
        fingerprint=resource.fingerprint,
        check_id=offer.check_id,
        undos=sorted(offer.verified),
        after_acceptance=latest.event_id if latest is not None else None,
        expires_at_ms=expires_at_ms,
    )


def resource_undo_offer(gw: Context, resource_id: str) -> UndoOffer:
    """The offer, with the passkey challenge of accepting it (and when that challenge
    expires) where one is needed.

    Raises: NotFound."""
    resource = gw.resource(resource_id)

    def offered(tx: Reader) -> UndoOffer:
        offer = undo_offer(tx, resource)
        if not offer.verified or not step_up.resource_required(gw, resource):
            return offer
        expires_at_ms = step_up.approval_expiry(gw)
        challenge = step_up.challenge_text(_acceptance(tx, resource, offer, expires_at_ms))
        return replace(offer, passkey_challenge=challenge, passkey_expires_at_ms=expires_at_ms)

    return gw.ledger.read(offered)


def accept_verified_undo(
    gw: Context,
    actor: Actor,
    resource_id: str,
    *,
    passkey_assertion: str | None = None,
    passkey_expires_at_ms: int | None = None,
) -> UndoOffer:
    """Record a reviewer's acceptance of the undos the latest check verified, with the
    passkey's approval of exactly that where the resource requires one (over the
    offer's document until ``passkey_expires_at_ms``, which the offer showed).

    Raises:
        NotFound: no such resource.
        UndoNotVerified: no passing check under its current identity verified an undo.
        InvalidRequest: an assertion without its expiry.
        PasskeyRequired, PasskeyRefused (its subclasses, ``PasskeyApprovalExpired``
        too): as a confirm's step-up.
    """
    resource = gw.resource(resource_id)
    required = step_up.resource_required(gw, resource)
    assertion = None
    if passkey_assertion is not None:
        assertion = step_up.refuse_replay(gw, passkey_assertion)
        passkey_expires_at_ms = step_up.refuse_expired(gw, passkey_expires_at_ms)

    def commit(tx: Transaction) -> None:
        offer = undo_offer(tx, resource)
        if not offer.verified:
            raise UndoNotVerified(
                f"no endpoint check verified an undo for {resource_id!r} on a test copy; run "
                "check-endpoint on a test copy of it first",
                resource=resource_id,
            )
        if required:
            if assertion is None:
                raise PasskeyRequired(
                    f"accepting the verified undo of {resource_id!r} needs the reviewer's "
                    "passkey: open the resource's undo page in a browser and accept it there",
                    resource=resource_id,
                )
            assert passkey_expires_at_ms is not None  # refuse_expired gave it
            document = _acceptance(tx, resource, offer, passkey_expires_at_ms)
            step_up.approve_in(tx, actor, document, assertion, job_id=None)
        undos: list[JsonValue] = [*sorted(offer.verified)]
        tx.add_event(
            job_id=None,
            actor=actor.label,
            access_path=actor.access_path,
            operation=UNDO_ACCEPTED,
            target=resource.id,
            detail={
                "check": str(offer.check_id),
                "fingerprint": resource.fingerprint,
                "undos": undos,
            },
        )

    gw.ledger.write(commit)
    # Read after the commit: where writes run at once (PostgreSQL) an event is chained,
    # so inserted, only at its write's commit, and a read inside the write misses it.
    return resource_undo_offer(gw, resource_id)
