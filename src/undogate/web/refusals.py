"""Every refusal the review UI can show, as a plain sentence and the next step.

The one place the web surface turns stable error codes into words. The engine's own
message (which names the resource or the blocking job) is shown under the sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UndogateError


@dataclass(frozen=True)
class Refusal:
    code: str
    sentence: str
    next_step: str
    detail: str | None = None
    offer_preview_again: bool = False


# code -> (what happened, what to do next, whether "preview again" is the way on)
_WORDS: dict[str, tuple[str, str, bool]] = {
    "changed_since_preview": (
        "Something changed since you previewed this, so nothing was written.",
        "Preview again to see the current values, then decide.",
        True,
    ),
    "agent_stopped": (
        "A person stopped this job's agent: its waiting jobs are held from confirmation, "
        "so nothing was written.",
        "Resume the agent on its page (the inbox: Undo this agent's work since…) when its "
        "jobs may be confirmed again; undoing its work is not held.",
        False,
    ),
    "preview_expired": (
        "This preview expired before it was confirmed, so nothing was written.",
        "Preview again; a preview is valid for a few minutes only.",
        True,
    ),
    "preview_used": (
        "This preview was already used, and something newer has happened since.",
        "Open the job to see where it stands, and preview again if there is more to do.",
        False,
    ),
    "conflict": (
        "The resource no longer holds the values this step expects, so nothing was written.",
        "Open the job to see what it expected and what the resource holds now; prepare a "
        "new reviewed change from the current values instead of overwriting them.",
        False,
    ),
    "irreversible_not_acknowledged": (
        "This change cannot be undone by undogate, and that was not acknowledged, so "
        "nothing was written.",
        "Preview again, tick the box that says you understand it is irreversible, then confirm.",
        True,
    ),
    "undo_not_verified": (
        "Undoing this is offered only once it was verified on a test copy and accepted, "
        "so nothing was written.",
        "Run check-endpoint on a test copy of the resource, accept the verified undo on "
        "its undo page, then preview the undo again.",
        False,
    ),
    "quarantined": (
        "Another job's outcome on the same resource is uncertain, so this is on hold.",
        "Open that job and accept its observed state first; then try this again.",
        False,
    ),
    "later_job_overlaps": (
        "A later job changed the same values after this one, so undoing this first would "
        "overwrite it.",
        "Undo the later job first, then undo this one.",
        False,
    ),
    "reconciliation_blocked": (
        "The resource shows neither the before nor the after values, so the outcome "
        "cannot be accepted.",
        "Investigate the resource by hand; accept the observed state once it matches one side.",
        False,
    ),
    "transition_not_allowed": (
        "The job is not in a state that allows this.",
        "Open the job to see its current state and the steps it offers.",
        False,
    ),
    "limit_reached": (
        "A limit was reached, so nothing new was started.",
        "Ask an operator to look at the limits in the config; no history was deleted.",
        False,
    ),
    "remote_unavailable": (
        "The external system could not be read just now, so nothing was written.",
        "Check that the system is up, then preview again.",
        True,
    ),
    "remote_contract_breach": (
        "The external system answered in a way undogate cannot trust, so nothing was written.",
        "An operator should check the endpoint against the remote contract.",
        False,
    ),
    "blocked_address": (
        "The resource's address is blocked by the network policy, so nothing was sent.",
        "An operator should check the resource's URL in the config.",
        False,
    ),
    "missing_token": (
        "The resource's access token is not set on the server, so nothing was sent.",
        "An operator should set the token's environment variable and restart.",
        False,
    ),
    "forbidden": (
        "Your key is not allowed to do this.",
        "Sign in with an operator key that has the agents:write scope for this agent.",
        False,
    ),
    "unauthorized": (
        "Your key is no longer valid.",
        "Sign in again with a current operator key.",
        False,
    ),
    "not_found": (
        "There is nothing here, or it is not yours to see.",
        "Check the address, or find what you were looking for from the inbox or an agent's page.",
        False,
    ),
    "rewind_blocked": (
        "A step of this plan is blocked, and leaving it was not ticked, so nothing was written.",
        "Preview the plan again, read what blocks each blocked step, and tick the box that "
        "leaves them if the rest should be undone without them.",
        False,
    ),
    "passkey_refused": (
        "Your passkey's approval was refused, so nothing was written.",
        "Preview again and approve that exact preview with one of your passkeys.",
        True,
    ),
    "ledger_busy": (
        "The ledger was busy with other gateways' writes for too long, so this step was "
        "not recorded.",
        "Try again in a moment. If this was a confirm, open the job first: it says exactly "
        "which writes ran.",
        False,
    ),
    "ledger_tampered": (
        "The ledger disagrees with its own hash chain: someone edited it behind undogate's "
        "back, so nothing was written.",
        "An operator should run undogate ledger verify on the server's host: it names the "
        "row that does not match (docs/proof.md).",
        False,
    ),
    "ledger_error": (
        "The ledger could not be read or written, so this could not finish.",
        "An operator should look at the server's log. If this was a confirm, open the job "
        "once the ledger is back: it says exactly which writes ran.",
        False,
    ),
    "internal_error": (
        "undogate hit an internal error and could not finish this.",
        "Reload to try again. If this was a confirm, open the job first: it says exactly "
        "which writes ran. The server's log has the error.",
        False,
    ),
    "invalid_request": (
        "The request was not understood.",
        "Go back to the job and use its buttons.",
        False,
    ),
    "cross_site": (
        "This form was sent from another site, so it was refused and nothing changed.",
        "Open undogate directly and use its own buttons.",
        False,
    ),
    "passkey_required": (
        "This preview touches a resource that needs your passkey, so nothing was written.",
        "Confirm it on this preview's page and approve it with your passkey.",
        True,
    ),
    "passkey_not_verified": (
        "Your passkey's approval did not hold (no user verification, or the signature did "
        "not check), so nothing was written.",
        "Preview again and approve with a passkey that verifies you (PIN or biometrics).",
        True,
    ),
    "passkey_wrong_preview": (
        "The passkey approval was for another preview, so nothing was written.",
        "Preview again and approve exactly that preview.",
        True,
    ),
    "passkey_replayed": (
        "This passkey approval was used already, so nothing was written.",
        "Preview again: every approval is good for one confirm only.",
        True,
    ),
    "passkey_revoked": (
        "That passkey was revoked, so nothing was written.",
        "Approve with another of your passkeys, or register a new one.",
        False,
    ),
    "passkey_unknown": (
        "That passkey is not one of yours, so nothing was written.",
        "Approve with a passkey registered under your own operator key.",
        False,
    ),
    "passkey_approval_required": (
        "Adding or revoking a passkey needs the approval of one of your live passkeys, so "
        "nothing changed.",
        "Open the passkeys page again and approve with a passkey you have. A lost device "
        "is replaced on the server's host (undogate passkeys enrol --replace).",
        False,
    ),
    "passkey_wrong_act": (
        "Your passkey approved something else than this, so nothing changed.",
        "Open the passkeys page again and approve exactly this.",
        False,
    ),
    "passkey_approval_expired": (
        "Your passkey's approval came after its page expired, so nothing changed.",
        "Open the page again and approve anew.",
        False,
    ),
    "enrolment_code_required": (
        "Your first passkey needs a one-time enrolment code, so nothing was registered.",
        "Ask an operator on the server's host for one (undogate passkeys enrol) and type "
        "it on the passkeys page.",
        False,
    ),
    "enrolment_code_unknown": (
        "That enrolment code is not one made for your key, so nothing was registered.",
        "Check the code you typed, or ask the operator on the server's host for a new one.",
        False,
    ),
    "enrolment_code_expired": (
        "That enrolment code expired, so nothing was registered.",
        "Ask the operator on the server's host for a new one: a code holds for 15 minutes.",
        False,
    ),
    "enrolment_code_used": (
        "That enrolment code was used already, so nothing was registered.",
        "Ask the operator on the server's host for a new one: a code enrols once.",
        False,
    ),
    "csrf": (
        "This form is out of date for your session, so it was refused and nothing changed.",
        "Reload the page and try again.",
        False,
    ),
}
_FALLBACK = (
    "undogate refused this: the reason is below.",
    "Where it was a job or a plan, its page says where it stands now.",
    False,
)


# (code, operation) -> (what stands in the way, what to do), as a preview that cannot be
# confirmed says it: nothing was tried yet, so these never say "nothing was written".
_BLOCKED: dict[tuple[str, str], tuple[str, str]] = {
    ("conflict", "apply"): (
        "The values this job would replace have changed since it was prepared.",
        "Applying it would overwrite them, so it cannot be applied as prepared. Reject it, "
        "and have the agent prepare a new job from the current values.",
    ),
    ("conflict", "undo"): (
        "The resource changed after this job applied it.",
        "Undoing it would overwrite the newer values, so the undo is refused. Prepare a "
        "new reviewed change from the current values instead.",
    ),
    ("later_job_overlaps", "undo"): (
        "A later job changed the same values after this one.",
        "Undo that later job first, then preview this undo again.",
    ),
    ("undo_not_verified", "undo"): (
        "Undoing this is offered only once it was verified on a test copy and accepted.",
        "Run check-endpoint on a test copy of the resource and accept the verified undo on "
        "its undo page; then preview the undo again.",
    ),
    ("reconciliation_blocked", "accept_observed"): (
        "The resource shows neither the values before the job nor the ones it wrote.",
        "Investigate the resource by hand; accept the observed state once it matches one side.",
    ),
}
_QUARANTINED = (
    "Another job's outcome on the same resource is uncertain, so this waits.",
    "Open that job and accept its observed state; then preview this again.",
)


def blocked_words(code: str, operation: str) -> tuple[str, str]:
    """Why a preview cannot be confirmed, and what to do, in two sentences."""
    if code == "quarantined":
        return _QUARANTINED
    found = _BLOCKED.get((code, operation))
    if found is not None:
        return found
    refusal = refusal_for_code(code)
    return refusal.sentence, refusal.next_step


def refusal_for_code(code: str, detail: str | None = None) -> Refusal:
    sentence, next_step, again = _WORDS.get(code, _FALLBACK)
    return Refusal(code, sentence, next_step, detail, again)


def refusal_for(exc: UndogateError) -> Refusal:
    """The plain-words form of a domain error."""
    return refusal_for_code(exc.code, exc.message)


def known_codes() -> frozenset[str]:
    return frozenset(_WORDS)


__all__ = ["Refusal", "blocked_words", "known_codes", "refusal_for", "refusal_for_code"]
