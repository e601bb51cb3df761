"""Authenticate once, authorize by name.

- **Authenticate once.** ``bearer_key`` reads an ``Authorization`` header the same way
  for every surface, and ``Authentication`` turns a presented key into a ``Principal``
  (the keyring's in-memory answer when it has one, else one ledger read in a worker
  thread). The web sign-in and each session's re-check go through it too.
- **Authorize by name, once.** A caller is a principal that a surface proved fit for
  one audience, on one access path: ``AgentCaller`` (an agent token), ``Reader``
  (agents:read), ``Writer`` (agents:write), ``Reviewer`` (both: a preview, a confirm or a
  reject shows a job's values), ``Administrator`` (the master key, or an operator key
  with keys:admin) and ``Master`` (the master key alone). Each class's ``of`` is the one
  place its question is asked; a surface declares, beside each route, which caller the
  route needs (the API's ``requires``), and every service verb takes that caller, so no
  verb can be reached without it and none asks again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self, TypeVar

import anyio

from ..auth import ADMIN, READ, WRITE, Keyring, Principal, require_scope
from ..errors import Forbidden, Unauthorized
from ..jobs import Actor

T = TypeVar("T")

MAX_KEY_CHARS = 512  # longer is no key undogate issued
UNKNOWN_CREDENTIAL = "the credential is missing, unknown or revoked"


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


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn`` on a worker thread: a ledger read or write never runs on the event loop."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


@dataclass(frozen=True)
class Authentication:
    """Keys in, principals out: the one authentication of every surface."""

    keyring: Keyring

    async def authenticate(self, key: str, *, over_long: str = UNKNOWN_CREDENTIAL) -> Principal:
        """The principal behind a presented key.

        Raises:
            Unauthorized: unknown, malformed or revoked; over-long (with ``over_long``,
                the surface's words for it), without a lookup.
        """
        if len(key) > MAX_KEY_CHARS:
            raise Unauthorized(over_long)
        principal = self.keyring.master(key)
        if principal is None:
            principal = await in_thread(self.keyring.authenticate, key)
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
        return await in_thread(self.keyring.recheck, principal)


@dataclass(frozen=True)
class Caller:
    """A principal a surface authorized for one audience, and the access path it came by
    (``api``, ``web``, ``mcp``: what the ledger's events record)."""

    principal: Principal
    via: str

    @classmethod
    def of(cls, principal: Principal, via: str) -> Self:
        """The principal as this caller; any authenticated principal is a ``Caller``
        (each subclass asks its one question here). Raises: Forbidden (it is not one)."""
        return cls(principal, via)

    @classmethod
    def may(cls, principal: Principal, via: str) -> Self | None:
        """The principal as this caller, or None when it is not one (for a page that
        shows a control only to those who may use it)."""
        try:
            return cls.of(principal, via)
        except Forbidden:
            return None

    @property
    def actor(self) -> Actor:
        return self.principal.actor(self.via)

    @property
    def owner_id(self) -> str:
        return self.principal.owner_id

    def sees_agent(self, agent_id: str) -> bool:
        return self.principal.sees_agent(agent_id)


@dataclass(frozen=True)
class AgentCaller(Caller):
    """An agent token: the agent it speaks for."""

    agent_id: str

    @classmethod
    def of(cls, principal: Principal, via: str, where: str = "this route") -> Self:
        """Raises: Forbidden: any other credential (``where`` names what refuses it)."""
        if principal.kind != "agent" or principal.agent_id is None:
            raise Forbidden(f"{where} is for agent tokens")
        return cls(principal, via, principal.agent_id)


@dataclass(frozen=True)
class Reader(Caller):
    """An operator key with agents:read: sees its owner's jobs of the agents it sees."""

    @classmethod
    def of(cls, principal: Principal, via: str) -> Self:
        """Raises: Forbidden unless an operator key with agents:read."""
        require_scope(principal, READ)
        return cls(principal, via)


@dataclass(frozen=True)
class Writer(Caller):
    """An operator key with agents:write: keeps its passkeys, accepts verified undos."""

    @classmethod
    def of(cls, principal: Principal, via: str) -> Self:
        """Raises: Forbidden unless an operator key with agents:write."""
        require_scope(principal, WRITE)
        return cls(principal, via)


@dataclass(frozen=True)
class Reviewer(Reader, Writer):
    """Write and read: previewing, confirming and rejecting show a job's values."""

    @classmethod
    def of(cls, principal: Principal, via: str) -> Self:
        """Raises: Forbidden unless an operator key with agents:write and agents:read."""
        require_scope(principal, WRITE)
        require_scope(principal, READ)
        return cls(principal, via)


@dataclass(frozen=True)
class Administrator(Caller):
    """Key administration and the audit export: the master key, or an operator key with
    keys:admin."""

    @classmethod
    def of(cls, principal: Principal, via: str) -> Self:
        """Raises: Forbidden unless the master key or an operator key with keys:admin."""
        if principal.kind != "master" and (
            principal.kind != "operator" or ADMIN not in principal.scopes
        ):
            raise Forbidden(
                f"key administration needs the master key or an operator key with {ADMIN}",
                scope=ADMIN,
            )
        return cls(principal, via)

    @property
    def label(self) -> str:
        """Who the keyring's events name as acting."""
        return "master" if self.principal.kind == "master" else self.principal.credential_id


@dataclass(frozen=True)
class Master(Caller):
    """The master key, which lives with the server: enrolling an owner's first passkey."""

    @classmethod
    def of(cls, principal: Principal, via: str) -> Self:
        """Raises: Forbidden unless the master key (an operator key never may)."""
        if principal.kind != "master":
            raise Forbidden(
                "an enrolment code is made on the server's host (`undogate passkeys enrol`) "
                "or with the master key, never with an operator key"
            )
        return cls(principal, via)


__all__ = [
    "MAX_KEY_CHARS",
    "Administrator",
    "AgentCaller",
    "Authentication",
    "Caller",
    "Master",
    "Reader",
    "Reviewer",
    "Writer",
    "bearer_key",
    "in_thread",
]
