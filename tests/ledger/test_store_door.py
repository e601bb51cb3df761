"""The store contract, the door: a write commits whole or not at all, a read sees one
committed snapshot, writes never interleave; and a store names its ledger and closes once.
"""

from __future__ import annotations

import threading

import pytest

from undogate.jobs import JobState
from undogate.ledger import Store, Transaction

from .conftest import event, insert, job

# -- the door ------------------------------------------------------------------------------


def test_a_write_commits_and_a_read_sees_it(store: Store) -> None:
    insert(store, job("job_1"))
    loaded = store.read(lambda tx: tx.load_job("job_1"))
    assert loaded is not None and loaded.state is JobState.PREPARED
    assert store.load_job("job_missing") is None


def test_a_failing_write_keeps_nothing_and_its_error_passes_through(store: Store) -> None:
    class Boom(Exception):
        pass

    def half(tx: Transaction) -> None:
        tx.insert_job(job("job_1"), "digest", 10)
        event(tx, "job_1", "prepare")
        tx.count_job(10)
        raise Boom

    with pytest.raises(Boom):
        store.write(half)
    assert store.load_job("job_1") is None
    assert store.events("job_1") == []
    assert store.counter("job_count") == 0


def test_a_write_reads_its_own_rows_even_through_read(store: Store) -> None:
    def write(tx: Transaction) -> tuple[bool, bool]:
        tx.insert_job(job("job_1"), "digest", 10)
        direct = tx.load_job("job_1") is not None
        nested = store.read(lambda r: r.load_job("job_1")) is not None
        return direct, nested

    assert store.write(write) == (True, True)


def test_a_read_elsewhere_sees_only_what_is_committed(store: Store) -> None:
    inside, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def slow_write(tx: Transaction) -> None:
        tx.insert_job(job("job_1"), "digest", 10)
        inside.set()
        assert release.wait(10)

    writer = threading.Thread(target=store.write, args=(slow_write,))
    writer.start()
    try:
        assert inside.wait(10)
        seen.append(store.load_job("job_1") is not None)  # another thread, mid-write
    finally:
        release.set()
        writer.join(10)
    seen.append(store.load_job("job_1") is not None)
    assert seen == [False, True]


def test_writes_never_interleave(store: Store) -> None:
    seqs: list[int] = []
    lock = threading.Lock()

    def take(_: int) -> None:
        for _ in range(20):
            got = store.write(lambda tx: tx.next_seq())
            with lock:
                seqs.append(got)

    threads = [threading.Thread(target=take, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(seqs) == list(range(1, 81))
    assert store.counter("op_seq") == 80


# -- closing -----------------------------------------------------------------------------------


def test_a_store_says_which_ledger_it_is_and_where(store: Store) -> None:
    assert store.location and store.location in store.describe()
    assert "password" not in store.describe().lower()


def test_close_is_idempotent(store: Store) -> None:
    store.close()
    store.close()
