"""The store contract for rewind plans and stopped agents (docs/rewind.md), on every
engine: which jobs a selection holds, a plan's row and its one token, a stop per owner."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from undogate.errors import PreviewUsed
from undogate.jobs import ChangeState
from undogate.ledger import Store, StoredRewind, Transaction

from .conftest import AGENT, OWNER, insert, job


def _rewind(rewind_id: str = "rw_1", owner: str = OWNER) -> StoredRewind:
    now = time.time()
    return StoredRewind(
        id=rewind_id,
        owner_id=owner,
        agent_id=AGENT,
        created_by="operator:op_1",
        selection={"agent": AGENT, "since": "0.0"},
        steps=[{"step": "1", "job": "job_1", "change": "0", "verdict": "undo"}],
        state="planned",
        token_hash=None,
        expires_at=None,
        versions={},
        skip_blocked=False,
        confirmed_at=None,
        stopped=None,
        created_at=now,
        updated_at=now,
    )


def _applied(store: Store, job_id: str) -> None:
    """Applied now: stamped with the next operation sequence number."""
    store.write(lambda tx: tx.set_change_state(job_id, 0, ChangeState.APPLIED, stamp_seq=True))


def test_a_selection_holds_the_owners_jobs_of_the_agent_that_applied_anything(
    store: Store,
) -> None:
    start = time.time() - 1
    insert(store, job("job_a"), replace(job("job_b"), session="s-1"), job("job_c"))
    insert(store, job("job_x", owner="op_other"), job("job_y", agent="other-agent"))
    for job_id in ("job_a", "job_b", "job_x", "job_y"):
        _applied(store, job_id)  # job_c never applied anything

    def select(**narrow: object) -> list[str]:
        args = {"since": start, "until": None, "label": None, "session": None, **narrow}
        return store.read(lambda tx: tx.rewind_jobs(OWNER, AGENT, **args))  # type: ignore[arg-type]

    assert select() == ["job_b", "job_a"]  # newest first, only what applied
    assert select(session="s-1") == ["job_b"]
    assert select(label="ticket 7") == ["job_b", "job_a"]
    assert select(label="another") == []
    assert select(until=start) == []
    assert store.read(lambda tx: tx.load_job("job_b")).session == "s-1"  # type: ignore[union-attr]


def test_a_plan_is_kept_its_token_claimed_once_and_never_deleted(store: Store) -> None:
    store.write(lambda tx: tx.insert_rewind(_rewind()))
    kept = store.read(lambda tx: tx.load_rewind("rw_1"))
    assert kept is not None and kept.selection == {"agent": AGENT, "since": "0.0"}
    assert kept.steps == _rewind().steps and kept.state == "planned"
    assert store.read(lambda tx: tx.load_rewind("rw_none")) is None

    def preview(tx: Transaction, token: str) -> None:
        tx.save_rewind_preview(
            "rw_1", steps=[], token_hash=token, expires_at=9e9, versions={"customer": '"v2"'}
        )

    store.write(lambda tx: preview(tx, "first"))
    store.write(lambda tx: preview(tx, "second"))  # a newer preview replaces the token
    with pytest.raises(PreviewUsed):
        store.write(lambda tx: tx.claim_rewind("rw_1", "first", skip_blocked=False))
    store.write(lambda tx: tx.claim_rewind("rw_1", "second", skip_blocked=True))
    with pytest.raises(PreviewUsed):  # once
        store.write(lambda tx: tx.claim_rewind("rw_1", "second", skip_blocked=True))
    store.write(lambda tx: tx.finish_rewind("rw_1", stopped={"step": "2"}))
    done = store.read(lambda tx: tx.load_rewind("rw_1"))
    assert done is not None
    assert (done.state, done.skip_blocked, done.stopped) == ("finished", True, {"step": "2"})
    assert done.versions == {"customer": '"v2"'} and done.confirmed_at is not None


def test_an_agent_is_stopped_per_owner_and_resumed(store: Store) -> None:
    def stop(owner: str, stopped: bool) -> bool:
        return store.write(
            lambda tx: tx.set_agent_stopped(owner, AGENT, stopped=stopped, by="operator:x")
        )

    assert store.read(lambda tx: tx.agent_stopped_at(OWNER, AGENT)) is None
    assert stop(OWNER, True) is True
    assert stop(OWNER, True) is False  # already stopped: nothing changes
    assert store.read(lambda tx: tx.agent_stopped_at(OWNER, AGENT)) is not None
    assert store.read(lambda tx: tx.agent_stopped_at("op_other", AGENT)) is None
    assert stop(OWNER, False) is True
    assert store.read(lambda tx: tx.agent_stopped_at(OWNER, AGENT)) is None
