"""What the hash chain records of the rows outside it, and the checks that hold those rows
to it (docs/proof.md, "Rows the chain vouches for").

The chain covers the ``events`` table. The gateway also acts on rows outside it: a
change's two sides (an undo writes the before side back), a job's state, a credential,
an endpoint check. Each is recorded in the event that made or moved it, in a form these
functions compare:

- a change: its **seal**, the SHA-256 of its prepared columns, in the prepare event
  (``seals``, one per change, in index order);
- a job's state: the ``to_state`` of the last event that moved it (``jobs.JOB_MOVES``);
- a credential: its seal in its ``credential_create_*`` event, and a revocation as a
  ``credential_revoke`` (or ``revocation_kept_on_restore``) event;
- an endpoint check: its id, outcome and verified undos in its ``endpoint_check`` event.

Each check says why a row disagrees ("" when it agrees); the caller refuses
(``LedgerTampered``) or names the row (``undogate ledger verify``). Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from ..jobs import ABSENT, Change, SideValue
from ..jsonvalue import JsonObject, JsonValue, dumps

_CHANGE_TAG = "undogate.change/1"
_CREDENTIAL_TAG = "undogate.credential/1"
#: The event that issues a credential is this prefix and its kind.
CREDENTIAL_CREATED = "credential_create_"
#: The events that revoke a credential (the second: a restore carried it over).
CREDENTIAL_REVOKED = ("credential_revoke", "revocation_kept_on_restore")
ENDPOINT_CHECKED = "endpoint_check"


def _digest(body: list[object]) -> str:
    text = json.dumps(body, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _side(side: SideValue) -> str | None:
    return None if side is ABSENT else dumps(side)


def change_seal(change: Change) -> str:
    """The SHA-256 (hex) of what a prepare recorded of ``change`` that nothing after it
    changes: resource, kind, identity, fields, both sides (canonical JSON), media type,
    prepared version, assertion, and the target it named (None for a create that learns
    its record's id only from the server)."""
    return _digest(
        [
            _CHANGE_TAG,
            change.resource_id,
            change.kind,
            change.fingerprint,
            list(change.fields),
            _side(change.before),
            _side(change.after),
            change.media_type,
            change.prepared_etag,
            change.assertion_kind.value if change.assertion_kind else None,
            change.target,
        ]
    )


def changes_problem(changes: Sequence[Change], seals: JsonValue) -> str:
    """Why ``changes`` (one job's, in index order) are not what its prepare event sealed
    (``seals``: that event's ``seals`` member; None for a job prepared before seals,
    which has nothing to compare)."""
    if seals is None:
        return ""
    if not isinstance(seals, list) or len(seals) != len(changes):
        return (
            f"it holds {len(changes)} change(s) and its prepare event sealed "
            f"{len(seals) if isinstance(seals, list) else 'none'}: changes were added or removed"
        )
    for change, seal in zip(changes, seals, strict=True):
        if seal == change_seal(change):
            continue
        # A create names its record only once the server did; its seal has no target.
        if change.target is not None and seal == change_seal(replace(change, target=None)):
            continue
        return (
            f"change {change.index} ({change.resource_id}) does not match the seal its "
            "prepare event recorded: its before or after side (or another prepared "
            "column) was edited"
        )
    return ""


def state_problem(state: str, chained: str | None) -> str:
    """Why a job's ``state`` is not the one the last event that moved it recorded."""
    if chained is None:
        return "the chain holds no event that prepared it: it was inserted behind the ledger"
    if state != chained:
        return (
            f"its state is {state}, and the last event that moved it says {chained}: "
            "its state was edited"
        )
    return ""


class CredentialRow(Protocol):
    """A credential's columns as stored (``ledger.StoredCredential``)."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def owner_id(self) -> str: ...
    @property
    def agent_id(self) -> str | None: ...
    @property
    def scopes(self) -> tuple[str, ...]: ...
    @property
    def agents(self) -> tuple[str, ...] | None: ...
    @property
    def label(self) -> str: ...
    @property
    def key_hash(self) -> str: ...
    @property
    def created_at(self) -> float: ...
    @property
    def revoked_at(self) -> float | None: ...


def credential_seal(row: CredentialRow) -> str:
    """The SHA-256 (hex) of a credential's columns as issued (none of them ever changes;
    a revocation is an event of its own)."""
    return _digest(
        [
            _CREDENTIAL_TAG,
            row.id,
            row.kind,
            row.owner_id,
            row.agent_id,
            list(row.scopes),
            list(row.agents) if row.agents is not None else None,
            row.label,
            row.key_hash,
            row.created_at,
        ]
    )


def credential_problem(
    row: CredentialRow, issued: tuple[str, JsonObject] | None, revoked_in_chain: bool
) -> str:
    """Why a credential row is not what the chain issued (``issued``: the operation and
    detail of its creation event, None when there is none) and revoked."""
    if issued is None:
        return "the chain holds no event that issued it: it was inserted behind the ledger"
    operation, detail = issued
    if operation != CREDENTIAL_CREATED + row.kind:
        return (
            f"it is an {row.kind} credential, and the chain issued an "
            f"{operation.removeprefix(CREDENTIAL_CREATED)} one: the row was edited"
        )
    sealed = detail.get("seal")
    # Issued before seals: the event holds what the row may be compared with.
    as_issued = (
        sealed == credential_seal(row)
        if sealed is not None
        else (
            detail.get("owner") == row.owner_id
            and detail.get("agent") == row.agent_id
            and detail.get("scopes") == list(row.scopes)
            and detail.get("agents") == (list(row.agents) if row.agents is not None else None)
            and detail.get("label") == row.label
        )
    )
    if not as_issued:
        return "it does not match what its issuing event recorded: the row was edited"
    if revoked_in_chain and row.revoked_at is None:
        return "the chain revoked it, and its row says it is live: its revocation was undone"
    return ""


def check_problem(*, passed: bool, evidence: JsonObject, chained: JsonObject | None) -> str:
    """Why an endpoint check row is not what its ``endpoint_check`` event (``chained``:
    its detail, None when the chain holds none for it) recorded."""
    if chained is None:
        return "the chain holds no endpoint_check event for it: it was inserted behind the ledger"
    if chained.get("passed") is not passed:
        return "its outcome is not the one its endpoint_check event recorded: it was edited"
    if _names(chained.get("undos")) != _names(evidence.get("undos")):
        return "the undos it verified are not the ones its event recorded: it was edited"
    return ""


def _names(value: JsonValue) -> list[str]:
    return sorted(v for v in value if isinstance(v, str)) if isinstance(value, list) else []


__all__ = [
    "CREDENTIAL_CREATED",
    "CREDENTIAL_REVOKED",
    "ENDPOINT_CHECKED",
    "CredentialRow",
    "change_seal",
    "changes_problem",
    "check_problem",
    "credential_problem",
    "credential_seal",
    "state_problem",
]
