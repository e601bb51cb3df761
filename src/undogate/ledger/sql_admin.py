"""The ledger's verbs off the confirm path, in the SQL both engines speak: credentials,
and what start-up recovery reads and remembers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..chain.seals import CREDENTIAL_CREATED, CREDENTIAL_REVOKED
from ..jobs import RUNNING_STATES, TERMINAL_STATES, JobState, Operation
from ..jsonvalue import dumps, loads, loads_object
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

# With what the chain holds of each credential (seals.py): the event that issued it and
# whether one revoked it, found through events_outside_jobs in the same statement.
# Built from constants only, never from input.
_ISSUED = "('" + "', '".join(CREDENTIAL_CREATED + kind for kind in ("operator", "agent")) + "')"
_REVOKED = "('" + "', '".join(CREDENTIAL_REVOKED) + "')"
_OF_CREDENTIAL = "FROM events e WHERE e.job_id IS NULL AND e.target = c.id AND e.operation IN "
CREDENTIAL_COLUMNS = (
    "c.id, c.kind, c.owner_id, c.agent_id, c.scopes, c.agents, c.label, c.created_at, "
    "c.revoked_at, c.key_hash, "
    f"(SELECT e.operation {_OF_CREDENTIAL}{_ISSUED} ORDER BY e.id LIMIT 1), "
    f"(SELECT e.detail {_OF_CREDENTIAL}{_ISSUED} ORDER BY e.id LIMIT 1), "
    f"(SELECT COUNT(*) {_OF_CREDENTIAL}{_REVOKED})"
)


class AdminVerbs(EngineHooks):
    """Credentials and recovery, on one connection inside the
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
        # Two processes starting at once on PostgreSQL each delete what they see and insert:
        # the second's insert waits for the first's commit, then would meet its rows (a
        # duplicate key that failed the start); they write the same identities, so it updates.
        c.executemany(
            "INSERT INTO resource_identities(resource_id, fingerprint) VALUES (?, ?) "
            "ON CONFLICT (resource_id) DO UPDATE SET fingerprint = excluded.fingerprint",
            list(identities.items()),
        )

    # -- credentials ------------------------------------------------------------------

    def credential(self, credential_id: str) -> StoredCredential | None:
        row = self.connection.execute(
            f"SELECT {CREDENTIAL_COLUMNS} FROM credentials c WHERE c.id = ?",  # noqa: S608
            (credential_id,),
        ).fetchone()
        return credential_from_row(row) if row is not None else None

    def credentials(self) -> list[StoredCredential]:
        return [
            credential_from_row(r)
            for r in self.connection.execute(
                f"SELECT {CREDENTIAL_COLUMNS} FROM credentials c "  # noqa: S608
                "ORDER BY c.created_at, c.id"
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


def credential_from_row(row: Sequence[Any]) -> StoredCredential:
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
        issued=(str(row[10]), loads_object(str(row[11] or "{}"))) if row[10] is not None else None,
        revoked_in_chain=bool(row[12]),
    )
