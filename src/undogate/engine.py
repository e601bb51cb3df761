"""The gateway: the one object every surface calls to prepare, preview, confirm, reject
and reconcile. Each verb is one operation module (``operations/``); this class only
holds their shared ``Context`` and gives them names.

Each operation follows the same rule: record before you act, record after you act. A
write's intent (an action row marked ``dispatching``) commits before the request
leaves, and its outcome commits after, so a crash anywhere leaves either nothing sent or
an action that recovery turns into ``uncertain``, never a write that could be sent twice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from .config import Resource
from .jobs import (
    Actor,
    Confirmation,
    Job,
    Operation,
    Prepared,
    PrepareRequest,
    Preview,
    UndoOffer,
)
from .ledger import Event, InboxQuery, JobSummary, OutboxMessage, StoredPasskey, StoredPreview
from .operations import owner_passkeys
from .operations.confirm import confirm_preview, stored_preview
from .operations.context import Context
from .operations.inbox import BulkOutcome, InboxPage, read_inbox, reject_many
from .operations.owner_passkeys import IssuedEnrolment
from .operations.prepare import prepare_job
from .operations.preview import preview_job
from .operations.recovery import recover
from .operations.reject import reject_job
from .operations.undo_offer import accept_verified_undo, resource_undo_offer
from .passkeys import ActChallenge, Addition, Approval

CRASH_POINTS = ("after_intent", "after_send", "after_response", "after_readback", "after_outcome")
CRASH_ENV = "UNDOGATE_CRASH_AT"


def crash_point_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The test-only crash hook (``UNDOGATE_CRASH_AT=apply:after_intent``); see
    docs/recovery.md. Unset, it is inert."""
    value = (environ if environ is not None else os.environ).get(CRASH_ENV)
    return value or None


class Gateway(Context):
    """The engine. Surfaces call these methods and only translate what they raise."""

    def list_resources(self, agent_id: str) -> list[Resource]:
        return self.config.resources_for(agent_id)

    def list_jobs(self, owner_id: str, agent_id: str) -> list[JobSummary]:
        return self.ledger.list_jobs(owner_id, agent_id)

    def webhook_messages(
        self, owner_id: str, agents: tuple[str, ...], status: str | None
    ) -> list[OutboxMessage]:
        """The newest 100 webhook messages about the owner's jobs of ``agents``
        (``status`` ones only, when given)."""
        return self.ledger.read(lambda r: r.webhook_messages(owner_id, agents, status=status))

    def events(self, owner_id: str, job_id: str) -> list[Event]:
        self.get_job(owner_id, job_id)
        return self.ledger.events(job_id)

    def prepare(self, actor: Actor, agent_id: str, request: PrepareRequest) -> Prepared:
        """See ``operations.prepare.prepare_job``."""
        return prepare_job(self, actor, agent_id, request)

    def preview(self, actor: Actor, job_id: str, operation: Operation) -> Preview:
        """See ``operations.preview.preview_job``."""
        return preview_job(self, actor, job_id, operation)

    def confirm(
        self,
        actor: Actor,
        job_id: str,
        preview_token: str,
        *,
        dry_run: bool = False,
        reauthorize: Callable[[], None] | None = None,
        acknowledge_irreversible: bool = False,
        passkey_assertion: str | None = None,
    ) -> Confirmation:
        """See ``operations.confirm.confirm_preview``."""
        return confirm_preview(
            self,
            actor,
            job_id,
            preview_token,
            dry_run=dry_run,
            reauthorize=reauthorize,
            acknowledge_irreversible=acknowledge_irreversible,
            passkey_assertion=passkey_assertion,
        )

    def undo_offer(self, resource_id: str) -> UndoOffer:
        """See ``operations.undo_offer.resource_undo_offer``."""
        return resource_undo_offer(self, resource_id)

    def accept_verified_undo(
        self,
        actor: Actor,
        resource_id: str,
        *,
        passkey_assertion: str | None = None,
        passkey_expires_at_ms: int | None = None,
    ) -> UndoOffer:
        """See ``operations.undo_offer.accept_verified_undo``."""
        return accept_verified_undo(
            self,
            actor,
            resource_id,
            passkey_assertion=passkey_assertion,
            passkey_expires_at_ms=passkey_expires_at_ms,
        )

    def passkeys(self, owner_id: str) -> list[StoredPasskey]:
        """The owner's passkeys, revoked ones included."""
        return self.ledger.read(lambda tx: tx.passkeys(owner_id))

    def issue_passkey_enrolment(
        self, actor: Actor, owner_id: str, *, replace: bool = False
    ) -> IssuedEnrolment:
        """See ``operations.owner_passkeys.issue_enrolment``."""
        return owner_passkeys.issue_enrolment(self, actor, owner_id, replace=replace)

    def passkey_challenge(self, owner_id: str, act: Addition | str) -> ActChallenge:
        """See ``operations.owner_passkeys.act_challenge``."""
        return owner_passkeys.act_challenge(self, owner_id, act)

    def register_passkey(
        self,
        actor: Actor,
        addition: Addition,
        enrolment_code: str | None = None,
        approval: Approval | None = None,
    ) -> StoredPasskey:
        """See ``operations.owner_passkeys.register``."""
        return owner_passkeys.register(self, actor, addition, enrolment_code, approval)

    def revoke_passkey(self, actor: Actor, passkey_id: str, approval: Approval | None) -> None:
        """See ``operations.owner_passkeys.revoke``."""
        owner_passkeys.revoke(self, actor, passkey_id, approval)

    def stored_preview(
        self, owner_id: str, job_id: str, preview_token: str
    ) -> StoredPreview | None:
        """See ``operations.confirm.stored_preview``."""
        return stored_preview(self, owner_id, job_id, preview_token)

    def reject(self, actor: Actor, job_id: str, reason: str | None = None) -> Job:
        """See ``operations.reject.reject_job``."""
        return reject_job(self, actor, job_id, reason)

    def inbox(self, query: InboxQuery, limit: int, counted: tuple[str, ...]) -> InboxPage:
        """See ``operations.inbox.read_inbox``."""
        return read_inbox(self.ledger, query, limit, counted)

    def reject_many(
        self, actor: Actor, job_ids: tuple[str, ...], reason: str | None
    ) -> list[BulkOutcome]:
        """See ``operations.inbox.reject_many``."""
        return reject_many(self, actor, job_ids, reason)

    def recover(self) -> dict[str, int]:
        """Start-up recovery (see ``operations.recovery.recover``)."""
        return recover(self.ledger, self.config)


__all__ = ["CRASH_ENV", "CRASH_POINTS", "Gateway", "crash_point_from_env"]
