"""What an administrator may do (the master key, or an operator key with keys:admin):
list, issue and revoke keys, and page through the audit export of every owner; and what
the master key alone may do: issue the code that enrols an owner's first passkey."""

from __future__ import annotations

from dataclasses import dataclass

from ..auth import CredentialInfo, IssuedKey, Keyring, Revocation
from ..errors import InvalidRequest
from ..jsonvalue import JsonObject
from ..operations import owner_passkeys
from ..operations.context import Context
from ..operations.export import events_page, jobs_page
from ..operations.owner_passkeys import IssuedEnrolment
from .access import Administrator, Master, in_thread


@dataclass(frozen=True)
class Administrators:
    context: Context
    keyring: Keyring

    async def list_keys(self, caller: Administrator) -> list[CredentialInfo]:
        return await in_thread(self.keyring.list)

    async def create_operator(
        self,
        caller: Administrator,
        *,
        label: str,
        scopes: tuple[str, ...],
        agents: tuple[str, ...] | None,
    ) -> IssuedKey:
        """Raises: what ``Keyring.create_operator`` raises."""
        return await in_thread(
            self.keyring.create_operator,
            label=label,
            scopes=scopes,
            agents=agents,
            actor=caller.label,
        )

    async def create_agent_token(
        self, caller: Administrator, *, owner_id: str | None, agent_id: str, label: str
    ) -> IssuedKey:
        """A token for ``agent_id``. Its owner is ``owner_id``; unnamed, the operator
        asking (an operator key with keys:admin), or for the master key the only live
        operator key.

        Raises: InvalidRequest (no owner named and not exactly one operator key); what
        ``Keyring.create_agent_token`` raises.
        """
        if owner_id is None:
            if caller.principal.kind == "operator":
                owner_id = caller.owner_id
            else:
                owner_id = await in_thread(self.keyring.only_operator)
        return await in_thread(
            self.keyring.create_agent_token,
            owner_id=owner_id,
            agent_id=agent_id,
            label=label,
            actor=caller.label,
        )

    async def revoke(self, caller: Administrator, credential_id: str, *, force: bool) -> Revocation:
        """Raises: what ``Keyring.revoke`` raises."""
        return await in_thread(self.keyring.revoke, credential_id, force=force, actor=caller.label)

    async def issue_passkey_enrolment(
        self, caller: Master, owner_id: str | None, *, replace: bool
    ) -> IssuedEnrolment:
        """A code that enrols an owner's first passkey (``replace``: after revoking its
        live ones). Unnamed, the owner is the only live operator key.

        Raises: InvalidRequest (no owner named and not exactly one operator key), and
        what ``owner_passkeys.issue_enrolment`` raises."""
        owner = owner_id or await in_thread(self.keyring.only_operator)
        return await in_thread(
            owner_passkeys.issue_enrolment, self.context, caller.actor, owner, replace=replace
        )

    async def export_page(
        self, caller: Administrator, what: str, since: float, after: str | None
    ) -> JsonObject:
        """One page of the audit export (``operations.export``): ``events`` after the
        event id ``after``, or ``jobs`` after the job ``after``. Every owner's: it is an
        administrator's view, like the key listing.

        Raises: InvalidRequest (an event cursor that is not a number).
        """
        if what == "events":
            if after is not None and not (after.isascii() and after.isdigit()):
                raise InvalidRequest("after is the id of the last event of the page before")
            return await in_thread(events_page, self.context, since, int(after or 0))
        return await in_thread(jobs_page, self.context, since, after)


__all__ = ["Administrators"]
