"""The database itself refuses what the ledger never does, on every engine: history is
never changed or deleted, a credential is never widened, deleted or un-revoked, an
endpoint check's evidence is append-only; what the ledger does change, it still may.
(These checks ran on SQLite only, from tests/test_auth.py and test_endpoint_check.py.)"""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from undogate.ledger import Store, Transaction

from .conftest import begin, credential, event, insert, job

REFUSED = [
    ("UPDATE events SET actor = 'x'", "events are append-only"),
    ("DELETE FROM events", "events are append-only"),
    ("DELETE FROM jobs", "jobs are never deleted"),
    ("DELETE FROM changes", "changes are never deleted"),
    ("DELETE FROM actions", "actions are never deleted"),
    ("DELETE FROM credentials WHERE id = 'op_1'", "credentials are never deleted"),
    ("UPDATE credentials SET scopes = '[]' WHERE id = 'op_1'", "credentials are immutable"),
    ("UPDATE credentials SET revoked_at = NULL WHERE id = 'op_2'", "stays revoked"),
    ("UPDATE credentials SET revoked_at = 2 WHERE id = 'op_2'", "stays revoked"),
    ("UPDATE endpoint_checks SET passed = 0", "endpoint checks are append-only"),
    ("DELETE FROM endpoint_checks", "endpoint checks are append-only"),
]


def _history(store: Store) -> None:
    insert(store, job("job_1"))

    def write(tx: Transaction) -> None:
        event(tx, "job_1", "prepare")
        begin(tx)
        credential(tx, "op_1")
        credential(tx, "op_2")
        tx.revoke_credential("op_2", at=1.0, reason="lost")
        tx.record_endpoint_check(
            resource_id="customer",
            test_copy_id="copy",
            production_fingerprint="fp",
            test_copy_fingerprint="fp-copy",
            passed=True,
            evidence="{}",
            actor="operator:tester",
            access_path="test",
        )

    store.write(write)


@pytest.mark.parametrize(("statement", "message"), REFUSED, ids=[m for _, m in REFUSED])
def test_the_database_refuses_to_change_or_delete_history(
    store: Store, statement: str, message: str
) -> None:
    _history(store)
    refused = pytest.raises((sqlite3.DatabaseError, psycopg.Error), match=message)
    with store.raw() as conn, refused:  # type: ignore[attr-defined]  # each engine has one
        conn.execute(statement)


def test_what_the_ledger_changes_it_still_may(store: Store) -> None:
    _history(store)
    with store.raw() as conn:  # type: ignore[attr-defined]
        conn.execute(
            "UPDATE credentials SET revoked_at = 1, revoked_reason = 'x' WHERE id = 'op_1'"
        )
        conn.execute("UPDATE actions SET status = 'done'")
    assert store.read(lambda tx: tx.credential("op_1")).revoked_at == 1  # type: ignore[union-attr]
