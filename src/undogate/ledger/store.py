"""The store protocol: the one door to the ledger, whichever engine is behind it.

A ``Store`` runs a caller's function inside one transaction and hands it a
``Transaction`` (``write``) or a ``Reader`` (``read``): objects that speak the
ledger's own verbs (claim a preview, begin an action, record an outcome, find the open
changes on a resource...). No SQL and no driver type crosses this line: only
``ledger/`` knows how an engine stores a job, and ``tests/ledger/test_store_*.py``
holds every engine to the same verbs.

What every engine promises:

- ``write`` runs its function as one transaction and commits it durably before
  returning, or rolls all of it back and raises: a state change and its event row
  commit together or not at all. Writes are serializable where it matters: SQLite runs
  one at a time; PostgreSQL runs them at once, and every verb that reads for a decision
  first takes the lock that decision needs (the job's row to claim a preview or when a
  write loads the job, the idempotency key, the owner's quota, the ledger-wide
  counters), and ``lock_resources`` serializes the checks on a resource (call it first).
- ``read`` sees one consistent snapshot of the last commit; called inside a ``write``
  (same thread) it reads that write's own transaction.
- Several processes may share the ledger (on either engine); each holds a lease
  (``own_lease``); the actions it begins and the jobs it runs name it, so recovery
  settles only the work of processes whose lease ended (``sql_leases``). A store opened
  without one (a copy) takes part in nothing.
- Events, jobs, changes, actions, credentials, passkeys and endpoint checks are never
  deleted, and events and endpoint checks never updated: the database itself refuses
  it. Every event carries the hash of the one before it (``sql_chain``), computed in
  the write that inserts it, so an edit behind the database's back shows.
- What the engine's driver raises leaves the store as ``LedgerError`` (damage as
  ``LedgerDamaged``); a ``UndogateError`` raised by the caller's function passes
  through unchanged, after the rollback.

A ``Reader`` or ``Transaction`` is valid only inside the call that received it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, Protocol, TypeVar

from ..jobs import ActionStatus, ChangeState, Job, JobState, Observation, Operation
from ..jsonvalue import JsonObject
from .records import (
    Admission,
    Answer,
    EarlierJob,
    Event,
    ExportedJob,
    InboxQuery,
    InboxRow,
    InFlightAction,
    JobSummary,
    LedgerUsage,
    OpenChange,
    OperatingFigures,
    StoredCheck,
    StoredCredential,
    StoredEnrolment,
    StoredPasskey,
    StoredPreview,
    StoredWebPreview,
    StoredWebSession,
    UndoAcceptance,
    UnfinishedJob,
)
from .store_leases import LeaseReader, LeaseWriter
from .store_outbox import OutboxReader, OutboxWriter
from .store_rewinds import RewindReader, RewindWriter

T = TypeVar("T")


class Reader(OutboxReader, RewindReader, LeaseReader, Protocol):
    """What a read may ask, inside one consistent snapshot."""

    # -- jobs ----------------------------------------------------------------------------

    def load_job(self, job_id: str, *, with_actions: bool = True) -> Job | None:
        """The job with its changes (and its actions, unless ``with_actions`` is off)."""
        ...

    def list_jobs(self, owner_id: str, agent_id: str, limit: int = 100) -> list[JobSummary]:
        """Newest first: (id, state, summary, created_at, change count). No values."""
        ...

    def events(self, job_id: str) -> list[Event]:
        """The job's events, oldest first."""
        ...

    def inbox(self, query: InboxQuery) -> list[InboxRow]:
        """One page of the review inbox (``sql_inbox``): newest first, no values."""
        ...

    def inbox_counts(self, owner_id: str, agents: tuple[str, ...]) -> dict[str, int]:
        """The owner's jobs of ``agents`` per unresolved state, and ``quarantined``."""
        ...

    def events_since(self, since: float, after_id: int, limit: int) -> list[Event]:
        """Every event at or after ``since`` with an id above ``after_id``, oldest first
        (the audit export, ``sql_export``)."""
        ...

    def jobs_since(self, since: float, after: str | None, limit: int) -> list[ExportedJob]:
        """Every job that moved at or after ``since``, in the order they were prepared,
        after the job ``after`` (the audit export); never a value."""
        ...

    def find_idempotent(self, owner_id: str, agent_id: str, key: str) -> EarlierJob | None:
        """The newest job this owner's agent prepared under idempotency ``key``."""
        ...

    def confirm_attempts(self, job_id: str) -> int:
        """How many confirmations of the job were counted (0 for no such job)."""
        ...

    # -- limits and quotas ------------------------------------------------------------------

    def counter(self, key: str) -> int:
        """A ledger-wide counter (``job_count``, ``payload_bytes``, ``op_seq``); 0 if unset."""
        ...

    def usage(self) -> LedgerUsage:
        """The counters the ledger-wide limits bound, read together."""
        ...

    def count_unresolved(self, owner_id: str, agent_id: str | None, *, stop_at: int) -> int:
        """The owner's jobs in ``jobs.UNRESOLVED_STATES`` (only ``agent_id``'s when
        given), counted no further than ``stop_at``: a quota check never reads more than
        its quota, however long the history."""
        ...

    def count_unfinished(self, owner_id: str) -> int:
        """The owner's jobs that are not undone, rejected or invalidated (an applied job
        still counts: someone may have to undo it)."""
        ...

    # -- overlaps and previews --------------------------------------------------------------

    def open_changes(self, resource_ids: Sequence[str], exclude_job: str) -> list[OpenChange]:
        """Other jobs' changes that hold any of ``resource_ids`` (whatever its identity
        now: a quarantine outlives a config change): writes in flight first, then
        applied or uncertain changes. One statement for them all."""
        ...

    def load_preview(self, token_hash: str) -> StoredPreview | None: ...

    def latest_consumed_seq(self, job_id: str) -> int | None:
        """The operation sequence number of the job's last claimed preview."""
        ...

    # -- start-up recovery ------------------------------------------------------------------

    def in_flight_actions(self) -> list[InFlightAction]:
        """Every action still ``dispatching`` (read through an index of exactly those)."""
        ...

    def running_jobs(self) -> list[str]:
        """The ids of jobs ``applying`` or ``undoing`` (an index of exactly those)."""
        ...

    def resource_identities(self) -> dict[str, str]:
        """Each resource's fingerprint as recorded at the last start: resource -> print."""
        ...

    def unfinished_jobs_on(self, resource_id: str, fingerprint: str) -> list[UnfinishedJob]:
        """Unfinished jobs with a change on ``resource_id`` prepared under another
        fingerprint than ``fingerprint``."""
        ...

    # -- credentials ------------------------------------------------------------------------

    def credential(self, credential_id: str) -> StoredCredential | None: ...

    def credentials(self) -> list[StoredCredential]:
        """Every credential, revoked ones included, oldest first."""
        ...

    def count_live_operators(self) -> int: ...

    def live_agent_tokens(self, owner_id: str) -> list[str]:
        """The ids of the unrevoked agent tokens ``owner_id`` issued, in id order."""
        ...

    # -- review sessions --------------------------------------------------------------------

    def web_session(self, id_hash: str) -> StoredWebSession | None:
        """The review session under the SHA-256 of its cookie value (in a write: its row
        held to the commit)."""
        ...

    def web_preview(self, session_hash: str, handle: str) -> StoredWebPreview | None:
        """A preview the session holds under ``handle``."""
        ...

    # -- passkeys (ledger/sql_passkeys.py) ---------------------------------------------------

    def passkey(self, passkey_id: str) -> StoredPasskey | None:
        """A passkey by its credential id (base64url), revoked or not."""
        ...

    def passkeys(self, owner_id: str) -> list[StoredPasskey]:
        """The owner's passkeys, revoked ones included, oldest first. In a write, the
        owner is held until the commit: another write that asks waits."""
        ...

    def passkey_challenge_used(self, challenge: str) -> bool:
        """Whether an approval with this challenge was recorded (a write holds it)."""
        ...

    def passkey_enrolment(self, code_sha256: str) -> StoredEnrolment | None:
        """The enrolment code with this SHA-256 (a write holds its row), spent or not."""
        ...

    # -- endpoint checks --------------------------------------------------------------------

    def latest_check_passed(self, resource_id: str, fingerprint: str) -> bool:
        """Whether the latest endpoint check of ``resource_id`` under ``fingerprint``
        passed (False when there is none).

        Raises:
            LedgerTampered: as ``latest_check``.
        """
        ...

    def latest_check(self, resource_id: str, fingerprint: str) -> StoredCheck | None:
        """The latest endpoint check of ``resource_id`` under ``fingerprint``, if any.

        Raises:
            LedgerTampered: it is not what its chained ``endpoint_check`` event recorded
                (a row inserted or edited behind the ledger).
        """
        ...

    def latest_undo_acceptance(self, resource_id: str) -> UndoAcceptance | None:
        """The latest ``undo_accepted`` event of ``resource_id``, if any."""
        ...

    def operating_figures(self) -> OperatingFigures:
        """What an operator watches now (``metrics``): uncertain writes and the resources
        they hold, writes in flight, the webhook backlog, the open leases."""
        ...


class Transaction(Reader, OutboxWriter, RewindWriter, LeaseWriter, Protocol):
    """What a write may do; it reads its own writes. Everything commits together."""

    # -- locks -----------------------------------------------------------------------------

    def lock_resources(self, resource_ids: Iterable[str]) -> None:
        """Hold these resources until the write commits: another write that checks or
        records a write on one of them waits (call it before reading for the check).
        Nothing to do where writes already run one at a time (SQLite)."""
        ...

    # -- jobs ----------------------------------------------------------------------------

    def insert_job(self, job: Job, request_digest: str, payload: int) -> None:
        """Record a prepared job and its changes (``count_job`` counts them)."""
        ...

    def admit_job(
        self, owner_id: str, agent_id: str, payload: int, *, stop_at: tuple[int, int]
    ) -> Admission:
        """Count a job just inserted (``count_job``) and the agent's and the owner's
        unresolved jobs, that one included (no further than ``stop_at``: agent, owner),
        all in one round trip; the caller refuses what they exceed (rolling it all
        back). Where writes run at once (PostgreSQL) it counts under the hash chain's
        lock, held to the commit: call it in ``check_before_commit``, where the write
        holds that lock already, so every admission of every owner is counted one at a
        time and no other lock (an owner's, the counter rows) is a queue of its own."""
        ...

    def count_job(self, payload: int) -> LedgerUsage:
        """Add one job of ``payload`` bytes to the ledger-wide counters, in one statement
        that holds their rows to the commit; the counters as they now stand. Call it
        last: a write that waits for those rows holds nothing another write needs."""
        ...

    def set_job_state(
        self,
        job_id: str,
        state: JobState,
        *,
        undo_started: bool | None = None,
        invalidated_reason: str | None = None,
    ) -> None:
        """Move the job (``updated_at`` is now); ``None`` leaves a column as it is."""
        ...

    def set_change_state(
        self,
        job_id: str,
        index: int,
        state: ChangeState,
        *,
        applied_etag: str | None = None,
        stamp_seq: bool = False,
        target: str | None = None,
    ) -> None:
        """Move one change; ``None`` leaves the applied version and target as they are
        (a create learns its target from the server's answer). ``stamp_seq``: applied
        now, so it takes the next operation sequence number (``next_seq``)."""
        ...

    def count_confirm_attempt(self, job_id: str) -> None:
        """One more confirmation of the job (``limits.max_confirm_attempts``)."""
        ...

    def next_seq(self) -> int:
        """The next operation sequence number (orders applies across jobs)."""
        ...

    # -- previews and actions ---------------------------------------------------------------

    def insert_preview(
        self,
        *,
        token_hash: str,
        job_id: str,
        operation: Operation,
        expires_at: float,
        snapshot: JsonObject,
    ) -> None:
        """Record a preview's token (by hash) and the versions it showed; it remembers
        the job's last claimed operation, so it can never run after a newer one."""
        ...

    def claim_preview(self, token_hash: str, job_id: str, expected_state: str) -> Answer[int]:
        """Consume the preview for one operation; answers its operation sequence number.

        Inside the write that records the operation's start, so of two concurrent
        confirms exactly one wins: the other finds the token spent, or the job moved on.

        Raises:
            PreviewUsed: another confirm consumed this token first, or another operation
                ran on the job after this preview was made.
            ChangedSincePreview: the job is no longer in ``expected_state``.
        """
        ...

    def begin_action(
        self,
        *,
        job_id: str,
        change_idx: int,
        operation: Operation,
        method: str,
        url: str,
        if_match: str | None,
    ) -> Answer[int]:
        """Record the intent of one external write (``dispatching``); answers its id
        (read it after the commit: it costs no round trip then)."""
        ...

    def finish_action(
        self,
        action_id: int,
        status: ActionStatus,
        *,
        response_status: int | None = None,
        result_etag: str | None = None,
        address: str | None = None,
        detail: str | None = None,
        observation: Observation | None = None,
    ) -> Answer[bool]:
        """Record the outcome of one external write; ``None`` keeps what was recorded.
        Only a write still ``dispatching`` takes an outcome (any status but
        ``accepted``, which reconciles an uncertain one): answers False when it had left
        ``dispatching`` already (recovery settled it: its process's lease expired)."""
        ...

    def check_before_commit(self, check: Callable[[], None]) -> None:
        """Run ``check`` before the commit, at the latest (it raises to roll the write
        back): where answers cost a round trip, the answers it reads share one."""
        ...

    # -- events -----------------------------------------------------------------------------

    def add_event(
        self,
        *,
        job_id: str | None,
        actor: str,
        access_path: str,
        operation: str,
        target: str | None = None,
        from_state: str | None = None,
        to_state: str | None = None,
        detail: JsonObject | None = None,
    ) -> None:
        """Append one event (now), linked into the hash chain. Events are never changed
        or deleted. Where writes run at once (PostgreSQL) it is inserted at the commit, so
        the chain's lock is the write's last: a read inside the same write misses it."""
        ...

    # -- credentials ------------------------------------------------------------------------

    def insert_credential(
        self,
        *,
        credential_id: str,
        kind: Literal["operator", "agent"],
        owner_id: str,
        agent_id: str | None,
        scopes: tuple[str, ...],
        agents: tuple[str, ...] | None,
        label: str,
        key_hash: str,
        created_at: float,
    ) -> None:
        """Record a new credential. It never changes after, except to be revoked."""
        ...

    def revoke_credential(self, credential_id: str, *, at: float, reason: str) -> None:
        """Revoke a credential; the ledger refuses to revoke one twice.

        Raises:
            LedgerError: it was revoked already (at the commit).
        """
        ...

    # -- review sessions --------------------------------------------------------------------

    def web_secret(self) -> str:
        """The ledger's key for the review pages' sign-in forms: random, made by the
        first write that asks, the same for every process (a form one process made is
        checked by another). Never shown; not part of the ledger's history."""
        ...

    def save_web_session(self, session: StoredWebSession) -> None:
        """Record a new session, or its ``last_seen`` and ``notice`` (nothing else of a
        session ever changes)."""
        ...

    def end_web_sessions(
        self,
        *,
        id_hash: str | None = None,
        credential_id: str | None = None,
        idle_since: float | None = None,
        created_before: float | None = None,
    ) -> int:
        """End (delete, with their previews) the sessions that match any one given
        condition: this one, every one of a credential, idle since, created before.
        Returns how many ended. Sessions are not history."""
        ...

    def hold_web_preview(self, held: StoredWebPreview, *, keep: int) -> None:
        """Hold a preview in its session, keeping only the session's newest ``keep``."""
        ...

    # -- passkeys ---------------------------------------------------------------------------

    def insert_passkey(self, passkey: StoredPasskey) -> None:
        """Register a passkey. Only its sign count changes after, and its revocation."""
        ...

    def revoke_passkey(self, passkey_id: str) -> None:
        """Revoke a passkey (now); the ledger refuses to revoke one twice."""
        ...

    def record_passkey_use(
        self, *, challenge: str, passkey_id: str, job_id: str | None, sign_count: int
    ) -> None:
        """Spend ``challenge`` (an approval's preview digest) once, and keep the
        passkey's new sign count. A second use of one challenge fails at the insert.
        ``job_id`` is None for the acceptance of a verified undo (it approves no job)."""
        ...

    def insert_passkey_enrolment(self, enrolment: StoredEnrolment) -> None:
        """Keep a new enrolment code (its hash). Only its spending changes it after."""
        ...

    def spend_passkey_enrolment(self, code_sha256: str, *, passkey_id: str, at: float) -> None:
        """Spend an enrolment code on the passkey it enrolled; the ledger refuses to
        spend one twice."""
        ...

    # -- start-up recovery and endpoint checks ------------------------------------------------

    def replace_resource_identities(self, identities: Mapping[str, str]) -> None:
        """Remember each resource's fingerprint (resource -> print) for the next start."""
        ...

    def record_endpoint_check(
        self,
        *,
        resource_id: str,
        test_copy_id: str,
        production_fingerprint: str,
        test_copy_fingerprint: str,
        passed: bool,
        evidence: str,
        actor: str,
        access_path: str,
    ) -> int:
        """Append one endpoint check's evidence (JSON text: digests, counts, statuses,
        never values) and its chained ``endpoint_check`` event (its id, outcome and the
        undos the evidence verified, by ``actor``); returns its id. Checks are never
        changed or deleted, and a check without its event is never trusted."""
        ...


class Store(Protocol):
    """One ledger, open. ``write`` and ``read`` are the door; the rest are reads for
    convenience, each one ``read``."""

    def write(self, fn: Callable[[Transaction], T]) -> T:
        """Run ``fn`` as one transaction; commit it durably or roll all of it back.

        Raises:
            LedgerError: the ledger could not start or commit the write (nothing of it
                was kept); LedgerDamaged when it is damaged. What ``fn`` raises passes
                through after the rollback.
        """
        ...

    def read(self, fn: Callable[[Reader], T]) -> T:
        """Run ``fn`` on one consistent snapshot of the last commit.

        Raises:
            LedgerError: the ledger could not be read (LedgerDamaged: it is damaged).
        """
        ...

    def load_job(self, job_id: str, *, with_actions: bool = True) -> Job | None: ...

    def events(self, job_id: str) -> list[Event]: ...

    def list_jobs(self, owner_id: str, agent_id: str, limit: int = 100) -> list[JobSummary]: ...

    def counter(self, key: str) -> int: ...

    @property
    def location(self) -> str:
        """Where the ledger is, as shown to a person (a path, or a URL without password)."""
        ...

    def describe(self) -> str:
        """The one start-up line: which ledger, where, how it was checked."""
        ...

    def close(self) -> None:
        """Release the ledger (idempotent)."""
        ...


class ReadShortcuts(ABC):
    """The reads callers make outside a transaction, each one ``read``: written once for
    every engine."""

    @abstractmethod
    def read(self, fn: Callable[[Reader], T]) -> T: ...

    def load_job(self, job_id: str, *, with_actions: bool = True) -> Job | None:
        return self.read(lambda tx: tx.load_job(job_id, with_actions=with_actions))

    def events(self, job_id: str) -> list[Event]:
        return self.read(lambda tx: tx.events(job_id))

    def list_jobs(self, owner_id: str, agent_id: str, limit: int = 100) -> list[JobSummary]:
        """Newest first, no values."""
        return self.read(lambda tx: tx.list_jobs(owner_id, agent_id, limit))

    def counter(self, key: str) -> int:
        return self.read(lambda tx: tx.counter(key))


__all__ = ["ReadShortcuts", "Reader", "Store", "Transaction"]
