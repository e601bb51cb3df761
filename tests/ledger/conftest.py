"""The store under test, once per engine: every test in this directory that takes
``store`` runs against each backend in ``BACKENDS``.

An engine joins by adding a factory here that opens a fresh, empty ledger (and starts
what it needs); the contract tests themselves (test_store_*.py, one file per topic) use
nothing but the ``Store`` protocol and the builders below. PostgreSQL is a real server
(tests/postgres.py), one fresh database per test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from undogate.chain.seals import CREDENTIAL_CREATED, change_seal, credential_seal
from undogate.jobs import Change, Job, JobState, Operation, SideValue
from undogate.jsonvalue import JsonNumber, JsonObject
from undogate.ledger import Ledger, Store, Transaction
from undogate.ledger.postgres import PostgresStore

from ..postgres import PostgresCluster


def _sqlite(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    return Ledger.open(tmp_path / "data")  # a real file: WAL does not apply to :memory:


def _postgres(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    return PostgresStore.open(cluster.fresh_database())


BACKENDS: dict[str, Callable[[Path, pytest.FixtureRequest], Store]] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = BACKENDS[request.param](tmp_path, request)
    try:
        yield opened
    finally:
        opened.close()


# -- what the contract tests build: one owner, one agent, jobs of opaque changes --------

OWNER = "op_owner"
AGENT = "agent-a"


def change(
    index: int,
    resource_id: str = "customer",
    fields: tuple[str, ...] = ("status",),
    after: SideValue | None = None,
) -> Change:
    """One change (the one place that knows how a change is built). Its kind is opaque to
    the ledger; a side may be absent (a create's before, a delete's after)."""
    return Change(
        index=index,
        resource_id=resource_id,
        kind="some_kind",
        fingerprint="fp-1",
        fields=fields,
        before={"status": "lead", "n": JsonNumber("12345678901234567890.5")},
        after={"status": "customer"} if after is None else after,
        media_type="application/json",
        prepared_etag='"v1"',
        assertion_kind=None,
    )


def job(
    job_id: str,
    *changes: Change,
    owner: str = OWNER,
    agent: str = AGENT,
    key: str | None = None,
    state: JobState = JobState.PREPARED,
) -> Job:
    now = time.time()
    return Job(
        id=job_id,
        owner_id=owner,
        agent_id=agent,
        summary=f"summary of {job_id}",
        attribution_label="ticket 7",
        idempotency_key=key,
        state=state,
        undo_started=False,
        created_at=now,
        updated_at=now,
        changes=changes or (change(0),),
    )


def insert(store: Store, *jobs: Job, payload: int = 10) -> None:
    def write(tx: Transaction) -> None:
        for j in jobs:
            tx.insert_job(j, f"digest-{j.id}", payload)
            tx.count_job(payload)

    store.write(write)


def event(
    tx: Transaction,
    job_id: str | None,
    operation: str,
    *,
    target: str | None = None,
    to_state: str | None = None,
    detail: JsonObject | None = None,
) -> None:
    tx.add_event(
        job_id=job_id,
        actor="test:me",
        access_path="test",
        operation=operation,
        target=target,
        to_state=to_state,
        detail=detail,
    )


def seals_of(j: Job) -> JsonObject:
    """A prepare event's detail: the seal of each of the job's changes (seals.py)."""
    return {"seals": [change_seal(c) for c in j.changes]}


def preview(tx: Transaction, token_hash: str, job_id: str = "job_1") -> None:
    tx.insert_preview(
        token_hash=token_hash,
        job_id=job_id,
        operation=Operation.APPLY,
        expires_at=time.time() + 300,
        snapshot={"0": '"v1"'},
    )


def begin(tx: Transaction, job_id: str = "job_1", index: int = 0) -> int:
    """The intent of one write; its action's id."""
    return tx.begin_action(
        job_id=job_id,
        change_idx=index,
        operation=Operation.APPLY,
        method="PATCH",
        url="https://example.test/records/customer",
        if_match='"v1"',
    ).value()


def credential(tx: Transaction, cred_id: str, kind: str = "operator", owner: str = "") -> None:
    """A credential and the event that issues it, sealed, as the keyring records them
    (a credential no event issued is never honoured, and ``ledger verify`` names it)."""
    tx.insert_credential(
        credential_id=cred_id,
        kind="operator" if kind == "operator" else "agent",
        owner_id=owner or cred_id,
        agent_id=None if kind == "operator" else AGENT,
        scopes=("agents:read", "agents:write") if kind == "operator" else (),
        agents=("agent-a", "agent-b") if cred_id == "op_1" else None,
        label=f"label of {cred_id}",
        key_hash=f"hash-{cred_id}",
        created_at=time.time(),
    )
    row = tx.credential(cred_id)
    assert row is not None
    event(
        tx,
        None,
        CREDENTIAL_CREATED + row.kind,
        target=cred_id,
        detail={"seal": credential_seal(row)},
    )
