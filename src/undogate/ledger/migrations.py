"""The SQLite engine's schema, as the migrations that build it, oldest first.

A ledger's ``PRAGMA user_version`` is the number of migrations it has run. Each runs in
its own ``BEGIN IMMEDIATE`` transaction with its version bump, so a crash leaves a
ledger at one version or the next, never between. Migrations are only ever appended.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ..errors import LedgerError
from .sql_chain import chain_existing_events

#: A migration is SQL, or a function that runs on the connection (where a step needs
#: what SQLite cannot compute itself, such as a SHA-256).
Migration = str | Callable[[sqlite3.Connection], None]


def _chain_events(conn: sqlite3.Connection) -> None:
    """11: the hash chain (ledger/sql_chain.py): every event carries the hash of the one
    before it; the rows written before are chained here, in id order. The update
    trigger steps aside for that one pass only."""
    for statement in (
        "ALTER TABLE events ADD COLUMN prev_hash TEXT",
        "ALTER TABLE events ADD COLUMN hash TEXT",
        "DROP TRIGGER events_append_only_update",
    ):
        conn.execute(statement)

    def execute(sql: str, parameters: Any) -> sqlite3.Cursor:
        return conn.execute(sql, parameters)

    chain_existing_events(execute)
    for statement in (
        "CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events "
        "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END",
        "CREATE UNIQUE INDEX events_chain_prev ON events(prev_hash)",
    ):
        conn.execute(statement)


_MIGRATIONS: list[Migration] = [
    # 1: the first schema.
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE jobs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        owner_id TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        summary TEXT NOT NULL,
        attribution_label TEXT,
        idempotency_key TEXT,
        request_digest TEXT NOT NULL,
        state TEXT NOT NULL,
        undo_started INTEGER NOT NULL DEFAULT 0,
        invalidated_reason TEXT,
        confirm_attempts INTEGER NOT NULL DEFAULT 0,
        payload_bytes INTEGER NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE UNIQUE INDEX jobs_idempotency ON jobs(owner_id, agent_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE INDEX jobs_by_agent ON jobs(owner_id, agent_id, seq DESC);
    CREATE INDEX jobs_unfinished ON jobs(state)
        WHERE state NOT IN ('undone', 'rejected', 'invalidated');
    CREATE TABLE changes (
        job_id TEXT NOT NULL REFERENCES jobs(id),
        idx INTEGER NOT NULL,
        resource_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        fields TEXT NOT NULL,
        before_json TEXT,
        after_json TEXT,
        before_text TEXT,
        after_text TEXT,
        media_type TEXT NOT NULL,
        prepared_etag TEXT NOT NULL,
        assertion_kind TEXT,
        state TEXT NOT NULL,
        applied_etag TEXT,
        applied_seq INTEGER,
        PRIMARY KEY (job_id, idx)
    );
    CREATE INDEX changes_live ON changes(resource_id, state)
        WHERE state IN ('applied', 'uncertain');
    CREATE TABLE actions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL REFERENCES jobs(id),
        change_idx INTEGER NOT NULL,
        operation TEXT NOT NULL,
        status TEXT NOT NULL,
        method TEXT NOT NULL,
        url TEXT NOT NULL,
        if_match TEXT,
        response_status INTEGER,
        result_etag TEXT,
        address TEXT,
        detail TEXT,
        observation TEXT,
        started_at REAL NOT NULL,
        finished_at REAL,
        FOREIGN KEY (job_id, change_idx) REFERENCES changes(job_id, idx)
    );
    CREATE INDEX actions_by_job ON actions(job_id, id);
    CREATE INDEX actions_in_flight ON actions(status) WHERE status = 'dispatching';
    CREATE TABLE previews (
        token_hash TEXT PRIMARY KEY,
        job_id TEXT NOT NULL REFERENCES jobs(id),
        operation TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        consumed_at REAL,
        op_seq INTEGER,
        snapshot TEXT NOT NULL,
        receipt_seq INTEGER
    );
    CREATE INDEX previews_by_job ON previews(job_id, consumed_at);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT,
        at REAL NOT NULL,
        actor TEXT NOT NULL,
        access_path TEXT NOT NULL,
        operation TEXT NOT NULL,
        target TEXT,
        from_state TEXT,
        to_state TEXT,
        detail TEXT
    );
    CREATE INDEX events_by_job ON events(job_id, id);
    CREATE TABLE resource_identities (
        resource_id TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL
    );
    CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER jobs_never_deleted BEFORE DELETE ON jobs
        BEGIN SELECT RAISE(ABORT, 'jobs are never deleted'); END;
    CREATE TRIGGER changes_never_deleted BEFORE DELETE ON changes
        BEGIN SELECT RAISE(ABORT, 'changes are never deleted'); END;
    CREATE TRIGGER actions_never_deleted BEFORE DELETE ON actions
        BEGIN SELECT RAISE(ABORT, 'actions are never deleted'); END;
    INSERT INTO meta(key, value) VALUES ('job_count', '0'), ('payload_bytes', '0');
    """,
    # 2: credentials (operator keys = owners, agent tokens). Only hashes are stored; a
    # credential is never deleted and never changed except to revoke it, so no scope
    # can be widened in place (issue a new key instead).
    """
    CREATE TABLE credentials (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('operator', 'agent')),
        owner_id TEXT NOT NULL,
        agent_id TEXT,
        scopes TEXT NOT NULL,
        agents TEXT,
        label TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        created_at REAL NOT NULL,
        revoked_at REAL,
        revoked_reason TEXT
    );
    CREATE INDEX credentials_by_owner ON credentials(owner_id);
    CREATE TRIGGER credentials_never_deleted BEFORE DELETE ON credentials
        BEGIN SELECT RAISE(ABORT, 'credentials are never deleted'); END;
    CREATE TRIGGER credentials_immutable BEFORE UPDATE OF
        id, kind, owner_id, agent_id, scopes, agents, label, key_hash, created_at
        ON credentials
        BEGIN SELECT RAISE(ABORT, 'credentials are immutable; issue a new one'); END;
    CREATE TRIGGER credentials_revocation_final BEFORE UPDATE ON credentials
        WHEN OLD.revoked_at IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'a revoked credential stays revoked'); END;
    """,
    # 3: start-up recovery finds running jobs through an index of exactly those states
    # (SQLite cannot prove "IN (applying, undoing)" implies the NOT IN of jobs_unfinished,
    # so without this it read every job).
    """
    CREATE INDEX jobs_running ON jobs(state) WHERE state IN ('applying', 'undoing');
    """,
    # 4: a preview remembers the job's last operation when it was made, so a token from
    # before a newer operation can never run on a job that merely looks the same again.
    """
    ALTER TABLE previews ADD COLUMN base_seq INTEGER NOT NULL DEFAULT 0;
    """,
    # 5: endpoint checks on a test copy (docs/remote-contract.md): evidence only (digests, counts,
    # statuses, outcomes; never values), append-only like events.
    """
    CREATE TABLE endpoint_checks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        resource_id TEXT NOT NULL,
        test_copy_id TEXT NOT NULL,
        production_fingerprint TEXT NOT NULL,
        test_copy_fingerprint TEXT NOT NULL,
        at REAL NOT NULL,
        passed INTEGER NOT NULL,
        evidence TEXT NOT NULL
    );
    CREATE INDEX endpoint_checks_by_resource ON endpoint_checks(resource_id, id DESC);
    CREATE TRIGGER endpoint_checks_append_only_update BEFORE UPDATE ON endpoint_checks
        BEGIN SELECT RAISE(ABORT, 'endpoint checks are append-only'); END;
    CREATE TRIGGER endpoint_checks_append_only_delete BEFORE DELETE ON endpoint_checks
        BEGIN SELECT RAISE(ABORT, 'endpoint checks are append-only'); END;
    """,
    # 6: the per-agent and per-owner quotas count unresolved jobs (jobs.UNRESOLVED_STATES,
    # same order) inside every prepare's write: this index holds only those, so a count
    # reads at most one owner's unresolved jobs, never the whole history.
    """
    CREATE INDEX jobs_unresolved ON jobs(owner_id, agent_id, state)
        WHERE state IN ('prepared', 'applying', 'partially_applied', 'needs_review',
                        'undoing', 'partially_undone');
    """,
    # 7: a change's two sides, kind-neutral: each is NULL (the resource does not exist
    # on that side) or the JSON text its kind's adapter defines. From the columns that
    # flattened the two kinds: a record's side is its lossless JSON text as it was; a
    # document's is {"text", "media_type"}.
    """
    ALTER TABLE changes ADD COLUMN before_side TEXT;
    ALTER TABLE changes ADD COLUMN after_side TEXT;
    UPDATE changes SET
        before_side = CASE WHEN before_text IS NOT NULL
            THEN json_object('text', before_text, 'media_type', media_type)
            ELSE before_json END,
        after_side = CASE WHEN after_text IS NOT NULL
            THEN json_object('text', after_text, 'media_type', media_type)
            ELSE after_json END;
    ALTER TABLE changes DROP COLUMN before_json;
    ALTER TABLE changes DROP COLUMN after_json;
    ALTER TABLE changes DROP COLUMN before_text;
    ALTER TABLE changes DROP COLUMN after_text;
    """,
    # 8: leases (docs/scaling.md). Each gateway process on a shared ledger holds a lease it
    # renews; an action in flight and a job being applied or undone name the lease of
    # the process running them, so recovery settles only the work of a process whose
    # lease expired. Rows of a ledger's one owner from before leases name none (NULL).
    """
    CREATE TABLE leases (
        id TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        started_at REAL NOT NULL,
        renewed_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        ended_at REAL,
        ended_reason TEXT
    );
    CREATE INDEX leases_open ON leases(expires_at) WHERE ended_at IS NULL;
    ALTER TABLE actions ADD COLUMN lease_id TEXT;
    ALTER TABLE jobs ADD COLUMN runner_lease TEXT;
    """,
    # 9: review sessions live in the ledger, so every process sees them and a restart
    # keeps them (docs/scaling.md). Keyed by the SHA-256 of the cookie value; a held preview's
    # single-use token is stored only sealed with a key derived from that cookie value.
    """
    CREATE TABLE web_sessions (
        id_hash TEXT PRIMARY KEY,
        credential_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        last_seen REAL NOT NULL,
        notice TEXT
    );
    CREATE INDEX web_sessions_by_credential ON web_sessions(credential_id);
    CREATE INDEX web_sessions_by_last_seen ON web_sessions(last_seen);
    CREATE TABLE web_session_previews (
        session_hash TEXT NOT NULL,
        handle TEXT NOT NULL,
        job_id TEXT NOT NULL,
        preview TEXT NOT NULL,
        sealed_token TEXT,
        created_at REAL NOT NULL,
        PRIMARY KEY (session_hash, handle)
    );
    """,
    # 10: records that appear and disappear (docs/collections.md). A change's target: the record of
    # a collection it acts on (NULL for a whole resource, and for a create until the
    # server named its id). A reviewer's acceptance of a verified undo is an event; this
    # index finds a resource's latest one without reading the history.
    """
    ALTER TABLE changes ADD COLUMN target TEXT;
    CREATE INDEX events_undo_accepted ON events(target, id) WHERE operation = 'undo_accepted';
    """,
    # 11: the review inbox (sql_inbox): one owner's jobs across agents, newest first, a
    # keyset page at a time, without sorting the owner's whole history.
    """
    CREATE INDEX jobs_by_owner ON jobs(owner_id, seq DESC);
    """,
    # 12: the webhook outbox (docs/webhooks.md): one row per message and endpoint, added in the
    # transaction of the state change it announces; the delivery task reads the due ones
    # through an index of exactly the pending rows. The payload holds ids and states,
    # never values.
    """
    CREATE TABLE webhook_outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        endpoint TEXT NOT NULL,
        event TEXT NOT NULL,
        job_id TEXT NOT NULL REFERENCES jobs(id),
        agent_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        last_response_status INTEGER,
        last_error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX webhook_outbox_due ON webhook_outbox(next_attempt_at)
        WHERE status = 'pending';
    """,
    # 13: the hash chain over the events (docs/proof.md).
    _chain_events,
    # 14: passkeys (docs/proof.md), per owner, never deleted; only their sign count moves and
    # a revocation is final. ``passkey_uses`` holds each approval's challenge (the
    # preview digest) once: an assertion never approves twice. Its job is NULL for the
    # acceptance of a verified undo, which approves no job.
    """
    CREATE TABLE passkeys (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL,
        label TEXT NOT NULL,
        public_key TEXT NOT NULL,
        sign_count INTEGER NOT NULL,
        rp_id TEXT NOT NULL,
        origin TEXT NOT NULL,
        created_at REAL NOT NULL,
        revoked_at REAL
    );
    CREATE INDEX passkeys_by_owner ON passkeys(owner_id);
    CREATE TABLE passkey_uses (
        challenge TEXT PRIMARY KEY,
        passkey_id TEXT NOT NULL REFERENCES passkeys(id),
        job_id TEXT,
        at REAL NOT NULL
    );
    CREATE TRIGGER passkeys_never_deleted BEFORE DELETE ON passkeys
        BEGIN SELECT RAISE(ABORT, 'passkeys are never deleted'); END;
    CREATE TRIGGER passkeys_immutable BEFORE UPDATE OF
        id, owner_id, label, public_key, rp_id, origin, created_at ON passkeys
        BEGIN SELECT RAISE(ABORT, 'passkeys are immutable; register a new one'); END;
    CREATE TRIGGER passkeys_revocation_final BEFORE UPDATE OF revoked_at ON passkeys
        WHEN OLD.revoked_at IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'a revoked passkey stays revoked'); END;
    CREATE TRIGGER passkey_uses_append_only_update BEFORE UPDATE ON passkey_uses
        BEGIN SELECT RAISE(ABORT, 'passkey uses are append-only'); END;
    CREATE TRIGGER passkey_uses_append_only_delete BEFORE DELETE ON passkey_uses
        BEGIN SELECT RAISE(ABORT, 'passkey uses are append-only'); END;
    """,
    # 15: the one-time codes that enrol an owner's first passkey (``undogate passkeys
    # enrol`` on the server's host): only a code's SHA-256 is kept, never deleted; the
    # code is spent once, by the passkey it enrolled, and nothing else of it changes.
    """
    CREATE TABLE passkey_enrolments (
        code_sha256 TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        used_at REAL,
        passkey_id TEXT
    );
    CREATE TRIGGER passkey_enrolments_never_deleted BEFORE DELETE ON passkey_enrolments
        BEGIN SELECT RAISE(ABORT, 'enrolment codes are never deleted'); END;
    CREATE TRIGGER passkey_enrolments_immutable BEFORE UPDATE OF
        code_sha256, owner_id, created_at, expires_at ON passkey_enrolments
        BEGIN SELECT RAISE(ABORT, 'an enrolment code never changes'); END;
    CREATE TRIGGER passkey_enrolments_spent_once BEFORE UPDATE OF used_at, passkey_id
        ON passkey_enrolments WHEN OLD.used_at IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'an enrolment code is spent once'); END;
    """,
    # 16: what the gateway acts on, held (docs/proof.md, "Rows the chain vouches for").
    # An event id is only ever the next one: never zero or below, never between the ids
    # the ledger issued (an inserted row would show in a job's history). A change's
    # prepared columns never change, and its target, once known, neither; nor do a job's
    # owner and request, and a finished job stays finished. The events outside any job
    # (credentials, endpoint checks) are found by their target, for the checks that hold
    # those rows to the chain.
    """
    CREATE TRIGGER events_ids_issued AFTER INSERT ON events
        WHEN NEW.id <= 0 OR NEW.id < (SELECT MAX(id) FROM events)
        BEGIN SELECT RAISE(ABORT, 'an event id is the ledger''s next one, never another'); END;
    CREATE TRIGGER changes_immutable BEFORE UPDATE OF
        job_id, idx, resource_id, kind, fingerprint, fields, before_side, after_side,
        media_type, prepared_etag, assertion_kind ON changes
        BEGIN SELECT RAISE(ABORT, 'a change is immutable as prepared'); END;
    CREATE TRIGGER changes_target_final BEFORE UPDATE OF target ON changes
        WHEN OLD.target IS NOT NULL AND NEW.target IS NOT OLD.target
        BEGIN SELECT RAISE(ABORT, 'a change''s target, once known, is final'); END;
    CREATE TRIGGER jobs_immutable BEFORE UPDATE OF
        seq, id, owner_id, agent_id, summary, attribution_label, idempotency_key,
        request_digest, payload_bytes, created_at ON jobs
        BEGIN SELECT RAISE(ABORT, 'a job is immutable as prepared'); END;
    CREATE TRIGGER jobs_finished_final BEFORE UPDATE OF state ON jobs
        WHEN OLD.state IN ('undone', 'rejected', 'invalidated') AND NEW.state IS NOT OLD.state
        BEGIN SELECT RAISE(ABORT, 'a finished job stays finished'); END;
    CREATE INDEX events_outside_jobs ON events(target, id) WHERE job_id IS NULL;
    """,
    # 17: rewind plans and stopped agents (docs/rewind.md). A job may carry the session
    # its agent named (over MCP, the MCP session), which a plan can select by. A plan's
    # row keeps its selection, its steps as last walked and its one preview token (by
    # hash); what its steps did is the jobs' own history. Plans are never deleted.
    """
    ALTER TABLE jobs ADD COLUMN session TEXT;
    CREATE TABLE rewinds (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        created_by TEXT NOT NULL,
        selection TEXT NOT NULL,
        steps TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('planned', 'running', 'finished')),
        token_hash TEXT,
        expires_at REAL,
        versions TEXT NOT NULL,
        skip_blocked INTEGER NOT NULL DEFAULT 0,
        confirmed_at REAL,
        stopped TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX rewinds_by_owner ON rewinds(owner_id, created_at);
    CREATE TRIGGER rewinds_never_deleted BEFORE DELETE ON rewinds
        BEGIN SELECT RAISE(ABORT, 'rewind plans are never deleted'); END;
    DROP TRIGGER jobs_immutable;
    CREATE TRIGGER jobs_immutable BEFORE UPDATE OF
        seq, id, owner_id, agent_id, summary, attribution_label, idempotency_key,
        request_digest, payload_bytes, created_at, session ON jobs
        BEGIN SELECT RAISE(ABORT, 'a job is immutable as prepared'); END;
    CREATE TABLE agent_stops (
        owner_id TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        stopped_at REAL,
        stopped_by TEXT NOT NULL,
        PRIMARY KEY (owner_id, agent_id)
    );
    """,
    # 18: a webhook message may be about an agent (stopped, resumed) rather than a job:
    # ``job_id`` becomes optional and each message names its owner, whom the operators'
    # listing selects by (it joined the jobs before). SQLite cannot drop a NOT NULL, so
    # the table is rebuilt: every row kept with its seq (the LEFT JOIN and the NOT NULL
    # make a row without its job fail the step rather than vanish), its index re-made.
    """
    CREATE TABLE webhook_outbox_18 (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        endpoint TEXT NOT NULL,
        event TEXT NOT NULL,
        job_id TEXT REFERENCES jobs(id),
        agent_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        last_response_status INTEGER,
        last_error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        owner_id TEXT NOT NULL
    );
    INSERT INTO webhook_outbox_18(seq, id, endpoint, event, job_id, agent_id, payload,
        status, attempts, next_attempt_at, last_response_status, last_error, created_at,
        updated_at, owner_id)
    SELECT o.seq, o.id, o.endpoint, o.event, o.job_id, o.agent_id, o.payload, o.status,
        o.attempts, o.next_attempt_at, o.last_response_status, o.last_error, o.created_at,
        o.updated_at, j.owner_id
    FROM webhook_outbox o LEFT JOIN jobs j ON j.id = o.job_id ORDER BY o.seq;
    DROP TABLE webhook_outbox;
    ALTER TABLE webhook_outbox_18 RENAME TO webhook_outbox;
    CREATE INDEX webhook_outbox_due ON webhook_outbox(next_attempt_at)
        WHERE status = 'pending';
    CREATE INDEX webhook_outbox_by_owner ON webhook_outbox(owner_id, seq DESC);
    """,
]
SCHEMA_VERSION = len(_MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> None:
    """Run the migrations ``conn``'s ledger has not run yet.

    Raises:
        LedgerError: the ledger has a newer schema than this undogate knows.
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise LedgerError(
            f"the ledger has schema {version}, newer than this undogate ({SCHEMA_VERSION})"
        )
    for number in range(version, SCHEMA_VERSION):
        conn.execute("BEGIN IMMEDIATE")
        try:
            step = _MIGRATIONS[number]
            if callable(step):
                step(conn)
            else:
                for statement in _split_sql(step):
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements (triggers keep their inner semicolons)."""
    statements: list[str] = []
    current: list[str] = []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and sqlite3.complete_statement(text):
            statements.append(text)
            current = []
    if "\n".join(current).strip():
        statements.append("\n".join(current).strip())
    return statements
