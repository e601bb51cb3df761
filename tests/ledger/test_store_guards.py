"""The store contract, guards: on each engine the database itself refuses to change what
a job and its changes were prepared as, a change's target once known, and a finished
job's state (docs/proof.md, "Rows the chain vouches for"); what the ledger does move
still moves."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
import pytest

from undogate.jobs import ChangeState, JobState
from undogate.ledger import Store, Transaction

from .conftest import change, insert, job

REFUSED = [
    ("UPDATE jobs SET owner_id = 'op_mallory' WHERE id = 'job_1'", "a job is immutable"),
    ("UPDATE jobs SET summary = 'else' WHERE id = 'job_1'", "a job is immutable"),
    ("UPDATE changes SET fields = '[\"owner\"]' WHERE job_id = 'job_1'", "a change is immutable"),
    ("UPDATE changes SET after_side = NULL WHERE job_id = 'job_1'", "a change is immutable"),
    ("UPDATE changes SET resource_id = 'ticket' WHERE job_id = 'job_1'", "a change is immutable"),
    ("UPDATE changes SET target = 'rec-2' WHERE job_id = 'job_1'", "once known, is final"),
    ("UPDATE changes SET target = NULL WHERE job_id = 'job_1'", "once known, is final"),
    ("UPDATE jobs SET state = 'prepared' WHERE id = 'job_2'", "a finished job stays finished"),
    ("UPDATE jobs SET state = 'applied' WHERE id = 'job_2'", "a finished job stays finished"),
]


def _refused(store: Store, statement: str) -> str:
    """The database's refusal, asked directly (each engine's ``raw`` connection is in
    autocommit mode: the statement is all there is to roll back)."""
    raw: Any = store
    with raw.raw() as conn, pytest.raises((sqlite3.DatabaseError, psycopg.Error)) as caught:
        conn.execute(statement)
    return str(caught.value)


@pytest.mark.parametrize(("statement", "message"), REFUSED)
def test_the_database_refuses_to_rewrite_what_was_prepared(
    store: Store, statement: str, message: str
) -> None:
    insert(store, job("job_1", change(0)), job("job_2"))
    store.write(lambda tx: tx.set_change_state("job_1", 0, ChangeState.APPLIED, target="rec-1"))
    store.write(lambda tx: tx.set_job_state("job_2", JobState.REJECTED))
    assert message in _refused(store, statement)
    loaded = store.load_job("job_1")
    assert loaded is not None and loaded.owner_id == "op_owner"
    assert loaded.changes[0].target == "rec-1" and loaded.changes[0].fields == ("status",)


def test_what_the_ledger_moves_still_moves(store: Store) -> None:
    insert(store, job("job_1", change(0)))

    def moves(tx: Transaction) -> None:
        tx.set_change_state("job_1", 0, ChangeState.UNCERTAIN)
        tx.set_change_state("job_1", 0, ChangeState.APPLIED, applied_etag='"v2"', target="r1")
        tx.set_change_state("job_1", 0, ChangeState.UNDONE)  # the target stays as it was
        tx.set_job_state("job_1", JobState.APPLYING)
        tx.set_job_state("job_1", JobState.UNDONE)
        tx.set_job_state("job_1", JobState.UNDONE)  # not a move: allowed

    store.write(moves)
    loaded = store.load_job("job_1")
    assert loaded is not None and loaded.state is JobState.UNDONE
    assert loaded.changes[0].state is ChangeState.UNDONE and loaded.changes[0].target == "r1"
