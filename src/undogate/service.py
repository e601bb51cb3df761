"""The one door every surface calls: the API, the review web UI and ``/mcp``.

- **Authenticate once.** ``bearer_key`` reads an ``Authorization`` header the same way
  for every surface, and ``Service.authenticate`` turns a presented key into a
  ``Principal`` (the keyring's in-memory answer when it has one, else one ledger read in
  a worker thread). The web sign-in and each session's re-check go through the same
  keyring, here.
- **Authorize by name.** ``require_agent``, ``require_admin``, ``require_reader``,
  ``require_writer`` and ``require_reviewer`` say what a request needs; a surface may
  call one early (before reading a body), and every verb below checks again what it
  needs, so no surface can forget.
- **May this principal see or act on this job**: ``job`` decides it, once; a job of
  another owner, or of an agent the key may not see, is ``NotFound``.
- **Re-authorization before each dispatch** (``confirm``): the credential is re-read
  and must still hold ``agents:write`` and see the job's agent.
- **The agent opt-in** (``agents[].tools`` in the config) is checked here and only here.

Surfaces translate requests into these calls and what they return or raise into their
own answers; the verbs call ``engine.Gateway`` and the ``Keyring`` and nothing climbs
back up.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from .auth import ADMIN, READ, WRITE, CredentialInfo, IssuedKey, Keyring, Principal, Revocation
from .auth import require_scope as _require_scope
from .config import Config, Resource
from .engine import Gateway
from .errors import Forbidden, InvalidRequest, NotFound, Unauthorized
from .jobs import Confirmation, Job, Operation, Prepared, PrepareRequest, Preview, UndoOffer
from .jsonvalue import JsonObject
from .ledger import Event, JobSummary, OutboxMessage, StoredPasskey, StoredPreview
from .operations.endpoint_check import CheckResult, check_endpoint, latest_verification
from .operations.export import events_page, jobs_page
from .operations.inbox import BulkOutcome, InboxFilter, InboxPage, check_bulk
from .operations.job_status import JobStatus, job_status
from .operations.owner_passkeys import IssuedEnrolment
from .passkeys import ActChallenge, Addition, Approval

T = TypeVar("T")

MAX_KEY_CHARS = 512  # longer is no key undogate issued
UNKNOWN_CREDENTIAL = "the credential is missing, unknown or revoked"
WEBHOOK_STATUSES = ("pending", "delivered", "failed")


def bearer_key(authorization: str, *, ask: str) -> str:
    """The key in an ``Authorization: Bearer <key>`` header value.

    Raises:
        Unauthorized: another scheme or no key (with ``ask``, the surface's words for
            what to send).
    """
    scheme, _, key = authorization.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise Unauthorized(ask)
    return key


async def _in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


@dataclass(frozen=True)
class Service:
    """The gateway and the keyring, as every surface may use them."""

    gateway: Gateway
    keyring: Keyring

    @property
    def config(self) -> Config:
        return self.gateway.config

    def clock(self) -> float:
        return self.gateway.clock()

    # -- authentication ------------------------------------------------------------

    async def authenticate(self, key: str, *, over_long: str = UNKNOWN_CREDENTIAL) -> Principal:
        """The principal behind a presented key.

        Raises:
            Unauthorized: unknown, malformed or revoked; over-long (with ``over_long``,
                the surface's words for it), without a lookup.
        """
        if len(key) > MAX_KEY_CHARS:
            raise Unauthorized(over_long)
        principal = self.keyring.verified(key)
        if principal is None:
            principal = await _in_thread(self.keyring.authenticate, key)
        return principal

    async def authenticate_bearer(
        self, authorization: str, *, ask: str, over_long: str = UNKNOWN_CREDENTIAL
    ) -> Principal:
        """The principal behind an ``Authorization`` header value.

        Raises:
            Unauthorized: no bearer key (``ask``), or as ``authenticate``.
        """
        key = bearer_key(authorization, ask=ask)
        return await self.authenticate(key, over_long=over_long)

    async def sign_in(self, key: str) -> Principal:
        """An operator signing in to the review pages with their key.

        Raises:
            Unauthorized: as ``authenticate``. Forbidden: not an operator key.
        """
        principal = await self.authenticate(key)
        if principal.kind != "operator":
            raise Forbidden("only operator keys can sign in")
        return principal

    async def recheck(self, principal: Principal) -> Principal:
        """The same credential, re-read now (a session's key may have been revoked).

        Raises:
            Unauthorized, NotFound: it is revoked, or gone.
        """
        return await _in_thread(self.keyring.recheck, principal)

    # -- authorization by name -----------------------------------------------------

    @staticmethod
    def require_agent(principal: Principal, where: str = "this route") -> str:
        """The agent an agent token speaks for.

        Raises:
            Forbidden: any other credential (``where`` names what refuses it).
        """
        if principal.kind != "agent" or principal.agent_id is None:
            raise Forbidden(f"{where} is for agent tokens")
        return principal.agent_id

    @staticmethod
    def require_admin(principal: Principal) -> None:
        """Key administration. Raises: Forbidden unless the master key or an operator key
        with keys:admin."""
        if principal.kind == "master":
            return
        if principal.kind != "operator" or ADMIN not in principal.scopes:
            raise Forbidden(
                f"key administration needs the master key or an operator key with {ADMIN}",
                scope=ADMIN,
            )

    @staticmethod
    def require_reader(principal: Principal) -> None:
        """Seeing jobs. Raises: Forbidden unless an operator key with agents:read."""
        _require_scope(principal, READ)

    @staticmethod
    def require_writer(principal: Principal) -> None:
        """Acting on jobs. Raises: Forbidden unless an operator key with agents:write."""
        _require_scope(principal, WRITE)

    @staticmethod
    def require_reviewer(principal: Principal) -> None:
        """Previewing, confirming and rejecting show a job's values: write needs read too.

        Raises: Forbidden.
        """
        _require_scope(principal, WRITE)
        _require_scope(principal, READ)

    def visible_agents(self, principal: Principal) -> list[str]:
        """The config's agents this key may see, in config order."""
        return [a.id for a in self.config.agents if principal.sees_agent(a.id)]

    def opted_in(self, agent_id: str) -> tuple[str, ...]:
        """The tools the config opts ``agent_id`` in to, in config order."""
        return self.config.agent_tools(agent_id)

    def _require_tool(self, agent_id: str, tool: str) -> None:
        if tool not in self.opted_in(agent_id):
            raise Forbidden(f"agent {agent_id!r} is not opted in to {tool}")

    # -- what an agent may do ------------------------------------------------------

    def agent_tools(self, principal: Principal) -> tuple[str, ...]:
        """The tools the agent's config opts it in to, in config order.

        Raises: Forbidden: not an agent token.
        """
        return self.opted_in(self.require_agent(principal))

    def list_resources(self, principal: Principal) -> list[Resource]:
        """Raises: Forbidden: not an agent token, or not opted in to list_resources."""
        agent_id = self.require_agent(principal)
        self._require_tool(agent_id, "list_resources")
        return self.gateway.list_resources(agent_id)

    async def prepare(self, principal: Principal, via: str, request: PrepareRequest) -> Prepared:
        """Raises: Forbidden (not an agent token, not opted in to prepare_changes), and
        what ``Gateway.prepare`` raises."""
        agent_id = self.require_agent(principal)
        self._require_tool(agent_id, "prepare_changes")
        return await _in_thread(self.gateway.prepare, principal.actor(via), agent_id, request)

    async def job_status(self, principal: Principal, job_id: str) -> JobStatus:
        """An agent's own job: its state and a reviewer's reason, never values.

        Raises: Forbidden (not an agent token, not opted in to job_status); NotFound (no
        such job, or another agent's or owner's: the same answer).
        """
        agent_id = self.require_agent(principal)
        self._require_tool(agent_id, "job_status")
        return await _in_thread(job_status, self.gateway, principal.owner_id, agent_id, job_id)

    # -- what an operator may see ----------------------------------------------------

    def _inbox_agents(self, principal: Principal, agent_id: str | None) -> tuple[str, ...]:
        visible = tuple(self.visible_agents(principal))
        if agent_id is None:
            return visible
        if all(a.id != agent_id for a in self.config.agents):
            raise NotFound(f"no agent {agent_id!r} in the config", agent=agent_id)
        if agent_id not in visible:
            raise Forbidden(f"this key has no access to agent {agent_id!r}", agent=agent_id)
        return (agent_id,)

    async def inbox(self, principal: Principal, wanted: InboxFilter) -> InboxPage:
        """The review inbox: this owner's jobs of the agents this key sees (one agent's
        with ``wanted.agent``), filtered, a page at a time, with the counts per state of
        every agent it sees (the navigation's).

        Raises: Forbidden (no agents:read, or no access to the agent named); NotFound (an
        agent not in the config).
        """
        self.require_reader(principal)
        agents = self._inbox_agents(principal, wanted.agent)
        query = wanted.query(principal.owner_id, agents)
        counted = tuple(self.visible_agents(principal))
        return await _in_thread(self.gateway.inbox, query, wanted.limit, counted)

    async def inbox_counts(self, principal: Principal) -> dict[str, int]:
        """Per state, this key's waiting work (for the navigation). Raises: Forbidden."""
        page = await self.inbox(principal, InboxFilter(view="waiting", limit=1))
        return dict(page.counts)

    async def list_jobs(self, principal: Principal, agent_id: str) -> list[JobSummary]:
        """Raises: Forbidden: no agents:read, or no access to ``agent_id``. NotFound: no
        such agent in the config (asked only of a key that may see every agent)."""
        self.require_reader(principal)
        if not principal.sees_agent(agent_id):
            raise Forbidden(f"this key has no access to agent {agent_id!r}", agent=agent_id)
        if all(a.id != agent_id for a in self.config.agents):
            raise NotFound(f"no agent {agent_id!r} in the config", agent=agent_id)
        return await _in_thread(self.gateway.list_jobs, principal.owner_id, agent_id)

    async def webhook_messages(
        self, principal: Principal, status: str | None = None
    ) -> list[OutboxMessage]:
        """The webhook messages about the jobs this key may see, newest first.

        Raises: Forbidden: no agents:read. InvalidRequest: an unknown ``status``."""
        self.require_reader(principal)
        if status is not None and status not in WEBHOOK_STATUSES:
            raise InvalidRequest(
                f"unknown webhook status {status!r}; known: {', '.join(WEBHOOK_STATUSES)}",
                status=status,
            )
        agents = tuple(self.visible_agents(principal))
        return await _in_thread(self.gateway.webhook_messages, principal.owner_id, agents, status)

    async def job(self, principal: Principal, job_id: str) -> Job:
        """The job, if this key may see it: its owner's, of an agent it sees.

        Raises:
            Forbidden: no agents:read. NotFound: any other job (never ``Forbidden``, so
            ids of other owners' jobs reveal nothing).
        """
        self.require_reader(principal)
        job = await _in_thread(self.gateway.get_job, principal.owner_id, job_id)
        if not principal.sees_agent(job.agent_id):
            raise NotFound(f"no job {job_id!r}", job=job_id)
        return job

    async def events(self, principal: Principal, job_id: str) -> tuple[Job, list[Event]]:
        """The job and its events. Raises: as ``job``."""
        job = await self.job(principal, job_id)
        return job, await _in_thread(self.gateway.events, principal.owner_id, job.id)

    def verified(self, job: Job) -> dict[str, bool]:
        """Per resource of the job: did its latest endpoint check pass (SPEC §11)?"""
        out: dict[str, bool] = {}
        for change in job.changes:
            res = self.config.resource(change.resource_id)
            if res is not None and change.resource_id not in out:
                out[res.id] = latest_verification(self.gateway.ledger, res)
        return out

    # -- what an operator may do -----------------------------------------------------

    async def preview(
        self, principal: Principal, via: str, job_id: str, operation: Operation
    ) -> tuple[Job, Preview]:
        """Raises: Forbidden, NotFound (as ``job``), and what ``Gateway.preview`` raises."""
        self.require_writer(principal)
        job = await self.job(principal, job_id)
        preview = await _in_thread(self.gateway.preview, principal.actor(via), job.id, operation)
        return job, preview

    async def preview_record(
        self, principal: Principal, job_id: str, token: str
    ) -> StoredPreview | None:
        """Whether one of the job's previews was consumed, and when (never its values).

        Raises: Forbidden, NotFound (as ``job``).
        """
        job = await self.job(principal, job_id)
        return await _in_thread(self.gateway.stored_preview, principal.owner_id, job.id, token)

    async def confirm(
        self,
        principal: Principal,
        via: str,
        job_id: str,
        token: str,
        *,
        dry_run: bool = False,
        acknowledge_irreversible: bool = False,
        passkey_assertion: str | None = None,
    ) -> Confirmation:
        """Confirm a preview; the credential is re-checked before each dispatch.

        Raises: Forbidden, NotFound (as ``job``), Unauthorized (revoked meanwhile), and
        what ``Gateway.confirm`` raises.
        """
        self.require_writer(principal)
        job = await self.job(principal, job_id)

        def reauthorize() -> None:
            now = self.keyring.recheck(principal)
            _require_scope(now, WRITE)
            if not now.sees_agent(job.agent_id):
                raise Forbidden("this key no longer has access to the job's agent")

        return await _in_thread(
            self.gateway.confirm,
            principal.actor(via),
            job.id,
            token,
            dry_run=dry_run,
            reauthorize=reauthorize,
            acknowledge_irreversible=acknowledge_irreversible,
            passkey_assertion=passkey_assertion,
        )

    # -- passkeys (SPEC §14): an operator's own, per owner --------------------------------

    async def passkeys(self, principal: Principal) -> list[StoredPasskey]:
        """Raises: Forbidden (not an operator who may write)."""
        self.require_writer(principal)
        return await _in_thread(self.gateway.passkeys, principal.owner_id)

    def passkey_challenge(self, principal: Principal, act: Addition | str) -> ActChallenge:
        """What a live passkey of this owner signs to add ``act`` (an Addition) or to
        revoke it (a passkey id). Raises: Forbidden."""
        self.require_writer(principal)
        return self.gateway.passkey_challenge(principal.owner_id, act)

    async def register_passkey(
        self,
        principal: Principal,
        via: str,
        addition: Addition,
        *,
        enrolment_code: str | None = None,
        approval: Approval | None = None,
    ) -> StoredPasskey:
        """Keep a passkey the surface verified (the owner's first with an enrolment code,
        another with a live one's approval). Raises: Forbidden, and as the Gateway."""
        self.require_writer(principal)
        actor = principal.actor(via)
        return await _in_thread(
            self.gateway.register_passkey, actor, addition, enrolment_code, approval
        )

    async def revoke_passkey(
        self, principal: Principal, via: str, passkey_id: str, approval: Approval | None
    ) -> None:
        """With a live passkey's approval. Raises: Forbidden, and as the Gateway."""
        self.require_writer(principal)
        await _in_thread(self.gateway.revoke_passkey, principal.actor(via), passkey_id, approval)

    async def issue_passkey_enrolment(
        self, principal: Principal, owner_id: str | None, *, replace: bool
    ) -> IssuedEnrolment:
        """A code that enrols an owner's first passkey (``replace``: after revoking its
        live ones): the master key only (it lives with the server), never an operator
        key. Unnamed, the owner is the only live operator key.

        Raises: Forbidden (not the master key), InvalidRequest (no owner named and not
        exactly one operator key), and as the Gateway."""
        if principal.kind != "master":
            raise Forbidden(
                "an enrolment code is made on the server's host (`undogate passkeys enrol`) "
                "or with the master key, never with an operator key"
            )
        owner = owner_id or await _in_thread(self.keyring.only_operator)
        return await _in_thread(
            self.gateway.issue_passkey_enrolment, principal.actor("api"), owner, replace=replace
        )

    async def reject(
        self, principal: Principal, via: str, job_id: str, reason: str | None = None
    ) -> Job:
        """Raises: Forbidden, NotFound (as ``job``), TransitionNotAllowed, InvalidRequest
        (the reason)."""
        self.require_writer(principal)
        job = await self.job(principal, job_id)
        return await _in_thread(self.gateway.reject, principal.actor(via), job.id, reason)

    async def reject_many(
        self, principal: Principal, via: str, job_ids: tuple[str, ...], reason: str | None
    ) -> list[BulkOutcome]:
        """Bulk reject (the inbox's stale jobs, confirmed once): each job this key may
        see; one it may not is ``not_found`` in the outcomes, like one that does not exist.

        Raises: Forbidden (no agents:write or agents:read); InvalidRequest (no job, too
        many, or a bad reason).
        """
        self.require_reviewer(principal)
        check_bulk(job_ids, reason)
        seen: list[str] = []
        hidden: list[BulkOutcome] = []
        for job_id in job_ids:
            try:
                seen.append((await self.job(principal, job_id)).id)
            except NotFound as exc:
                hidden.append(BulkOutcome(job_id, False, exc.code, exc.message))
        done: list[BulkOutcome] = []
        if seen:
            actor = principal.actor(via)
            done = await _in_thread(self.gateway.reject_many, actor, tuple(seen), reason)
        return [*done, *hidden]

    async def check_endpoint(self, principal: Principal, via: str, copy_id: str) -> CheckResult:
        """The endpoint check (SPEC §11) on a test copy of an agent this key sees.

        Raises: Forbidden, and what ``operations.endpoint_check.check_endpoint`` raises.
        """
        self.require_reviewer(principal)
        gw = self.gateway
        copy = gw.config.resource(copy_id)
        if copy is not None and not principal.sees_agent(copy.agent_id):
            raise Forbidden(
                f"this key has no access to agent {copy.agent_id!r}", agent=copy.agent_id
            )
        actor = principal.actor(via)
        return await _in_thread(
            check_endpoint,
            gw.config,
            gw.ledger,
            gw.http,
            copy_id,
            gw.environ,
            actor=actor.label,
            access_path=actor.access_path,
        )

    def _visible_resource(self, principal: Principal, resource_id: str) -> None:
        """Raises: NotFound (unknown), Forbidden (an agent this key does not see)."""
        res = self.gateway.config.resource(resource_id)
        if res is None:
            raise NotFound(f"unknown resource {resource_id!r}", resource=resource_id)
        if not principal.sees_agent(res.agent_id):
            raise Forbidden(f"this key has no access to agent {res.agent_id!r}", agent=res.agent_id)

    async def undo_offer(self, principal: Principal, resource_id: str) -> UndoOffer:
        """What the ledger shows about a resource's verified undos (SPEC §12).

        Raises: Forbidden, NotFound."""
        self.require_reader(principal)
        self._visible_resource(principal, resource_id)
        return await _in_thread(self.gateway.undo_offer, resource_id)

    async def accept_verified_undo(
        self,
        principal: Principal,
        via: str,
        resource_id: str,
        *,
        passkey_assertion: str | None = None,
        passkey_expires_at_ms: int | None = None,
    ) -> UndoOffer:
        """A reviewer accepts, once, the undos a test copy verified (SPEC §12), with a
        passkey's approval where the resource requires one (SPEC §14), over the offer's
        document until the expiry the offer showed.

        Raises: Forbidden, NotFound, UndoNotVerified, InvalidRequest, PasskeyRequired,
        PasskeyRefused."""
        self.require_writer(principal)
        self._visible_resource(principal, resource_id)
        return await _in_thread(
            self.gateway.accept_verified_undo,
            principal.actor(via),
            resource_id,
            passkey_assertion=passkey_assertion,
            passkey_expires_at_ms=passkey_expires_at_ms,
        )

    # -- key administration (the master key, or an operator key with keys:admin) --------

    @staticmethod
    def _admin_actor(principal: Principal) -> str:
        return "master" if principal.kind == "master" else principal.credential_id

    async def list_keys(self, principal: Principal) -> list[CredentialInfo]:
        """Raises: Forbidden (as ``require_admin``)."""
        self.require_admin(principal)
        return await _in_thread(self.keyring.list)

    async def create_operator(
        self,
        principal: Principal,
        *,
        label: str,
        scopes: tuple[str, ...],
        agents: tuple[str, ...] | None,
    ) -> IssuedKey:
        """Raises: Forbidden (as ``require_admin``); what ``Keyring.create_operator``
        raises."""
        self.require_admin(principal)
        return await _in_thread(
            self.keyring.create_operator,
            label=label,
            scopes=scopes,
            agents=agents,
            actor=self._admin_actor(principal),
        )

    async def create_agent_token(
        self, principal: Principal, *, owner_id: str | None, agent_id: str, label: str
    ) -> IssuedKey:
        """A token for ``agent_id``. Its owner is ``owner_id``; unnamed, the operator
        asking (an operator key with keys:admin), or for the master key the only live
        operator key.

        Raises: Forbidden (as ``require_admin``); InvalidRequest (no owner named and not
        exactly one operator key); what ``Keyring.create_agent_token`` raises.
        """
        self.require_admin(principal)
        if owner_id is None:
            if principal.kind == "operator":
                owner_id = principal.owner_id
            else:
                owner_id = await _in_thread(self.keyring.only_operator)
        return await _in_thread(
            self.keyring.create_agent_token,
            owner_id=owner_id,
            agent_id=agent_id,
            label=label,
            actor=self._admin_actor(principal),
        )

    async def export_page(
        self, principal: Principal, what: str, since: float, after: str | None
    ) -> JsonObject:
        """One page of the audit export (``operations.export``): ``events`` after the
        event id ``after``, or ``jobs`` after the job ``after``. Every owner's: it is an
        administrator's view, like the key listing.

        Raises: Forbidden (as ``require_admin``); InvalidRequest (an event cursor that is
        not a number).
        """
        self.require_admin(principal)
        ledger = self.gateway.ledger
        if what == "events":
            if after is not None and not (after.isascii() and after.isdigit()):
                raise InvalidRequest("after is the id of the last event of the page before")
            return await _in_thread(events_page, ledger, since, int(after or 0))
        return await _in_thread(jobs_page, ledger, since, after)

    async def revoke(self, principal: Principal, credential_id: str, *, force: bool) -> Revocation:
        """Raises: Forbidden (as ``require_admin``); what ``Keyring.revoke`` raises."""
        self.require_admin(principal)
        return await _in_thread(
            self.keyring.revoke, credential_id, force=force, actor=self._admin_actor(principal)
        )


__all__ = ["MAX_KEY_CHARS", "Principal", "Service", "bearer_key"]
