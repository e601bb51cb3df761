"""Tampering with the rows the gateway acts on, on each engine (docs/proof.md, "Rows the
chain vouches for"): an event with an id the ledger never issued, a change's before
side, a credential's revocation, a forged admin key, a forged passing endpoint check, a
job's state. Each is refused by the database; where the attacker drops the database's
guard first, ``undogate ledger verify`` names the row and the gateway refuses to act on
it before anything is written.

The attacker works on the database directly, as someone with the file or a PostgreSQL
login would, while the gateway is open.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from undogate.auth import ADMIN, ALL_SCOPES, Keyring
from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.digests import sha256_hex
from undogate.errors import LedgerTampered, Unauthorized
from undogate.jobs import ChangeRequest, JobState, Operation, PrepareRequest
from undogate.jsonvalue import dumps
from undogate.ledger import DB_NAME, open_chain
from undogate.operations.undo_offer import resource_undo_offer
from undogate.proof.ledger_check import ChainVerdict, verify_ledger

from .postgres import PostgresCluster
from .serving import cli
from .worlds import AGENT, OWNER, LocalGateway, make_config

PATH = "/records/customer-123"


@dataclass
class Attacker:
    """A direct connection to the ledger's database, outside the gateway."""

    engine: str
    location: str  # the data dir's ledger file, or the PostgreSQL URL

    def run(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if self.engine == "sqlite":
            with closing(sqlite3.connect(self.location, isolation_level=None)) as conn:
                return conn.execute(sql, params).fetchall()
        with psycopg.connect(self.location, autocommit=True) as pg:
            cur = pg.execute(sql.replace("?", "%s").encode(), params)
            return cur.fetchall() if cur.description else []

    def refused(self, sql: str, *params: Any) -> str:
        """The database's refusal of ``sql`` (the test fails if it is accepted)."""
        errors = (sqlite3.DatabaseError, psycopg.Error)
        with pytest.raises(errors) as caught:
            self.run(sql, *params)
        return str(caught.value)

    def drop(self, trigger: str, table: str) -> None:
        on = "" if self.engine == "sqlite" else f" ON {table}"
        self.run(f"DROP TRIGGER {trigger}{on}")


@dataclass
class TamperWorld:
    gw: LocalGateway
    attacker: Attacker
    server: ContractServer

    def verify(self) -> ChainVerdict:
        with open_chain(self.gw.ledger.location) as source:
            return verify_ledger(source)

    def job(self, status: str = "customer") -> str:
        request = PrepareRequest(
            summary="make them a customer",
            changes=(ChangeRequest(resource_id="customer", set={"status": status}),),
        )
        return self.gw.prepare(AGENT, "account-assistant", request).job.id

    def preview(self, job_id: str, operation: Operation) -> str:
        preview = self.gw.preview(OWNER, job_id, operation)
        assert preview.token is not None, preview.blockers
        return preview.token

    def confirm(self, job_id: str, operation: Operation) -> None:
        self.gw.confirm(OWNER, job_id, self.preview(job_id, operation))

    def refused_confirm(self, job_id: str, operation: Operation) -> LedgerTampered:
        """A confirm refused as tampered, that recorded and sent nothing."""
        token = self.preview(job_id, operation)
        before = self.history(job_id)
        with pytest.raises(LedgerTampered) as caught:
            self.gw.confirm(OWNER, job_id, token)
        assert self.history(job_id) == before
        return caught.value

    def history(self, job_id: str) -> tuple[object, ...]:
        """Everything the ledger and the endpoint hold of a job: what a refused confirm
        must leave exactly as it was."""
        job = self.gw.ledger.load_job(job_id)
        assert job is not None
        return (
            job.state,
            job.actions,
            [e.id for e in self.gw.ledger.events(job_id)],
            self.server.get_record(PATH),
            self.server.write_count(PATH),
        )


@pytest.fixture(params=["sqlite", "postgres"])
def world(
    request: pytest.FixtureRequest,
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
) -> Iterator[TamperWorld]:
    if request.param == "postgres":
        cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
        url = cluster.fresh_database()
        gw = open_gateway(make_config(server, data_dir, ledger=url))
        yield TamperWorld(gw, Attacker("postgres", url), server)
    else:
        gw = open_gateway(make_config(server, data_dir))
        yield TamperWorld(gw, Attacker("sqlite", str(data_dir / DB_NAME)), server)


# -- an event with an id the ledger never issued --------------------------------------------


def test_an_event_below_the_ids_issued_is_refused_and_else_named(world: TamperWorld) -> None:
    """A forged ``reject`` given id -1 would sort first in the job's history."""
    job_id = world.job()
    insert = (
        "INSERT INTO events(id, job_id, at, actor, access_path, operation, from_state, "
        "to_state, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    # Its links are the attacker's choice: any that the unique index on prev_hash lets in.
    values = (-1, job_id, 1.0, "operator:mallory", "api", "reject", "prepared", "rejected",
              "f" * 64, "e" * 64)  # fmt: skip
    if world.attacker.engine == "postgres":
        assert "GENERATED ALWAYS" in world.attacker.refused(insert, *values)
        insert = insert.replace(") VALUES", ") OVERRIDING SYSTEM VALUE VALUES")
    assert "never another" in world.attacker.refused(insert, *values)
    assert world.verify().ok

    world.attacker.drop("events_ids_issued", "events")
    if world.attacker.engine == "postgres":
        assert "events_id_issued" in world.attacker.refused(insert, *values)
        world.attacker.run("ALTER TABLE events DROP CONSTRAINT events_id_issued")
    world.attacker.run(insert, *values)
    assert [e.operation for e in world.gw.ledger.events(job_id)] == ["reject", "prepare"]
    verdict = world.verify()
    assert verdict.bad_row == -1
    assert "not one the ledger issues" in verdict.reason


# -- a change's before side ---------------------------------------------------------------


def test_an_edited_before_side_is_refused_named_and_never_written_back(world: TamperWorld) -> None:
    """The undo would write the forged value to the endpoint: it is refused before a
    write, whatever the row says."""
    job_id = world.job()
    world.confirm(job_id, Operation.APPLY)
    forged = dumps({**world.server.get_record(PATH), "status": "forged"})
    edit = "UPDATE changes SET before_side = ? WHERE job_id = ?"
    assert "immutable as prepared" in world.attacker.refused(edit, forged, job_id)
    assert world.verify().ok

    world.attacker.drop("changes_immutable", "changes")
    world.attacker.run(edit, forged, job_id)
    verdict = world.verify()
    assert verdict.record == f"job {job_id}"
    assert "change 0 (customer) does not match the seal" in verdict.reason

    refused = world.refused_confirm(job_id, Operation.UNDO)  # nothing recorded, nothing sent
    assert refused.code == "ledger_tampered"
    assert "does not match the seal its prepare event recorded" in refused.message
    assert world.server.get_record(PATH)["status"] == "customer"


def test_an_edited_after_side_is_never_applied(world: TamperWorld) -> None:
    job_id = world.job()
    world.attacker.drop("changes_immutable", "changes")
    world.attacker.run(
        "UPDATE changes SET after_side = ? WHERE job_id = ?",
        json.dumps({"status": "forged"}),
        job_id,
    )
    world.refused_confirm(job_id, Operation.APPLY)


# -- credentials --------------------------------------------------------------------------


def test_a_revocation_undone_is_refused_named_and_never_honoured(world: TamperWorld) -> None:
    keys = Keyring(world.gw.ledger)
    issued = keys.create_operator(label="laptop")
    keys.revoke(issued.credential.id)
    undo = "UPDATE credentials SET revoked_at = NULL WHERE id = ?"
    assert "stays revoked" in world.attacker.refused(undo, issued.credential.id)

    world.attacker.drop("credentials_revocation_final", "credentials")
    world.attacker.run(undo, issued.credential.id)
    assert keys.get(issued.credential.id).revoked_at is None  # the row says it is live
    with pytest.raises(Unauthorized):
        keys.authenticate(issued.key)
    verdict = world.verify()
    assert verdict.record == f"credential {issued.credential.id}"
    assert "its revocation was undone" in verdict.reason


def test_a_forged_admin_key_is_never_honoured_and_is_named(world: TamperWorld) -> None:
    """An operator key with keys:admin inserted behind the ledger: no event issued it."""
    keys = Keyring(world.gw.ledger)
    real = keys.create_operator(label="the real one")
    key = "ugo_0123456789ab_" + "m" * 43
    world.attacker.run(
        "INSERT INTO credentials(id, kind, owner_id, agent_id, scopes, agents, label, "
        "key_hash, created_at) VALUES (?, 'operator', ?, NULL, ?, NULL, 'ops', ?, 1.0)",
        "op_0123456789ab",
        "op_0123456789ab",
        json.dumps(list(ALL_SCOPES)),
        sha256_hex(key),
    )
    assert ADMIN in keys.get("op_0123456789ab").scopes
    with pytest.raises(Unauthorized):
        keys.authenticate(key)
    assert keys.authenticate(real.key).credential_id == real.credential.id
    verdict = world.verify()
    assert verdict.record == "credential op_0123456789ab"
    assert "no event that issued it" in verdict.reason


def test_a_credential_edited_behind_the_ledger_is_never_honoured(world: TamperWorld) -> None:
    keys = Keyring(world.gw.ledger)
    agent = keys.create_operator(label="reader", scopes=("agents:read",))
    world.attacker.drop("credentials_immutable", "credentials")
    world.attacker.run(
        "UPDATE credentials SET scopes = ? WHERE id = ?",
        json.dumps(list(ALL_SCOPES)),
        agent.credential.id,
    )
    with pytest.raises(Unauthorized):
        keys.authenticate(agent.key)
    assert "does not match what its issuing event recorded" in world.verify().reason


# -- endpoint checks ----------------------------------------------------------------------


def test_a_forged_passing_check_offers_no_undo_and_is_named(world: TamperWorld) -> None:
    resource = world.gw.config.resource("customer")
    assert resource is not None
    world.attacker.run(
        "INSERT INTO endpoint_checks(resource_id, test_copy_id, production_fingerprint, "
        "test_copy_fingerprint, at, passed, evidence) VALUES (?, ?, ?, ?, 1.0, 1, ?)",
        "customer",
        "customer-copy",
        resource.fingerprint,
        "sha256:copy",
        json.dumps({"kind": "json_record", "steps": [], "undos": ["undo_of_create"]}),
    )
    with pytest.raises(LedgerTampered, match="no endpoint_check event for it"):
        resource_undo_offer(world.gw, "customer")
    verdict = world.verify()
    assert verdict.record.startswith("endpoint check ")
    assert "inserted behind the ledger" in verdict.reason


# -- a job's state ------------------------------------------------------------------------


def test_a_rejected_job_set_back_to_prepared_is_refused_named_and_never_applied(
    world: TamperWorld,
) -> None:
    job_id = world.job()
    world.gw.reject(OWNER, job_id)
    revive = "UPDATE jobs SET state = 'prepared' WHERE id = ?"
    assert "stays finished" in world.attacker.refused(revive, job_id)

    world.attacker.drop("jobs_finished_final", "jobs")
    world.attacker.run(revive, job_id)
    verdict = world.verify()
    assert verdict.record == f"job {job_id}"
    assert "the last event that moved it says rejected" in verdict.reason

    assert "its state was edited" in world.refused_confirm(job_id, Operation.APPLY).message
    assert world.history(job_id)[0] is JobState.PREPARED  # as the attacker left it


def test_verify_prints_the_row_that_does_not_match(world: TamperWorld) -> None:
    job_id = world.job()
    world.attacker.run("UPDATE jobs SET state = 'applied' WHERE id = ?", job_id)
    done = cli("ledger", "verify", world.gw.ledger.location)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith(f"ledger does NOT verify: job {job_id}: its state is applied")
