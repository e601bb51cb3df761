"""Credentials: operator keys (owners), agent tokens and the master key.

- An **operator key** is an owner. Its scopes are ``agents:read`` (see jobs) and
  ``agents:write`` (preview, confirm, undo, reconcile, reject); it may be limited to some
  agents. ``keys:admin`` (opt-in; ``init``'s first key has it) lets it administer
  credentials over the API as the master key does. Replacing a key creates a new owner.
- An **agent token** is issued by one owner for one agent. It can list that agent's
  resources and prepare jobs for that owner, nothing else.
- The **master key** (``UNDOGATE_MASTER_KEY``) administers credentials. It owns no jobs
  and reads none.

Keys are 256 bits from ``secrets``, with a visible prefix (``ugo_`` operator, ``uga_``
agent) and a public id inside, shown once and stored only as SHA-256 hashes. A presented
key is looked up by its public id and compared by hash in constant time.
"""

from __future__ import annotations

import hmac
import logging
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from .chain.seals import CREDENTIAL_CREATED, credential_problem, credential_seal
from .digests import sha256_hex
from .errors import Conflict, Forbidden, InvalidRequest, NotFound, Unauthorized
from .jobs import Actor
from .jsonvalue import JsonNumber, JsonObject
from .ledger import Store, StoredCredential, Transaction

READ = "agents:read"
WRITE = "agents:write"
ADMIN = "keys:admin"
SCOPES = (READ, WRITE)  # what an operator key gets unless it asks for more
ALL_SCOPES = (READ, WRITE, ADMIN)
OPERATOR_PREFIX = "ugo_"
AGENT_PREFIX = "uga_"
MASTER_ENV = "UNDOGATE_MASTER_KEY"
MIN_MASTER_KEY_CHARS = 32
_ID_HEX = 12
#: Anything shaped like a key this module issues: its prefix, for an operator key or an
#: agent token its public id (group ``id``, the credential's id, which is no secret),
#: then the secret part. Log lines are scrubbed of it (``cli.redact``): a client may put a
#: key where a name goes (a path, a field), and the refusal quotes that name.
KEY_SHAPE = re.compile(r"(?P<id>ug[oa]_[0-9a-f]{12}_|ugm_)[A-Za-z0-9_-]{20,}")
_DUMMY_HASH = sha256_hex(b"undogate: no such credential")
log = logging.getLogger(__name__)

Kind = Literal["operator", "agent", "master"]


@dataclass(frozen=True)
class Principal:
    """Who presented a credential, and what it allows."""

    credential_id: str
    kind: Kind
    owner_id: str
    agent_id: str | None = None
    scopes: frozenset[str] = frozenset()
    agents: frozenset[str] | None = None  # operators: None means every agent
    # The label its issuer gave the key ("Signed in as ..."): a name, never a secret.
    label: str = ""

    def actor(self, access_path: str) -> Actor:
        if self.kind == "agent":
            assert self.agent_id is not None
            return Actor(self.agent_id, self.owner_id, "agent", access_path)
        return Actor(self.credential_id, self.owner_id, self.kind, access_path)

    def sees_agent(self, agent_id: str) -> bool:
        return self.kind == "operator" and (self.agents is None or agent_id in self.agents)


@dataclass(frozen=True)
class CredentialInfo:
    """A stored credential as listings show it (never the key, never its hash)."""

    id: str
    kind: Literal["operator", "agent"]
    owner_id: str
    agent_id: str | None
    scopes: tuple[str, ...]
    agents: tuple[str, ...] | None
    label: str
    created_at: float
    revoked_at: float | None

    def to_json(self) -> JsonObject:
        return {
            "id": self.id,
            "kind": self.kind,
            "owner_id": self.owner_id,
            "agent_id": self.agent_id,
            "scopes": list(self.scopes),
            "agents": list(self.agents) if self.agents is not None else None,
            "label": self.label,
            "created_at": _num(self.created_at),
            "revoked": self.revoked_at is not None,
            "revoked_at": _num(self.revoked_at) if self.revoked_at is not None else None,
        }


@dataclass(frozen=True)
class IssuedKey:
    """A new credential and its key. The key exists only here: it is shown once."""

    key: str
    credential: CredentialInfo

    def to_json(self) -> JsonObject:
        return {
            "key": self.key,
            "credential": self.credential.to_json(),
            "note": "store this key now: undogate keeps only its hash and cannot show it again",
        }


@dataclass(frozen=True)
class Revocation:
    credential: CredentialInfo
    also_revoked: tuple[str, ...]  # agent tokens issued by a revoked operator key
    unresolved_jobs: int

    def to_json(self) -> JsonObject:
        return {
            "credential": self.credential.to_json(),
            "also_revoked": list(self.also_revoked),
            "unresolved_jobs": _num(self.unresolved_jobs),
        }


def _num(value: float | int) -> JsonNumber:
    return JsonNumber(repr(value) if isinstance(value, float) else str(value))


def _new_key(prefix: str) -> tuple[str, str]:
    public = secrets.token_hex(_ID_HEX // 2)
    return public, f"{prefix}{public}_{secrets.token_urlsafe(32)}"


def _credential_id(key: str) -> str | None:
    """The public id inside a presented key, or None when it has no such shape."""
    for prefix, id_prefix in ((OPERATOR_PREFIX, "op_"), (AGENT_PREFIX, "at_")):
        if key.startswith(prefix):
            public = key[len(prefix) : len(prefix) + _ID_HEX]
            sep = key[len(prefix) + _ID_HEX : len(prefix) + _ID_HEX + 1]
            if sep == "_" and all(c in "0123456789abcdef" for c in public):
                return id_prefix + public
    return None


def _info(stored: StoredCredential) -> CredentialInfo:
    return CredentialInfo(
        id=stored.id,
        kind=stored.kind,
        owner_id=stored.owner_id,
        agent_id=stored.agent_id,
        scopes=stored.scopes,
        agents=stored.agents,
        label=stored.label,
        created_at=stored.created_at,
        revoked_at=stored.revoked_at,
    )


class Keyring:
    """Create, list, revoke and check credentials; every change is one ledger write
    with its event row."""

    def __init__(
        self,
        ledger: Store,
        *,
        master_key: str | None = None,
        known_agents: Callable[[], set[str]] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if master_key is not None and len(master_key) < MIN_MASTER_KEY_CHARS:
            raise InvalidRequest(
                f"{MASTER_ENV} must be at least {MIN_MASTER_KEY_CHARS} characters "
                "(use `undogate keys master` to make one)"
            )
        self.ledger = ledger
        self._master_hash = sha256_hex(master_key) if master_key else None
        self._known_agents = known_agents
        self._clock = clock
        # No memo of verified keys: another process sharing the ledger (a worker, the
        # CLI) may revoke a key at any moment, so every request reads the ledger.

    @classmethod
    def from_environ(
        cls,
        ledger: Store,
        environ: Mapping[str, str],
        known_agents: Callable[[], set[str]] | None = None,
    ) -> Keyring:
        return cls(ledger, master_key=environ.get(MASTER_ENV) or None, known_agents=known_agents)

    @property
    def has_master(self) -> bool:
        return self._master_hash is not None

    # -- authenticate --------------------------------------------------------------

    def master(self, presented: str) -> Principal | None:
        """The master key's principal, without touching the ledger (cheap enough for an
        event loop); None: not the master key, call ``authenticate``."""
        presented_hash = sha256_hex(presented)
        if self._master_hash is not None and hmac.compare_digest(presented_hash, self._master_hash):
            return _MASTER
        return None

    def authenticate(self, presented: str) -> Principal:
        """The principal for a presented key.

        Raises:
            Unauthorized: unknown, malformed or revoked key (one answer for all three).
        """
        presented_hash = sha256_hex(presented)
        if self._master_hash is not None and hmac.compare_digest(presented_hash, self._master_hash):
            return _MASTER
        cred_id = _credential_id(presented)
        found = None
        if cred_id is not None:
            found = self.ledger.read(lambda tx: tx.credential(cred_id))
        stored_hash = found.key_hash if found is not None else _DUMMY_HASH
        matches = hmac.compare_digest(presented_hash, stored_hash)
        if found is None or not matches or found.revoked_at is not None or _forged(found):
            raise Unauthorized("the credential is missing, unknown or revoked")
        return self._principal(_info(found))

    def recheck(self, principal: Principal) -> Principal:
        """The same credential, re-read now (for the check before each dispatch).

        Raises:
            Unauthorized: it was revoked since.
        """
        if principal.kind == "master":
            return principal
        found = self.ledger.read(lambda tx: tx.credential(principal.credential_id))
        if found is None or found.revoked_at is not None or _forged(found):
            raise Unauthorized("the credential was revoked")
        return self._principal(_info(found))

    @staticmethod
    def _principal(info: CredentialInfo) -> Principal:
        return Principal(
            credential_id=info.id,
            kind=info.kind,
            owner_id=info.owner_id,
            agent_id=info.agent_id,
            scopes=frozenset(info.scopes),
            agents=frozenset(info.agents) if info.agents is not None else None,
            label=info.label,
        )

    # -- create ----------------------------------------------------------------------

    def create_operator(
        self,
        *,
        label: str,
        scopes: tuple[str, ...] = SCOPES,
        agents: tuple[str, ...] | None = None,
        actor: str = "cli",
    ) -> IssuedKey:
        """A new operator key: a new owner.

        Raises:
            InvalidRequest: unknown scope, empty scopes, bad label or unknown agent; a
                key with keys:admin limited to some agents or scopes.
        """
        label = _check_label(label)
        if not scopes or any(s not in ALL_SCOPES for s in scopes):
            raise InvalidRequest(f"scopes must be a non-empty subset of {', '.join(ALL_SCOPES)}")
        if ADMIN in scopes and (agents is not None or set(scopes) != set(ALL_SCOPES)):
            # keys:admin mints any key for any owner: a narrower admin key would only
            # look narrower, so the ledger never holds one.
            raise InvalidRequest(
                f"a key with {ADMIN} can make any key, so it holds every scope and every "
                "agent: make it without --agent and --read-only, or a narrower key "
                "without --admin"
            )
        if agents is not None:
            for agent in agents:
                self._check_agent(agent)
        public, key = _new_key(OPERATOR_PREFIX)
        cred_id = "op_" + public
        ordered = tuple(s for s in ALL_SCOPES if s in scopes)
        agent_list = tuple(sorted(set(agents))) if agents is not None else None
        return self._insert(
            key, cred_id, "operator", cred_id, None, ordered, agent_list, label, actor
        )

    def create_agent_token(
        self, *, owner_id: str, agent_id: str, label: str, actor: str = "cli"
    ) -> IssuedKey:
        """A token for ``agent_id`` whose jobs belong to ``owner_id``.

        Raises:
            NotFound: no such live operator key.
            InvalidRequest: unknown agent or bad label.
        """
        label = _check_label(label)
        self._check_agent(agent_id)
        owner = self.get(owner_id)
        if owner.kind != "operator" or owner.revoked_at is not None:
            raise NotFound(f"no live operator key {owner_id!r}", credential=owner_id)
        if owner.agents is not None and agent_id not in owner.agents:
            raise InvalidRequest(
                f"operator {owner_id} has no access to agent {agent_id!r}", agent=agent_id
            )
        public, key = _new_key(AGENT_PREFIX)
        return self._insert(
            key, "at_" + public, "agent", owner_id, agent_id, (), None, label, actor
        )

    def _check_agent(self, agent_id: str) -> None:
        if self._known_agents is not None and agent_id not in self._known_agents():
            raise InvalidRequest(f"no agent {agent_id!r} is declared in the config", agent=agent_id)

    def _insert(
        self,
        key: str,
        cred_id: str,
        kind: Literal["operator", "agent"],
        owner_id: str,
        agent_id: str | None,
        scopes: tuple[str, ...],
        agents: tuple[str, ...] | None,
        label: str,
        actor: str,
    ) -> IssuedKey:
        row = StoredCredential(
            cred_id,
            kind,
            owner_id,
            agent_id,
            scopes,
            agents,
            label,
            self._clock(),
            None,
            sha256_hex(key),
        )

        def commit(tx: Transaction) -> None:
            tx.insert_credential(
                credential_id=row.id,
                kind=row.kind,
                owner_id=row.owner_id,
                agent_id=row.agent_id,
                scopes=row.scopes,
                agents=row.agents,
                label=row.label,
                key_hash=row.key_hash,
                created_at=row.created_at,
            )
            tx.add_event(
                job_id=None,
                actor=actor,
                access_path="admin",
                operation=CREDENTIAL_CREATED + kind,
                target=cred_id,
                detail={
                    "owner": owner_id,
                    "agent": agent_id,
                    "scopes": list(scopes),
                    "agents": list(agents) if agents is not None else None,
                    "label": label,
                    # The row as issued (seals.py): a key is only ever honoured as issued.
                    "seal": credential_seal(row),
                },
            )

        self.ledger.write(commit)
        return IssuedKey(key=key, credential=_info(row))

    # -- list / get ------------------------------------------------------------------

    def list(self) -> list[CredentialInfo]:
        return [_info(stored) for stored in self.ledger.read(lambda tx: tx.credentials())]

    def get(self, cred_id: str) -> CredentialInfo:
        """Raises: NotFound."""
        stored = self.ledger.read(lambda tx: tx.credential(cred_id))
        if stored is None:
            raise NotFound(f"no credential {cred_id!r}", credential=cred_id)
        return _info(stored)

    def only_operator(self) -> str:
        """The id of the one live operator key (the owner an agent token gets by default).

        Raises:
            InvalidRequest: there is none, or there are several (name one).
        """
        live = [c.id for c in self.list() if c.kind == "operator" and c.revoked_at is None]
        if len(live) != 1:
            which = f"{len(live)} live operator keys ({', '.join(live)})" if live else "none"
            raise InvalidRequest(
                f"name the owner (--owner op_...): there is not exactly one operator key "
                f"but {which}"
            )
        return live[0]

    def operator_count(self) -> int:
        return self.ledger.read(lambda tx: tx.count_live_operators())

    def unresolved_jobs(self, owner_id: str) -> int:
        """The owner's jobs that are not undone, rejected or invalidated."""
        return self.ledger.read(lambda tx: tx.count_unfinished(owner_id))

    # -- revoke ----------------------------------------------------------------------

    def revoke(self, cred_id: str, *, force: bool = False, actor: str = "cli") -> Revocation:
        """Revoke a credential. Revoking an operator key also revokes the agent tokens it
        issued (their jobs would belong to an owner nobody can act as).

        Raises:
            NotFound: no such credential.
            Conflict: already revoked; or an operator key that is the only owner of
                unresolved jobs, without ``force`` (nobody else can ever review them).
        """
        info = self.get(cred_id)
        if info.revoked_at is not None:
            raise Conflict(f"{cred_id} is already revoked", credential=cred_id)
        unresolved = self.unresolved_jobs(cred_id) if info.kind == "operator" else 0
        if unresolved and not force:
            raise Conflict(
                f"{cred_id} is the only owner of {unresolved} unresolved job(s); once it is "
                "revoked nobody can review, undo or reconcile them (jobs are private to their "
                "owner). Resolve them first, or revoke with --force",
                credential=cred_id,
                unresolved_jobs=unresolved,
                force_required=True,
            )
        now = self._clock()

        def commit(tx: Transaction) -> tuple[str, ...]:
            cascade: list[str] = []
            if info.kind == "operator":
                cascade = tx.live_agent_tokens(cred_id)
            for target in (cred_id, *cascade):
                reason = "revoked" if target == cred_id else f"its owner {cred_id} was revoked"
                tx.revoke_credential(target, at=now, reason=reason)
                tx.add_event(
                    job_id=None,
                    actor=actor,
                    access_path="admin",
                    operation="credential_revoke",
                    target=target,
                    detail={"reason": reason, "forced": force if target == cred_id else False},
                )
            return tuple(cascade)

        cascade = self.ledger.write(commit)
        return Revocation(self.get(cred_id), cascade, unresolved)


def _forged(stored: StoredCredential) -> bool:
    """Whether the credential is not what the chain issued and revoked (seals.py): a row
    inserted or edited behind the ledger. Refused like an unknown key; the operator is
    told which one (``undogate ledger verify`` names it too)."""
    problem = credential_problem(stored, stored.issued, stored.revoked_in_chain)
    if problem:
        log.error("credential %s refused: %s", stored.id, problem)
    return bool(problem)


_MASTER = Principal("master", "master", owner_id="master")


def _check_label(label: str) -> str:
    label = label.strip()
    if not 1 <= len(label) <= 200 or any(ord(ch) < 0x20 for ch in label):
        raise InvalidRequest("a label is 1 to 200 printable characters")
    return label


def new_master_key() -> str:
    return "ugm_" + secrets.token_urlsafe(32)


def require_scope(principal: Principal, scope: str) -> None:
    """Raises: Forbidden unless an operator credential holds ``scope``."""
    if principal.kind != "operator":
        raise Forbidden(f"this needs an operator key with {scope}")
    if scope not in principal.scopes:
        raise Forbidden(f"this operator key lacks the {scope} scope", scope=scope)


__all__ = [
    "ADMIN",
    "AGENT_PREFIX",
    "ALL_SCOPES",
    "KEY_SHAPE",
    "MASTER_ENV",
    "OPERATOR_PREFIX",
    "READ",
    "SCOPES",
    "WRITE",
    "CredentialInfo",
    "IssuedKey",
    "Keyring",
    "Principal",
    "Revocation",
    "new_master_key",
    "require_scope",
]
