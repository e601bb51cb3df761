"""The ledger's verbs on jobs, changes, actions, previews and events, in the SQL both
engines speak (``?`` placeholders: the PostgreSQL connection translates them).

These run on every prepare and confirm: each is the fewest statements its promise
needs, and the queries that must stay flat as the ledger grows are spelled exactly as
the partial indexes they use (the tests check their query plans on SQLite).

Where an engine lets two writes run at once (PostgreSQL), a verb that reads for a
decision takes the lock that decision needs first: ``_lock`` (a transaction-scoped lock
on a name) and ``_lock_job`` (the job's row). On SQLite both do nothing: ``BEGIN
IMMEDIATE`` already runs one write at a time.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

from ..errors import ChangedSincePreview, PreviewUsed
from ..jobs import (
    ABSENT,
    RUNNING_STATES,
    TERMINAL_STATES,
    UNRESOLVED_STATES,
    Action,
    ActionStatus,
    AssertionKind,
    Change,
    ChangeState,
    Job,
    JobState,
    Observation,
    Operation,
    SideValue,
)
from ..jsonvalue import JsonObject, dumps, loads_object
from .records import (
    Admission,
    Answer,
    EarlierJob,
    Event,
    JobSummary,
    OpenChange,
    StoredPreview,
)
from .sql_chain import CHAIN_LOCK, ChainVerbs, new_row
from .sql_counters import CounterVerbs, usage_after

# Spelled exactly as the partial index ``jobs_unresolved`` (migration 6) spells it:
# SQLite uses a partial index only for a query that repeats its WHERE term. Each count
# stops at the quota (the last ``?``), so even a ledger that held more unresolved jobs
# before a quota was set costs at most that many index entries. Built from enum
# constants only, never from input.
_UNRESOLVED = "state IN (" + ", ".join(f"'{s.value}'" for s in UNRESOLVED_STATES) + ")"
_COUNT = "SELECT COUNT(*) FROM (SELECT 1 FROM jobs WHERE owner_id = ? AND {} LIMIT ?) AS held"
COUNT_AGENT_SQL = _COUNT.format("agent_id = ? AND " + _UNRESOLVED)
COUNT_OWNER_SQL = _COUNT.format(_UNRESOLVED)
_COUNT_BOTH_SQL = f"SELECT ({COUNT_AGENT_SQL}), ({COUNT_OWNER_SQL})"
# The states a job ends in (``jobs_unfinished`` holds every other one), in state order.
_FINISHED = tuple(s.value for s in JobState if s in TERMINAL_STATES)


class JobVerbs(ChainVerbs, CounterVerbs):
    """Jobs, changes, actions, previews, events and counters, on one connection inside
    the transaction the store opened (see ``store.Transaction``)."""

    def count_unresolved(self, owner_id: str, agent_id: str | None, *, stop_at: int) -> int:
        if agent_id is None:
            row = self.connection.execute(COUNT_OWNER_SQL, (owner_id, stop_at)).fetchone()
        else:
            row = self.connection.execute(COUNT_AGENT_SQL, (owner_id, agent_id, stop_at)).fetchone()
        return int(row[0])

    def admit_job(
        self, owner_id: str, agent_id: str, payload: int, *, stop_at: tuple[int, int]
    ) -> Admission:
        # Under the chain's lock, which a write with events holds by its commit already
        # (asking again costs nothing); sent together, read together: on PostgreSQL
        # (pipelined) in the one round trip before the commit, after the chained inserts.
        self._lock(CHAIN_LOCK)
        counted = self.connection.execute(
            _COUNT_BOTH_SQL, (owner_id, agent_id, stop_at[0], owner_id, stop_at[1])
        )
        added = self._add_job(payload)
        agent_unresolved, owner_unresolved = counted.fetchone()
        return Admission(int(agent_unresolved), int(owner_unresolved), usage_after(added))

    def count_unfinished(self, owner_id: str) -> int:
        row = self.connection.execute(
            "SELECT COUNT(*) FROM jobs WHERE owner_id = ? AND state NOT IN ("  # noqa: S608
            + ", ".join("?" * len(_FINISHED))
            + ")",
            (owner_id, *_FINISHED),
        ).fetchone()
        return int(row[0])

    # -- events ----------------------------------------------------------------------

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
        self.append_event(
            new_row(
                job_id=job_id,
                actor=actor,
                access_path=access_path,
                operation=operation,
                target=target,
                from_state=from_state,
                to_state=to_state,
                detail=dumps(detail) if detail is not None else None,
            )
        )

    def events(self, job_id: str) -> list[Event]:
        rows = self.connection.execute(
            "SELECT id, job_id, at, actor, access_path, operation, target, from_state, "
            "to_state, detail FROM events WHERE job_id = ? ORDER BY id",
            (job_id,),
        ).fetchall()
        return [
            Event(
                id=event_id,
                job_id=job,
                at=at,
                actor=actor,
                access_path=path,
                operation=operation,
                target=target,
                from_state=from_state,
                to_state=to_state,
                detail=loads_object(detail) if detail else None,
            )
            for (
                event_id,
                job,
                at,
                actor,
                path,
                operation,
                target,
                from_state,
                to_state,
                detail,
            ) in rows
        ]

    # -- jobs ------------------------------------------------------------------------

    def insert_job(self, job: Job, request_digest: str, payload: int) -> None:
        c = self.connection
        c.execute(
            "INSERT INTO jobs(id, owner_id, agent_id, summary, attribution_label, "
            "idempotency_key, request_digest, state, undo_started, payload_bytes, "
            "created_at, updated_at, session) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
            (
                job.id,
                job.owner_id,
                job.agent_id,
                job.summary,
                job.attribution_label,
                job.idempotency_key,
                request_digest,
                job.state.value,
                payload,
                job.created_at,
                job.updated_at,
                job.session,
            ),
        )
        for ch in job.changes:
            c.execute(_INSERT_CHANGE, (job.id, *_change_row(ch)))

    def load_job(self, job_id: str, *, with_actions: bool = True) -> Job | None:
        c = self.connection
        self._lock_job(job_id)  # a write decides on what it loads: hold it to the commit
        # All asked before any is read: on PostgreSQL one round trip, not three.
        found = c.execute(
            "SELECT id, owner_id, agent_id, summary, attribution_label, idempotency_key, state, "
            "undo_started, created_at, updated_at, invalidated_reason, session FROM jobs "
            "WHERE id = ?",
            (job_id,),
        )
        change_rows = c.execute(_SELECT_CHANGES, (job_id,))
        action_rows = c.execute(_SELECT_ACTIONS, (job_id,)) if with_actions else None
        row = found.fetchone()
        if row is None:
            return None
        changes = tuple(change_from_row(r) for r in change_rows)
        actions: tuple[Action, ...] = ()
        if action_rows is not None:
            actions = tuple(_action_from_row(r) for r in action_rows)
        return Job(
            id=row[0],
            owner_id=row[1],
            agent_id=row[2],
            summary=row[3],
            attribution_label=row[4],
            idempotency_key=row[5],
            state=JobState(row[6]),
            undo_started=bool(row[7]),
            created_at=row[8],
            updated_at=row[9],
            invalidated_reason=row[10],
            session=row[11],
            changes=changes,
            actions=actions,
        )

    def list_jobs(self, owner_id: str, agent_id: str, limit: int = 100) -> list[JobSummary]:
        return [
            JobSummary(*r)
            for r in self.connection.execute(
                "SELECT j.id, j.state, j.summary, j.created_at, "
                "(SELECT COUNT(*) FROM changes ch WHERE ch.job_id = j.id) "
                "FROM jobs j WHERE j.owner_id = ? AND j.agent_id = ? "
                "ORDER BY j.seq DESC LIMIT ?",
                (owner_id, agent_id, limit),
            )
        ]

    def find_idempotent(self, owner_id: str, agent_id: str, key: str) -> EarlierJob | None:
        self._lock(f"idempotency:{owner_id}/{agent_id}/{key}")
        row = self.connection.execute(
            "SELECT id, request_digest, created_at FROM jobs WHERE owner_id = ? "
            "AND agent_id = ? AND idempotency_key = ? ORDER BY seq DESC LIMIT 1",
            (owner_id, agent_id, key),
        ).fetchone()
        return EarlierJob(row[0], row[1], row[2]) if row else None

    def confirm_attempts(self, job_id: str) -> int:
        row = self.connection.execute(
            "SELECT confirm_attempts FROM jobs WHERE id = ?", (job_id,)
        ).fetchone()
        return int(row[0]) if row else 0

    def count_confirm_attempt(self, job_id: str) -> None:
        self.connection.execute(
            "UPDATE jobs SET confirm_attempts = confirm_attempts + 1 WHERE id = ?", (job_id,)
        )

    def set_job_state(
        self,
        job_id: str,
        state: JobState,
        *,
        undo_started: bool | None = None,
        invalidated_reason: str | None = None,
    ) -> None:
        # A job that starts running names the lease of the process running it, so
        # recovery elsewhere leaves it alone while that process lives (sql_leases).
        runner = ", runner_lease = ?" if state in RUNNING_STATES else ""
        self.connection.execute(
            "UPDATE jobs SET state = ?, updated_at = ?, "  # noqa: S608 - constants only
            "undo_started = COALESCE(?, undo_started), "
            f"invalidated_reason = COALESCE(?, invalidated_reason){runner} WHERE id = ?",
            (
                state.value,
                time.time(),
                None if undo_started is None else int(undo_started),
                invalidated_reason,
                *((self.lease_id,) if runner else ()),
                job_id,
            ),
        )

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
        c = self.connection
        if stamp_seq:
            # The counter's new value is read by the update, not by us: no round trip.
            self._bump("op_seq", 1)
        c.execute(
            _STAMPED_CHANGE if stamp_seq else _MOVED_CHANGE,
            (state.value, applied_etag, target, job_id, index),
        )

    def open_changes(self, resource_ids: Sequence[str], exclude_job: str) -> list[OpenChange]:
        """Other jobs' changes that hold any of ``resource_ids`` (any identity: a
        quarantine outlives a config change), writes in flight first. Two indexed reads
        (actions_in_flight and changes_live) in one statement for them all: one round
        trip, and one snapshot even under READ COMMITTED, so an outcome that commits
        meanwhile cannot move a change out of both halves."""
        listed = ", ".join("?" * len(resource_ids)) or "NULL"  # none: holds nothing
        rows = self.connection.execute(
            "SELECT ch.job_id, ch.resource_id, ch.kind, ch.fields, ch.state, "  # noqa: S608 - placeholders only
            "ch.applied_seq, ch.fingerprint, 1, ch.target "
            "FROM actions a JOIN changes ch ON ch.job_id = a.job_id AND ch.idx = a.change_idx "
            f"WHERE a.status = 'dispatching' AND ch.resource_id IN ({listed}) AND a.job_id != ? "
            "UNION ALL "
            "SELECT job_id, resource_id, kind, fields, state, applied_seq, fingerprint, 0, target "
            f"FROM changes WHERE resource_id IN ({listed}) "
            "AND state IN ('applied', 'uncertain') AND job_id != ? "
            "ORDER BY 8 DESC",
            (*resource_ids, exclude_job, *resource_ids, exclude_job),
        ).fetchall()
        return [
            OpenChange(
                job_id=r[0],
                resource_id=r[1],
                kind=r[2],
                fields=_fields_from_json(r[3]),
                state=ChangeState(r[4]),
                applied_seq=r[5],
                fingerprint=r[6],
                in_flight=bool(r[7]),
                target=r[8],
            )
            for r in rows
        ]

    # -- actions ---------------------------------------------------------------------

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
        inserted = self.connection.execute(
            "INSERT INTO actions(job_id, change_idx, operation, status, method, url, if_match, "
            "started_at, lease_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                job_id,
                change_idx,
                operation.value,
                ActionStatus.DISPATCHING.value,
                method,
                url,
                if_match,
                time.time(),
                self.lease_id,
            ),
        )
        return self._answer(inserted, lambda cursor: int(cursor.fetchone()[0]))

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
        # An outcome lands only on a write still in flight: of a late outcome and the
        # recovery that settled its write as uncertain (its lease expired), exactly one
        # moves the row. Only a reconciliation moves a write already settled.
        sql = _FINISH_ACTION if status is ActionStatus.ACCEPTED else _FINISH_IN_FLIGHT
        moved = self.connection.execute(
            sql,
            (
                status.value,
                response_status,
                result_etag,
                address,
                detail,
                observation.value if observation else None,
                time.time(),
                action_id,
            ),
        )
        return self._answer(moved, lambda cursor: cursor.fetchone() is not None)

    # -- previews --------------------------------------------------------------------

    def insert_preview(
        self,
        *,
        token_hash: str,
        job_id: str,
        operation: Operation,
        expires_at: float,
        snapshot: JsonObject,
    ) -> None:
        c = self.connection
        c.execute(
            "INSERT INTO previews(token_hash, job_id, operation, created_at, expires_at, "
            "snapshot, base_seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                token_hash,
                job_id,
                operation.value,
                time.time(),
                expires_at,
                dumps(snapshot),
                self.latest_consumed_seq(job_id) or 0,
            ),
        )

    def load_preview(self, token_hash: str) -> StoredPreview | None:
        c = self.connection
        row = c.execute(
            "SELECT token_hash, job_id, operation, created_at, expires_at, consumed_at, op_seq, "
            "snapshot FROM previews WHERE token_hash = ?",
            (token_hash,),
        ).fetchone()
        if row is None:
            return None
        return StoredPreview(
            token_hash=row[0],
            job_id=row[1],
            operation=Operation(row[2]),
            created_at=row[3],
            expires_at=row[4],
            consumed_at=row[5],
            op_seq=row[6],
            snapshot=loads_object(row[7]),
        )

    def latest_consumed_seq(self, job_id: str) -> int | None:
        row = self.connection.execute(_LATEST_CONSUMED, (job_id,)).fetchone()
        return row[0] if row and row[0] is not None else None

    def claim_preview(self, token_hash: str, job_id: str, expected_state: str) -> Answer[int]:
        """Consume the preview for one operation; answers its operation sequence number.

        Inside the write transaction, so of two concurrent confirms exactly one wins:
        the other finds the token spent, or the job moved on.

        Raises:
            PreviewUsed: another confirm consumed this token first, or another operation
                ran on the job after this preview was made.
            ChangedSincePreview: the job's state moved since this confirm read it.
        """
        c = self.connection
        self._lock_job(job_id)
        # All asked before any is read: on PostgreSQL one round trip, not three.
        preview = c.execute(
            "SELECT consumed_at, base_seq FROM previews WHERE token_hash = ?"  # noqa: S608
            + self.for_update,
            (token_hash,),
        )
        latest = c.execute(_LATEST_CONSUMED, (job_id,))
        state = c.execute("SELECT state FROM jobs WHERE id = ?", (job_id,))
        row = preview.fetchone()
        if row is None or row[0] is not None:
            raise PreviewUsed("this preview was used by another confirm; preview again")
        if (latest.fetchone()[0] or 0) != row[1]:
            raise PreviewUsed(
                "another operation ran on this job after this preview; preview again",
                job=job_id,
            )
        now = state.fetchone()
        if now is None or now[0] != expected_state:
            raise ChangedSincePreview(
                "the job moved on while this confirm was checking it; nothing was written. "
                "Preview again",
                job=job_id,
            )
        seq = self._bump("op_seq", 1)  # read back by the update: no round trip
        c.execute(_CLAIMED_PREVIEW, (time.time(), token_hash))
        return self._answer(seq, lambda cursor: int(cursor.fetchone()[0]))


# Cached: a resource's field list is stored with every change to it, so the overlap
# checks of a confirm parse the same few lists once per earlier job on the resource.
@functools.lru_cache(maxsize=1024)
def _fields_from_json(fields_json: str) -> tuple[str, ...]:
    fields_value = loads_object('{"f":' + fields_json + "}")["f"]
    assert isinstance(fields_value, list)
    return tuple(str(f) for f in fields_value)


# An outcome lands only on a write still in flight: of a late outcome and the recovery
# that settled its write as uncertain (its lease expired), exactly one moves the row.
# Only a reconciliation (``accepted``) moves a write already settled.
# A change moved; one applied now is stamped with the operation sequence number its own
# write just bumped (read back inside the same write, where no other write can move it).
_MOVED_CHANGE = (
    "UPDATE changes SET state = ?, applied_etag = COALESCE(?, applied_etag), "
    "target = COALESCE(?, target) WHERE job_id = ? AND idx = ?"
)
_OP_SEQ = "SELECT CAST(value AS BIGINT) FROM meta WHERE key = 'op_seq'"
_STAMPED_CHANGE = _MOVED_CHANGE.replace(
    "target = COALESCE", f"applied_seq = ({_OP_SEQ}), target = COALESCE"
)
_CLAIMED_PREVIEW = f"UPDATE previews SET consumed_at = ?, op_seq = ({_OP_SEQ}) WHERE token_hash = ?"  # noqa: S608
_LATEST_CONSUMED = "SELECT MAX(op_seq) FROM previews WHERE job_id = ? AND consumed_at IS NOT NULL"
_SELECT_ACTIONS = (
    "SELECT id, job_id, change_idx, operation, status, method, url, if_match, "
    "response_status, result_etag, address, detail, observation, started_at, "
    "finished_at FROM actions WHERE job_id = ? ORDER BY id"
)
_FINISH_ACTION = (
    "UPDATE actions SET status = ?, response_status = COALESCE(?, response_status), "
    "result_etag = COALESCE(?, result_etag), address = COALESCE(?, address), "
    "detail = COALESCE(?, detail), observation = COALESCE(?, observation), "
    "finished_at = ? WHERE id = ?"
)
_FINISH_IN_FLIGHT = _FINISH_ACTION + " AND status = 'dispatching' RETURNING id"
_FINISH_ACTION += " RETURNING id"


# -- a change as a row: its encoding, in one place ----------------------------------------

# Written by a prepare (applied_etag and applied_seq start empty) and read back.
CHANGE_COLUMNS = (
    "idx, resource_id, kind, fingerprint, fields, before_side, after_side, media_type, "
    "prepared_etag, assertion_kind, state, applied_etag, applied_seq, target"
)
_SELECT_CHANGES = f"SELECT {CHANGE_COLUMNS} FROM changes WHERE job_id = ? ORDER BY idx"  # noqa: S608
_INSERT_CHANGE = (
    "INSERT INTO changes(job_id, idx, resource_id, kind, fingerprint, fields, before_side, "
    "after_side, media_type, prepared_etag, assertion_kind, state, target) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _side_text(side: SideValue) -> str | None:
    """A side as stored: NULL where the resource does not exist, else lossless JSON."""
    return None if side is ABSENT else dumps(side)


def _side_value(text: str | None) -> SideValue:
    return ABSENT if text is None else loads_object(text)


def _change_row(ch: Change) -> tuple[Any, ...]:
    """The values of ``_INSERT_CHANGE`` after the job id."""
    return (
        ch.index,
        ch.resource_id,
        ch.kind,
        ch.fingerprint,
        dumps(list(ch.fields)),
        _side_text(ch.before),
        _side_text(ch.after),
        ch.media_type,
        ch.prepared_etag,
        ch.assertion_kind.value if ch.assertion_kind else None,
        ch.state.value,
        ch.target,
    )


def change_from_row(r: Sequence[Any]) -> Change:
    """A row of ``CHANGE_COLUMNS``."""
    return Change(
        index=r[0],
        resource_id=r[1],
        kind=r[2],
        fingerprint=r[3],
        fields=_fields_from_json(r[4]),
        before=_side_value(r[5]),
        after=_side_value(r[6]),
        media_type=r[7],
        prepared_etag=r[8],
        assertion_kind=AssertionKind(r[9]) if r[9] else None,
        state=ChangeState(r[10]),
        applied_etag=r[11],
        applied_at=r[12],
        target=r[13],
    )


def _action_from_row(r: tuple[Any, ...]) -> Action:
    return Action(
        id=r[0],
        job_id=r[1],
        change_index=r[2],
        operation=Operation(r[3]),
        status=ActionStatus(r[4]),
        method=r[5],
        url=r[6],
        if_match=r[7],
        response_status=r[8],
        result_etag=r[9],
        address=r[10],
        detail=r[11],
        observation=Observation(r[12]) if r[12] else None,
        started_at=r[13],
        finished_at=r[14],
    )
