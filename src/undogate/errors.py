"""The one error tree of undogate.

Every refusal the product can give is an ``UndogateError`` with a stable ``code``
(part of the public contract: API bodies, MCP tool errors and CLI exit messages carry
it) and a human sentence. None of these knows about HTTP; each surface maps codes to
its own vocabulary in one place.

    UndogateError
    ├── ConfigError                 config_invalid         (carries every problem found)
    ├── InvalidRequest              invalid_request
    ├── NotExpressible              not_expressible        (the resource's write dialect
    │                                                       cannot say the planned values)
    ├── PayloadTooLarge             payload_too_large      (a request body over the limit)
    ├── TooManyStreams              too_many_streams       (open /mcp streams at their bound)
    ├── NotFound                    not_found
    ├── Forbidden                   forbidden
    ├── Unauthorized                unauthorized
    ├── LimitReached                limit_reached
    ├── QuotaExceeded               quota_exceeded         (an agent's or owner's fair share)
    ├── RateLimited                 rate_limited           (carries retry_after_s)
    ├── StaleVersion                stale_version
    ├── IdempotencyKeyReused        idempotency_key_reused
    ├── RemoteContractBreach        remote_contract_breach  (the endpoint broke the contract)
    ├── RemoteUnavailable           remote_unavailable      (a read failed: network, status)
    ├── BlockedAddress              blocked_address         (SSRF policy)
    ├── MissingToken                missing_token
    ├── TransitionNotAllowed        transition_not_allowed
    ├── PreviewExpired              preview_expired
    ├── PreviewUsed                 preview_used
    ├── ChangedSincePreview         changed_since_preview
    ├── Conflict                    conflict
    │   └── RewindBlocked           rewind_blocked         (a plan step is blocked: nothing
    │                                                       written unless skip_blocked)
    ├── Quarantined                 quarantined
    ├── LaterJobOverlaps            later_job_overlaps
    ├── ReconciliationBlocked       reconciliation_blocked
    ├── Ambiguous                   ambiguous              (an upsert's evidence matched
    │                                                       several records: nothing prepared)
    ├── IrreversibleNotAcknowledged irreversible_not_acknowledged
    ├── UndoNotVerified             undo_not_verified      (no verified undo to accept)
    ├── AgentStopped                agent_stopped          (a person stopped the agent)
    ├── PasskeyRequired             passkey_required       (confirm on the preview's page)
    │   └── PasskeyApprovalRequired passkey_approval_required (adding or revoking a passkey
    │                                                       needs one of the owner's own)
    ├── PasskeyRefused              passkey_refused        (an assertion that does not hold)
    │   ├── PasskeyNotVerified      passkey_not_verified   (no user verification, bad signature)
    │   ├── PasskeyWrongPreview     passkey_wrong_preview  (signed another preview)
    │   ├── PasskeyWrongAct         passkey_wrong_act      (signed another addition or
    │   │                                                   revocation of a passkey)
    │   ├── PasskeyApprovalExpired  passkey_approval_expired (what it signed expired)
    │   ├── PasskeyReplayed         passkey_replayed       (its challenge was used already)
    │   ├── PasskeyRevoked          passkey_revoked
    │   └── PasskeyUnknown          passkey_unknown        (not one of this owner's passkeys)
    ├── EnrolmentRefused            enrolment_refused      (a first passkey's one-time code)
    │   ├── EnrolmentCodeRequired   enrolment_code_required
    │   ├── EnrolmentCodeUnknown    enrolment_code_unknown (no code this owner was given)
    │   ├── EnrolmentCodeExpired    enrolment_code_expired
    │   └── EnrolmentCodeUsed       enrolment_code_used
    ├── EnrolmentNotNeeded          enrolment_not_needed   (the owner has a live passkey)
    ├── LedgerInUse                 ledger_in_use
    └── LedgerError                 ledger_error
        ├── LedgerDamaged           ledger_error       (SQLite found the file damaged)
        ├── LedgerTampered          ledger_tampered    (a row the gateway acts on disagrees
        │                                               with the chain: refused, nothing
        │                                               written)
        ├── LedgerBusy              ledger_busy        (other processes held SQLite's write
        │                                               lock past the busy wait: retry)
        ├── LedgerOnNetworkFilesystem ledger_network_filesystem (SQLite must be on a
        │                                               local disk)
        ├── LedgerMissing           ledger_missing     (deleted or emptied; the data dir
        │                                               remembers it existed)
        └── LedgerForeign           ledger_foreign     (not the ledger the data dir holds)
"""

from __future__ import annotations

import logging
from typing import Any

refusals_log = logging.getLogger("undogate.refusals")


class UndogateError(Exception):
    """Base of every domain error: a stable code, a sentence, JSON-safe details."""

    # A class attribute; only an error relayed from another gateway (``client.ApiError``)
    # sets it per instance.
    code: str = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


def log_refusal(exc: UndogateError, surface: str) -> None:
    """Tell the operator, once, that ``surface`` answered a client with a refusal: its
    code and sentence on one line. Never ``details`` (they may quote values); token
    values are scrubbed by ``redact``'s filter like on any log line."""
    sentence = " ".join(exc.message.splitlines())
    refusals_log.warning("refused [%s] on %s: %s", exc.code, surface, sentence)


class ConfigError(UndogateError):
    code = "config_invalid"

    def __init__(self, problems: list[tuple[str, str]], source: str = "config") -> None:
        self.problems = problems
        lines = "\n".join(f"  {path or '<root>'}: {msg}" for path, msg in problems)
        count = len(problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(
            f"{source}: {count} {noun}:\n{lines}",
            problems=[{"path": p, "message": m} for p, m in problems],
        )


class InvalidRequest(UndogateError):
    code = "invalid_request"


class NotExpressible(UndogateError):
    """A change whose values (or whose undo's) the resource's write dialect cannot say:
    RFC 7396 merge patch reads a ``null`` as "remove", so it can store no ``null``."""

    code = "not_expressible"


class PayloadTooLarge(UndogateError):
    code = "payload_too_large"


class TooManyStreams(UndogateError):
    code = "too_many_streams"


class NotFound(UndogateError):
    code = "not_found"


class Forbidden(UndogateError):
    code = "forbidden"


class Unauthorized(UndogateError):
    code = "unauthorized"


class LimitReached(UndogateError):
    code = "limit_reached"


class QuotaExceeded(UndogateError):
    code = "quota_exceeded"


class RateLimited(UndogateError):
    """Too many requests from one agent; ``retry_after_s`` (whole seconds, at least 1)
    says when the next one will be admitted."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int, **details: Any) -> None:
        super().__init__(message, retry_after_s=retry_after_s, **details)
        self.retry_after_s = retry_after_s


class StaleVersion(UndogateError):
    code = "stale_version"


class IdempotencyKeyReused(UndogateError):
    code = "idempotency_key_reused"


class RemoteContractBreach(UndogateError):
    code = "remote_contract_breach"


class RemoteUnavailable(UndogateError):
    code = "remote_unavailable"


class BlockedAddress(UndogateError):
    code = "blocked_address"


class MissingToken(UndogateError):
    code = "missing_token"


class TransitionNotAllowed(UndogateError):
    code = "transition_not_allowed"


class PreviewExpired(UndogateError):
    code = "preview_expired"


class PreviewUsed(UndogateError):
    code = "preview_used"


class ChangedSincePreview(UndogateError):
    code = "changed_since_preview"


class Conflict(UndogateError):
    code = "conflict"


class Quarantined(UndogateError):
    code = "quarantined"


class LaterJobOverlaps(UndogateError):
    code = "later_job_overlaps"


class ReconciliationBlocked(UndogateError):
    code = "reconciliation_blocked"


class Ambiguous(UndogateError):
    """Identity evidence matched several records; the details list them (ids and
    evidence values only). Nothing was prepared: ambiguity is never resolved by a guess."""

    code = "ambiguous"


class IrreversibleNotAcknowledged(UndogateError):
    """A confirm of a change the gateway cannot undo came without the reviewer's
    explicit acknowledgement."""

    code = "irreversible_not_acknowledged"


class RewindBlocked(Conflict):
    """A rewind plan holds a blocked step, and the reviewer did not skip the blocked
    steps: nothing was written (docs/rewind.md)."""

    code = "rewind_blocked"


class AgentStopped(UndogateError):
    """A person stopped the agent: its prepares are refused and its waiting jobs held
    from confirmation until they resume it (docs/rewind.md)."""

    code = "agent_stopped"


class UndoNotVerified(UndogateError):
    """There is no verified undo to accept: no passing endpoint check on a test copy
    showed it works."""

    code = "undo_not_verified"


class PasskeyRequired(UndogateError):
    code = "passkey_required"


class PasskeyApprovalRequired(PasskeyRequired):
    """Adding a passkey beside a live one, or revoking one, came without an approval
    from a live passkey of the same owner."""

    code = "passkey_approval_required"


class PasskeyRefused(UndogateError):
    code = "passkey_refused"


class PasskeyNotVerified(PasskeyRefused):
    code = "passkey_not_verified"


class PasskeyWrongPreview(PasskeyRefused):
    code = "passkey_wrong_preview"


class PasskeyWrongAct(PasskeyRefused):
    """The passkey signed another addition or revocation than the one asked for."""

    code = "passkey_wrong_act"


class PasskeyApprovalExpired(PasskeyRefused):
    """What the passkey signed (an acceptance, an addition, a revocation) carried an
    expiry that has passed, or one no page of this gateway gives."""

    code = "passkey_approval_expired"


class PasskeyReplayed(PasskeyRefused):
    code = "passkey_replayed"


class PasskeyRevoked(PasskeyRefused):
    code = "passkey_revoked"


class PasskeyUnknown(PasskeyRefused):
    code = "passkey_unknown"


class EnrolmentRefused(UndogateError):
    """A first passkey is enrolled only with a one-time code printed on the server's
    host (``undogate passkeys enrol``), and this one did not hold."""

    code = "enrolment_refused"


class EnrolmentCodeRequired(EnrolmentRefused):
    code = "enrolment_code_required"


class EnrolmentCodeUnknown(EnrolmentRefused):
    code = "enrolment_code_unknown"


class EnrolmentCodeExpired(EnrolmentRefused):
    code = "enrolment_code_expired"


class EnrolmentCodeUsed(EnrolmentRefused):
    code = "enrolment_code_used"


class EnrolmentNotNeeded(UndogateError):
    """An enrolment code was asked for an owner who has a live passkey: that passkey
    approves another, or ``--replace`` revokes them (a lost device)."""

    code = "enrolment_not_needed"


class LedgerInUse(UndogateError):
    code = "ledger_in_use"


class LedgerError(UndogateError):
    code = "ledger_error"


class LedgerDamaged(LedgerError):
    """SQLite found the ledger damaged (quick_check, a malformed page, a WAL it cannot
    replay): the code stays ``ledger_error``; the class lets ``--new-ledger`` tell it
    from a refusal for other reasons (permissions, settings)."""


class LedgerTampered(LedgerError):
    """A row the gateway was about to act on (a change's sides, a job's state, an
    endpoint check) disagrees with what the hash chain recorded of it: someone edited
    the ledger behind the gateway's back. Nothing is written; ``undogate ledger verify``
    names the row (docs/proof.md)."""

    code = "ledger_tampered"


class LedgerBusy(LedgerError):
    """Other processes sharing a SQLite ledger held its one write lock for longer than
    the bounded busy wait: nothing of this step was recorded; it can be tried again."""

    code = "ledger_busy"


class LedgerOnNetworkFilesystem(LedgerError):
    """A SQLite ledger on a network filesystem, where its locks cannot be trusted."""

    code = "ledger_network_filesystem"


class LedgerMissing(LedgerError):
    code = "ledger_missing"


class LedgerForeign(LedgerError):
    code = "ledger_foreign"
