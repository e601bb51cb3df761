"""Re-checking passkey approvals offline (``ledger verify``, ``verify-receipt``).

A ``passkey_approved`` event carries the preview document, its digest and the
assertion; the ``passkey_registered`` event before it in the chain carries the public
key, relying party and origin. An approval holds when the digest is the document's,
the assertion names that passkey, and its signature (with user verification) is over
the digest, from that origin, under that key.
"""

from __future__ import annotations

import json
from typing import Any

from ..chain import ChainedRow, row_hash
from ..errors import UndogateError
from ..passkeys import AssertionParts, verify_assertion
from .preview_digest import preview_digest

APPROVED = "passkey_approved"
REGISTERED = "passkey_registered"
REVOKED = "passkey_revoked"


def approval_problem(row: ChainedRow, registration: ChainedRow | None) -> str:
    """Why an approval event does not hold ("" when it does)."""
    if registration is None or registration.operation != REGISTERED:
        return "its passkey approval names a passkey no earlier event registered"
    try:
        detail = json.loads(row.detail or "")
        key = json.loads(registration.detail or "")
        parts = AssertionParts(**detail["assertion"])
        if parts.credential_id != row.target or registration.target != row.target:
            return "its passkey approval's assertion names another passkey"
        digest = preview_digest(detail["preview"])
        if digest.hex() != detail["digest"]:
            return "its passkey approval's digest is not its preview's"
        verify_assertion(
            parts,
            challenge=digest,
            rp_id=str(key["rp_id"]),
            origin=str(key["origin"]),
            public_key=str(key["public_key"]),
            sign_count=0,
        )
    except UndogateError as exc:
        return f"its passkey approval does not verify ({exc.message})"
    except (ValueError, KeyError, TypeError):
        return "its passkey approval is not readable"
    return ""


class Approvals:
    """The passkey registrations seen so far in a walk of the chain, and the checks of
    the approvals after them."""

    def __init__(self) -> None:
        self.registrations: dict[str, ChainedRow] = {}

    def problem(self, row: ChainedRow) -> str:
        if row.operation == REGISTERED and row.target is not None:
            self.registrations.setdefault(row.target, row)
        if row.operation != APPROVED:
            return ""
        return approval_problem(row, self.registrations.get(row.target or ""))


def check_job_assertions(rows: list[ChainedRow], passkeys: dict[str, Any]) -> list[str]:
    """Why any approval in ``rows`` does not hold against the receipt's ``passkeys``."""
    problems: list[str] = []
    used: set[str] = set()
    for row in rows:
        if row.operation != APPROVED:
            continue
        used.add(row.target or "")
        registration = _registration(passkeys.get(row.target or ""))
        problem = approval_problem(row, registration)
        if problem:
            problems.append(f"the approval at {row.at}: {problem}")
    extra = sorted(set(passkeys) - used)
    if extra:
        problems.append(f"the receipt carries passkeys no approval uses: {', '.join(extra)}")
    return problems


def _registration(entry: Any) -> ChainedRow | None:
    """A receipt's registration entry, when it is whole and its own hash holds."""
    if not isinstance(entry, dict) or not isinstance(entry.get("event"), dict):
        return None
    try:
        row = ChainedRow(**entry["event"])
        if entry.get("hash") != row_hash(str(entry.get("prev_hash")), row):
            return None
    except (TypeError, ValueError):
        return None
    return row
