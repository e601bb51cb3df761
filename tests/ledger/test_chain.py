"""The hash chain on each engine: every event the store appends is linked, concurrent
writers on PostgreSQL never fork the chain, and ``undogate ledger verify`` reads either
engine offline and names a row edited behind the ledger's back."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from functools import partial

import psycopg
import pytest

from undogate.chain import ChainedRow, body_digest
from undogate.ledger import Store, Transaction, open_chain
from undogate.ledger.postgres import PostgresStore
from undogate.ledger.sql_chain import ChainVerbs
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


#: Rows whose every column can trip an encoding: NULLs, text outside ASCII (and outside
#: the BMP), floats whose shortest text is unusual, a detail far over a page.
AWKWARD = [
    ChainedRow(None, 0.1 + 0.2, "operator:ada", "cli", "key_created", None, None, None, None),
    ChainedRow(
        "job_ünï", 1796326689.7968655, "opérateur:zoë", "mcp", "prepare", "café/☕", None, "p", None
    ),
    ChainedRow("job_1", 5e-324, "a", "api", "x", "t", "s0", "s1", '{"k":"\\u00e9 é 𝄞"}'),
    ChainedRow("job_1", 1e21, "a", "api", "x", None, None, None, '{"n":' + "7" * 200_000 + "}"),
    ChainedRow("", 1.0, "a\nb", "api", "x", "", "", "", ""),
]


def _linked(prev: str, row: ChainedRow) -> str:
    """The link as docs/proof.md spells it, written out here on its own."""
    text = f"undogate.chain/1\n{prev}\n{row.job_id or ''}\n{body_digest(row)}"
    return hashlib.sha256(text.encode()).hexdigest()


def test_awkward_rows_link_exactly_as_the_encoding_says(store: Store) -> None:
    """The stored links are the documented hashes of the rows as given, on each engine
    (PostgreSQL hashes them in the database), two of them inside one write."""

    def append(tx: Transaction, rows: list[ChainedRow]) -> None:
        assert isinstance(tx, ChainVerbs)
        for row in rows:
            tx.append_event(row)

    with open_chain(store.location) as source:
        before = list(source.links())
    store.write(partial(append, rows=AWKWARD[:2]))
    for row in AWKWARD[2:]:
        store.write(partial(append, rows=[row]))
    with open_chain(store.location) as source:
        stored = list(source.links())[len(before) :]
        verdict = verify_ledger(source)
    assert verdict.ok, verdict.reason
    assert [link.row for link in stored] == AWKWARD
    prev = before[-1].hash if before else "0" * 64
    for link in stored:
        assert prev is not None and (link.prev_hash, link.hash) == (prev, _linked(prev, link.row))
        prev = link.hash


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
