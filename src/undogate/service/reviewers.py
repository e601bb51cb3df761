"""What a reviewer may see and do: the inbox, a job and its history, preview, confirm,
reject, the endpoint check, verified undos and their own passkeys.

**May this caller see this job**: ``_visible_job`` decides it, once, as it loads the
job; a job of another owner, or of an agent the key may not see, is ``NotFound``. The
loaded job is what the operation then works on: a confirm loads its job once.
**Re-authorization before each dispatch** (``confirm``): the credential is re-read and
must still be a ``Writer`` that sees the job's agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ..auth import Keyring
from ..config import Config
from ..errors import Forbidden, InvalidRequest, NotFound
from ..jobs import Confirmation, Job, Operation, Preview, UndoOffer
from ..ledger import Event, JobSummary, OutboxMessage, StoredPasskey, StoredPreview
from ..operations import owner_passkeys
from ..operations.confirm import confirm_preview, stored_preview
from ..operations.context import Context
from ..operations.endpoint_check import CheckResult, check_endpoint, latest_verification
from ..operations.inbox import BulkOutcome, InboxFilter, InboxPage, check_bulk, read_inbox
from ..operations.inbox import reject_many as reject_jobs
from ..operations.preview import preview_job
from ..operations.reject import reject_job
from ..operations.undo_offer import accept_verified_undo, resource_undo_offer
from ..passkeys import ActChallenge, Addition, Approval
from .access import Caller, Reader, Reviewer, Writer, in_thread

WEBHOOK_STATUSES = ("pending", "delivered", "failed")


@dataclass(frozen=True)
class Reviewers:
    context: Context
    keyring: Keyring  # the re-check before each dispatch

    @property
    def config(self) -> Config:
        return self.context.config

    def visible_agents(self, caller: Caller) -> list[str]:
        """The config's agents this key may see, in config order."""
        return [a.id for a in self.config.agents if caller.sees_agent(a.id)]

    def _visible_job(self, caller: Caller, job_id: str) -> Job:
        """The job, if this key may see it: its owner's, of an agent it sees.

        Raises:
            NotFound: any other job (never ``Forbidden``, so ids of other owners' jobs
                reveal nothing).
        """
        job = self.context.get_job(caller.owner_id, job_id)
        if not caller.sees_agent(job.agent_id):
            raise NotFound(f"no job {job_id!r}", job=job_id)
        return job

    def _visible_resource(self, caller: Caller, resource_id: str) -> None:
        """Raises: NotFound (unknown), Forbidden (an agent this key does not see)."""
        res = self.config.resource(resource_id)
        if res is None:
            raise NotFound(f"unknown resource {resource_id!r}", resource=resource_id)
        if not caller.sees_agent(res.agent_id):
            raise Forbidden(f"this key has no access to agent {res.agent_id!r}", agent=res.agent_id)

    # -- what a reader may see ---------------------------------------------------------

    def _inbox_agents(self, caller: Reader, agent_id: str | None) -> tuple[str, ...]:
        visible = tuple(self.visible_agents(caller))
        if agent_id is None:
            return visible
        if all(a.id != agent_id for a in self.config.agents):
            raise NotFound(f"no agent {agent_id!r} in the config", agent=agent_id)
        if agent_id not in visible:
            raise Forbidden(f"this key has no access to agent {agent_id!r}", agent=agent_id)
        return (agent_id,)

    async def inbox(self, caller: Reader, wanted: InboxFilter) -> InboxPage:
        """The review inbox: this owner's jobs of the agents this key sees (one agent's
        with ``wanted.agent``), filtered, a page at a time, with the counts per state of
        every agent it sees (the navigation's).

        Raises: Forbidden (no access to the agent named); NotFound (an agent not in the
        config).
        """
        agents = self._inbox_agents(caller, wanted.agent)
        query = wanted.query(caller.owner_id, agents)
        counted = tuple(self.visible_agents(caller))
        return await in_thread(read_inbox, self.context, query, wanted.limit, counted)

    async def inbox_counts(self, caller: Reader) -> dict[str, int]:
        """Per state, this key's waiting work (for the navigation)."""
        page = await self.inbox(caller, InboxFilter(view="waiting", limit=1))
        return dict(page.counts)

    async def list_jobs(self, caller: Reader, agent_id: str) -> list[JobSummary]:
        """Raises: Forbidden: no access to ``agent_id``. NotFound: no such agent in the
        config (asked only of a key that may see every agent)."""
        if not caller.sees_agent(agent_id):
            raise Forbidden(f"this key has no access to agent {agent_id!r}", agent=agent_id)
        if all(a.id != agent_id for a in self.config.agents):
            raise NotFound(f"no agent {agent_id!r} in the config", agent=agent_id)
        return await in_thread(self.context.ledger.list_jobs, caller.owner_id, agent_id)

    async def webhook_messages(
        self, caller: Reader, status: str | None = None
    ) -> list[OutboxMessage]:
        """The newest 100 webhook messages about the jobs this key may see (``status``
        ones only, when given), newest first.

        Raises: InvalidRequest: an unknown ``status``."""
        if status is not None and status not in WEBHOOK_STATUSES:
            raise InvalidRequest(
                f"unknown webhook status {status!r}; known: {', '.join(WEBHOOK_STATUSES)}",
                status=status,
            )
        agents = tuple(self.visible_agents(caller))
        return await in_thread(
            self.context.ledger.read,
            lambda r: r.webhook_messages(caller.owner_id, agents, status=status),
        )

    async def job(self, caller: Reader, job_id: str) -> Job:
        """Raises: NotFound (as ``_visible_job``)."""
        return await in_thread(self._visible_job, caller, job_id)

    async def events(self, caller: Reader, job_id: str) -> tuple[Job, list[Event]]:
        """The job and its events. Raises: as ``job``."""

        def read() -> tuple[Job, list[Event]]:
            job = self._visible_job(caller, job_id)
            return job, self.context.ledger.events(job.id)

        return await in_thread(read)

    def verified(self, job: Job) -> dict[str, bool]:
        """Per resource of the job: did its latest endpoint check pass?"""
        out: dict[str, bool] = {}
        for change in job.changes:
            res = self.config.resource(change.resource_id)
            if res is not None and change.resource_id not in out:
                out[res.id] = latest_verification(self.context.ledger, res)
        return out

    async def preview_record(self, caller: Reader, job_id: str, token: str) -> StoredPreview | None:
        """Whether one of the job's previews was consumed, and when (never its values).

        Raises: NotFound (as ``job``).
        """

        def read() -> StoredPreview | None:
            return stored_preview(self.context, self._visible_job(caller, job_id), token)

        return await in_thread(read)

    async def undo_offer(self, caller: Reader, resource_id: str) -> UndoOffer:
        """What the ledger shows about a resource's verified undos (docs/collections.md).

        Raises: Forbidden, NotFound."""
        self._visible_resource(caller, resource_id)
        return await in_thread(resource_undo_offer, self.context, resource_id)

    # -- what a reviewer may do ----------------------------------------------------------

    async def preview(
        self, caller: Reviewer, job_id: str, operation: Operation
    ) -> tuple[Job, Preview]:
        """Raises: NotFound (as ``job``), and what ``operations.preview.preview_job``
        raises."""

        def run() -> tuple[Job, Preview]:
            job = self._visible_job(caller, job_id)
            return job, preview_job(self.context, caller.actor, job, operation)

        return await in_thread(run)

    def _reauthorize(self, caller: Reviewer, job: Job) -> None:
        """Before each dispatch: the credential, re-read now, still writes to the job's
        agent. Raises: Unauthorized (revoked meanwhile), Forbidden."""
        now = Writer.of(self.keyring.recheck(caller.principal), caller.via)
        if not now.sees_agent(job.agent_id):
            raise Forbidden("this key no longer has access to the job's agent")

    async def confirm(
        self,
        caller: Reviewer,
        job_id: str,
        token: str,
        *,
        dry_run: bool = False,
        acknowledge_irreversible: bool = False,
        passkey_assertion: str | None = None,
    ) -> Confirmation:
        """Confirm a preview; the credential is re-checked before each dispatch.

        Raises: NotFound (as ``job``), Unauthorized (revoked meanwhile), and what
        ``operations.confirm.confirm_preview`` raises.
        """
        job = await self.job(caller, job_id)
        return await in_thread(
            confirm_preview,
            self.context,
            caller.actor,
            job,
            token,
            dry_run=dry_run,
            reauthorize=partial(self._reauthorize, caller, job),
            acknowledge_irreversible=acknowledge_irreversible,
            passkey_assertion=passkey_assertion,
        )

    async def reject(self, caller: Reviewer, job_id: str, reason: str | None = None) -> Job:
        """Raises: NotFound (as ``job``), TransitionNotAllowed, InvalidRequest (the
        reason)."""

        def run() -> Job:
            return reject_job(self.context, caller.actor, self._visible_job(caller, job_id), reason)

        return await in_thread(run)

    async def reject_many(
        self, caller: Reviewer, job_ids: tuple[str, ...], reason: str | None
    ) -> list[BulkOutcome]:
        """Bulk reject (the inbox's stale jobs, confirmed once): each job this key may
        see; one it may not is ``not_found`` in the outcomes, like one that does not exist.

        Raises: InvalidRequest (no job, too many, or a bad reason).
        """
        check_bulk(job_ids, reason)
        seen: list[str] = []
        hidden: list[BulkOutcome] = []
        for job_id in job_ids:
            try:
                seen.append((await self.job(caller, job_id)).id)
            except NotFound as exc:
                hidden.append(BulkOutcome(job_id, False, exc.code, exc.message))
        done: list[BulkOutcome] = []
        if seen:
            done = await in_thread(reject_jobs, self.context, caller.actor, tuple(seen), reason)
        return [*done, *hidden]

    async def check_endpoint(self, caller: Reviewer, copy_id: str) -> CheckResult:
        """The endpoint check on a test copy of an agent this key sees.

        Raises: Forbidden, and what ``operations.endpoint_check.check_endpoint`` raises.
        """
        copy = self.config.resource(copy_id)
        if copy is not None and not caller.sees_agent(copy.agent_id):
            raise Forbidden(
                f"this key has no access to agent {copy.agent_id!r}", agent=copy.agent_id
            )
        actor = caller.actor
        return await in_thread(
            check_endpoint,
            self.context,
            copy_id,
            actor=actor.label,
            access_path=actor.access_path,
        )

    async def accept_verified_undo(
        self,
        caller: Writer,
        resource_id: str,
        *,
        passkey_assertion: str | None = None,
        passkey_expires_at_ms: int | None = None,
    ) -> UndoOffer:
        """A reviewer accepts, once, the undos a test copy verified (docs/collections.md), with a
        passkey's approval where the resource requires one (docs/proof.md), over the offer's
        document until the expiry the offer showed.

        Raises: Forbidden, NotFound, UndoNotVerified, InvalidRequest, PasskeyRequired,
        PasskeyRefused."""
        self._visible_resource(caller, resource_id)
        return await in_thread(
            accept_verified_undo,
            self.context,
            caller.actor,
            resource_id,
            passkey_assertion=passkey_assertion,
            passkey_expires_at_ms=passkey_expires_at_ms,
        )

    # -- passkeys (docs/proof.md): an operator's own, per owner ------------------------------

    async def passkeys(self, caller: Writer) -> list[StoredPasskey]:
        """The owner's passkeys, revoked ones included."""
        return await in_thread(self.context.ledger.read, lambda tx: tx.passkeys(caller.owner_id))

    def passkey_challenge(self, caller: Writer, act: Addition | str) -> ActChallenge:
        """What a live passkey of this owner signs to add ``act`` (an Addition) or to
        revoke it (a passkey id)."""
        return owner_passkeys.act_challenge(self.context, caller.owner_id, act)

    async def register_passkey(
        self,
        caller: Writer,
        addition: Addition,
        *,
        enrolment_code: str | None = None,
        approval: Approval | None = None,
    ) -> StoredPasskey:
        """Keep a passkey the surface verified (the owner's first with an enrolment code,
        another with a live one's approval). Raises: as ``owner_passkeys.register``."""
        return await in_thread(
            owner_passkeys.register,
            self.context,
            caller.actor,
            addition,
            enrolment_code,
            approval,
        )

    async def revoke_passkey(
        self, caller: Writer, passkey_id: str, approval: Approval | None
    ) -> None:
        """With a live passkey's approval. Raises: as ``owner_passkeys.revoke``."""
        await in_thread(owner_passkeys.revoke, self.context, caller.actor, passkey_id, approval)


__all__ = ["WEBHOOK_STATUSES", "Reviewers"]
