"""The store contract for review sessions (``web.sessions``), on every engine: saved,
touched, ended alone, by credential or by age, and the previews they hold."""

from __future__ import annotations

from functools import partial

from undogate.ledger import Reader, Store, StoredWebPreview, StoredWebSession, Transaction


def _session(id_hash: str, credential: str = "op_1", at: float = 100.0) -> StoredWebSession:
    return StoredWebSession(id_hash, credential, created_at=at, last_seen=at)


def _preview(session_hash: str, handle: str, at: float) -> StoredWebPreview:
    return StoredWebPreview(session_hash, handle, "job_1", '{"shown":true}', "c2VhbGVk", at)


def test_a_session_is_saved_touched_and_read_back(store: Store) -> None:
    store.write(lambda tx: tx.save_web_session(_session("s1")))
    touched = StoredWebSession("s1", "op_1", created_at=100.0, last_seen=150.0, notice="hi")
    store.write(lambda tx: tx.save_web_session(touched))
    assert store.read(lambda tx: tx.web_session("s1")) == touched
    assert store.read(lambda tx: tx.web_session("nope")) is None


def test_sessions_end_alone_by_credential_or_by_age_with_their_previews(store: Store) -> None:
    def setup(tx: Transaction) -> None:
        for id_hash, credential, at in (
            ("a", "op_1", 100.0),
            ("b", "op_1", 100.0),
            ("c", "op_2", 100.0),
            ("d", "op_2", 500.0),
            ("e", "op_3", 900.0),
        ):
            tx.save_web_session(_session(id_hash, credential, at))
        tx.hold_web_preview(_preview("a", "h1", 100.0), keep=16)

    store.write(setup)
    assert store.write(lambda tx: tx.end_web_sessions(id_hash="a")) == 1
    assert store.read(lambda tx: tx.web_preview("a", "h1")) is None
    assert store.write(lambda tx: tx.end_web_sessions(credential_id="op_1")) == 1
    assert store.write(lambda tx: tx.end_web_sessions(idle_since=200.0)) == 1  # c
    assert store.write(lambda tx: tx.end_web_sessions(created_before=600.0)) == 1  # d
    assert store.read(lambda tx: tx.web_session("e")) is not None
    assert store.write(lambda tx: tx.end_web_sessions()) == 0  # no condition, nothing


def test_a_session_keeps_its_newest_previews_only(store: Store) -> None:
    store.write(lambda tx: tx.save_web_session(_session("s1")))
    for n in range(5):
        held = _preview("s1", f"h{n}", 100.0 + n)

        def hold(tx: Transaction, held: StoredWebPreview = held) -> None:
            tx.hold_web_preview(held, keep=3)

        store.write(hold)
    kept = [store.read(partial(_held, handle=f"h{n}")) for n in range(5)]
    assert [k is not None for k in kept] == [False, False, True, True, True]
    assert kept[4] == _preview("s1", "h4", 104.0)
    assert store.read(lambda tx: tx.web_preview("s2", "h4")) is None


def test_the_web_secret_is_made_once_and_kept(store: Store) -> None:
    first = store.write(lambda tx: tx.web_secret())
    assert len(first) == 64 and store.write(lambda tx: tx.web_secret()) == first


def _held(tx: Reader, handle: str) -> StoredWebPreview | None:
    return tx.web_preview("s1", handle)
