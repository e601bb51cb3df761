"""The ledger's verbs off the confirm path, in the SQL both engines speak: credentials,
endpoint-check evidence, and what start-up recovery reads and remembers."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal

from ..jobs import RUNNING_STATES, TERMINAL_STATES, JobState, Operation
from ..jsonvalue import dumps, loads
from .records import InFlightAction, StoredCredential, UnfinishedJob
from .sql_base import EngineHooks

# Each of these is served by a partial index (actions_in_flight, jobs_running); the
# tests check the query plans, so start-up stays flat as the ledger grows.
IN_FLIGHT_ACTIONS = (
    "SELECT id, job_id, change_idx, operation, lease_id FROM actions WHERE status = 'dispatching'"
)
# The state lists come from the state table (``jobs.STATES``), constants, never input.
_RUNNING = ", ".join(f"'{s.value}'" for s in JobState if s in RUNNING_STATES)
_FINISHED = ", ".join(f"'{s.value}'" for s in JobState if s in TERMINAL_STATES)
RUNNING_JOBS = f"SELECT id FROM jobs WHERE state IN ({_RUNNING})"  # noqa: S608
_UNFINISHED_ON = (
    "SELECT DISTINCT j.id, j.state FROM jobs j JOIN changes ch ON ch.job_id = j.id "  # noqa: S608
    f"WHERE ch.resource_id = ? AND ch.fingerprint != ? AND j.state NOT IN ({_FINISHED})"
)

_CREDENTIAL_COLUMNS = (
    "id, kind, owner_id, agent_id, scopes, agents, label, created_at, revoked_at, key_hash"
)


class AdminVerbs(EngineHooks):
    """Credentials, endpoint checks and recovery, on one connection inside the
    transaction the store opened (see ``store.Transaction``)."""

    # -- start-up recovery ------------------------------------------------------------

    def in_flight_actions(self) -> list[InFlightAction]:
        return [
            InFlightAction(
                id=r[0], job_id=r[1], change_index=r[2], operation=Operation(r[3]), lease_id=r[4]
            )
            for r in self.connection.execute(IN_FLIGHT_ACTIONS).fetchall()
        ]

    def running_jobs(self) -> list[str]:
        return [r[0] for r in self.connection.execute(RUNNING_JOBS).fetchall()]

    def resource_identities(self) -> dict[str, str]:
        return dict(
            self.connection.execute("SELECT resource_id, fingerprint FROM resource_identities")
        )

    def unfinished_jobs_on(self, resource_id: str, fingerprint: str) -> list[UnfinishedJob]:
        return [
            UnfinishedJob(r[0], JobState(r[1]))
            for r in self.connection.execute(
                _UNFINISHED_ON,
                (resource_id, fingerprint),
            ).fetchall()
        ]

    def replace_resource_identities(self, identities: Mapping[str, str]) -> None:
        c = self.connection
        c.execute("DELETE FROM resource_identities")
        c.executemany(
            "INSERT INTO resource_identities(resource_id, fingerprint) VALUES (?, ?)",
            list(identities.items()),
        )

    # -- credentials ------------------------------------------------------------------

    def credential(self, credential_id: str) -> StoredCredential | None:
        row = self.connection.execute(
            f"SELECT {_CREDENTIAL_COLUMNS} FROM credentials WHERE id = ?",  # noqa: S608
            (credential_id,),
        ).fetchone()
        return _credential(row) if row is not None else None

    def credentials(self) -> list[StoredCredential]:
        return [
            _credential(r)
            for r in self.connection.execute(
                f"SELECT {_CREDENTIAL_COLUMNS} FROM credentials "  # noqa: S608
                "ORDER BY created_at, id"
            ).fetchall()
        ]

    def count_live_operators(self) -> int:
        row = self.connection.execute(
            "SELECT COUNT(*) FROM credentials WHERE kind = 'operator' AND revoked_at IS NULL"
        ).fetchone()
        return int(row[0])

    def live_agent_tokens(self, owner_id: str) -> list[str]:
        return [
            r[0]
            for r in self.connection.execute(
                "SELECT id FROM credentials WHERE kind = 'agent' AND owner_id = ? "
                "AND revoked_at IS NULL ORDER BY id",
                (owner_id,),
            )
        ]

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
        self.connection.execute(
            "INSERT INTO credentials(id, kind, owner_id, agent_id, scopes, agents, label, "
            "key_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                credential_id,
                kind,
                owner_id,
                agent_id,
                dumps(list(scopes)),
                dumps(list(agents)) if agents is not None else None,
                label,
                key_hash,
                created_at,
            ),
        )

    def revoke_credential(self, credential_id: str, *, at: float, reason: str) -> None:
        # The trigger credentials_revocation_final refuses a second revocation.
        self.connection.execute(
            "UPDATE credentials SET revoked_at = ?, revoked_reason = ? WHERE id = ?",
            (at, reason, credential_id),
        )

    # -- endpoint checks ----------------------------------------------------------------

    def record_endpoint_check(
        self,
        *,
        resource_id: str,
        test_copy_id: str,
        production_fingerprint: str,
        test_copy_fingerprint: str,
        passed: bool,
        evidence: str,
    ) -> int:
        row = self.connection.execute(
            "INSERT INTO endpoint_checks(resource_id, test_copy_id, production_fingerprint, "
            "test_copy_fingerprint, at, passed, evidence) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "RETURNING id",
            (
                resource_id,
                test_copy_id,
                production_fingerprint,
                test_copy_fingerprint,
                time.time(),
                int(passed),
                evidence,
            ),
        ).fetchone()
        return int(row[0])

    def latest_check_passed(self, resource_id: str, fingerprint: str) -> bool:
        row = self.connection.execute(
            "SELECT passed FROM endpoint_checks WHERE resource_id = ? "
            "AND production_fingerprint = ? ORDER BY id DESC LIMIT 1",
            (resource_id, fingerprint),
        ).fetchone()
        return bool(row and row[0])


def _credential(row: tuple[Any, ...]) -> StoredCredential:
    scopes = loads(str(row[4]))
    agents = loads(str(row[5])) if row[5] is not None else None
    assert isinstance(scopes, list)
    return StoredCredential(
        id=str(row[0]),
        kind="operator" if row[1] == "operator" else "agent",
        owner_id=str(row[2]),
        agent_id=str(row[3]) if row[3] is not None else None,
        scopes=tuple(str(s) for s in scopes),
        agents=tuple(str(a) for a in agents) if isinstance(agents, list) else None,
        label=str(row[6]),
        created_at=float(row[7]),
        revoked_at=float(row[8]) if row[8] is not None else None,
        key_hash=str(row[9]),
    )
