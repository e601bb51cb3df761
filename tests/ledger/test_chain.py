"""The hash chain on each engine: every event the store appends is linked, concurrent
writers on PostgreSQL never fork the chain, and ``undogate ledger verify`` reads either
engine offline and names a row edited behind the ledger's back."""

from __future__ import annotations

import contextlib
import threading
from functools import partial

import psycopg
import pytest

from undogate.ledger import Store, Transaction, open_chain
from undogate.ledger.postgres import PostgresStore
from undogate.proof.ledger_check import verify_ledger

from ..postgres import PostgresCluster


def _event(tx: Transaction, n: int) -> None:
    tx.add_event(
        job_id=f"job_{n % 3}",
        actor="operator:ada",
        access_path="test",
        operation="prepare",
        detail={"n": str(n), "text": "naïve ⟨U+200B⟩ \u200b"},
    )


def test_every_appended_event_is_chained(store: Store) -> None:
    for n in range(5):
        store.write(partial(_event, n=n))
    with open_chain(store.location) as source:
        verdict = verify_ledger(source)
        links = list(source.links())
    assert verdict.ok and verdict.rows == 5
    assert verdict.head == links[-1].hash
    assert [link.prev_hash for link in links[1:]] == [link.hash for link in links[:-1]]


def test_a_rolled_back_write_leaves_no_link(store: Store) -> None:
    store.write(lambda tx: _event(tx, 0))

    def fails(tx: Transaction) -> None:
        _event(tx, 1)
        raise RuntimeError("the write fails after its event")

    with contextlib.suppress(RuntimeError):
        store.write(fails)
    store.write(lambda tx: _event(tx, 2))
    with open_chain(store.location) as source:
        verdict = verify_ledger(source)
    assert verdict.ok and verdict.rows == 2


def test_concurrent_writers_never_fork_the_chain(postgres_cluster: PostgresCluster) -> None:
    url = postgres_cluster.fresh_database()
    stores = [PostgresStore.open(url) for _ in range(2)]  # two leases, as two processes
    errors: list[BaseException] = []

    def writer(store: PostgresStore, base: int) -> None:
        try:
            for n in range(25):
                store.write(partial(_event, n=base + n))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(stores[i % 2], i * 100)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert not errors
    with open_chain(url) as source:
        verdict = verify_ledger(source)
    assert verdict.ok, verdict.reason
    assert verdict.rows == 100


def test_an_unchained_insert_is_refused_on_postgres(postgres_cluster: PostgresCluster) -> None:
    """What a leased process of an undogate from before the chain would insert while a
    newer one migrated the ledger: refused, so the chain never loses its head."""
    url = postgres_cluster.fresh_database()
    store = PostgresStore.open(url)
    try:
        store.write(lambda tx: _event(tx, 0))
    finally:
        store.close()
    with (
        psycopg.connect(url, autocommit=True) as older,
        pytest.raises(psycopg.errors.RestrictViolation, match="must be chained"),
    ):
        older.execute(
            "INSERT INTO events(job_id, at, actor, access_path, operation) "
            "VALUES ('job_1', 1.0, 'operator:ada', 'cli', 'prepare')"
        )
    store = PostgresStore.open(url)
    try:
        store.write(lambda tx: _event(tx, 1))
    finally:
        store.close()
    with open_chain(url) as source:
        verdict = verify_ledger(source)
    assert verdict.ok and verdict.rows == 2


def test_an_edit_behind_postgres_back_is_named(postgres_cluster: PostgresCluster) -> None:
    url = postgres_cluster.fresh_database()
    store = PostgresStore.open(url)
    try:
        for n in range(4):
            store.write(partial(_event, n=n))
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as attacker:
        attacker.execute("DROP TRIGGER events_update_delete_refused ON events")
        victim = attacker.execute("SELECT id FROM events ORDER BY id OFFSET 2 LIMIT 1").fetchone()
        assert victim is not None
        attacker.execute("UPDATE events SET actor = 'operator:mallory' WHERE id = %s", victim)
    with open_chain(url) as source:
        verdict = verify_ledger(source)
    assert verdict.bad_row == victim[0]
    assert "does not match its hash" in verdict.reason
