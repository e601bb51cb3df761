"""Undo offered only where it works (SPEC §12).

Some undos are offered only once they were shown to work: deleting what a create made
(``UNDO_OF_CREATE``) and re-creating what a delete took (``RECREATE``). The latest
passing endpoint check of the resource under its current identity says which of them
its test copy verified (its evidence lists them); a reviewer then accepts that verified
undo once, a recorded ``undo_accepted`` event. Until both, such a change is
irreversible before the click: its preview says so and confirming it needs an explicit
acknowledgement.
"""

from __future__ import annotations

from ..adapters import adapter_for
from ..config import Resource
from ..errors import UndoNotVerified
from ..jobs import Actor, Change, UndoOffer
from ..jsonvalue import JsonValue
from ..ledger import Reader, Transaction
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
    if acceptance is not None and acceptance.detail.get("fingerprint") == resource.fingerprint:
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
    need = adapter_for(change.kind).undo_needs(change)
    if need is None:
        return True
    resource = gw.resource(change.resource_id)
    return gw.ledger.read(lambda tx: undo_offer(tx, resource)).offers(need)


def resource_undo_offer(gw: Context, resource_id: str) -> UndoOffer:
    """Raises: NotFound."""
    resource = gw.resource(resource_id)
    return gw.ledger.read(lambda tx: undo_offer(tx, resource))


def accept_verified_undo(gw: Context, actor: Actor, resource_id: str) -> UndoOffer:
    """Record a reviewer's acceptance of the undos the latest check verified.

    Raises:
        NotFound: no such resource.
        UndoNotVerified: no passing check under its current identity verified an undo.
    """
    resource = gw.resource(resource_id)

    def commit(tx: Transaction) -> None:
        offer = undo_offer(tx, resource)
        if not offer.verified:
            raise UndoNotVerified(
                f"no endpoint check verified an undo for {resource_id!r} on a test copy; run "
                "check-endpoint on a test copy of it first",
                resource=resource_id,
            )
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
    return gw.ledger.read(lambda tx: undo_offer(tx, resource))
