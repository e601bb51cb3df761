"""The store contract, credentials: kept, listed, counted while live, and revoked once."""

from __future__ import annotations

import time

import pytest

from undogate.errors import LedgerError
from undogate.ledger import Store, Transaction

from .conftest import AGENT, credential


def test_credentials_are_kept_and_revoked_once(store: Store) -> None:
    def issue(tx: Transaction) -> None:
        credential(tx, "op_1")
        credential(tx, "op_2")
        credential(tx, "at_b", "agent", owner="op_1")
        credential(tx, "at_a", "agent", owner="op_1")
        credential(tx, "at_c", "agent", owner="op_2")

    store.write(issue)
    stored = store.read(lambda tx: tx.credential("op_1"))
    assert stored is not None
    assert (stored.kind, stored.owner_id, stored.agent_id, stored.label) == (
        "operator",
        "op_1",
        None,
        "label of op_1",
    )
    assert stored.scopes == ("agents:read", "agents:write")
    assert stored.agents == ("agent-a", "agent-b")
    assert (stored.key_hash, stored.revoked_at) == ("hash-op_1", None)
    token = store.read(lambda tx: tx.credential("at_a"))
    assert token is not None and (token.kind, token.agent_id, token.scopes) == ("agent", AGENT, ())
    assert token.agents is None
    assert store.read(lambda tx: tx.credential("op_unknown")) is None
    assert [c.id for c in store.read(lambda tx: tx.credentials())] == [
        "op_1",
        "op_2",
        "at_b",
        "at_a",
        "at_c",
    ]
    assert store.read(lambda tx: tx.count_live_operators()) == 2
    assert store.read(lambda tx: tx.live_agent_tokens("op_1")) == ["at_a", "at_b"]

    at = time.time()
    store.write(lambda tx: tx.revoke_credential("at_a", at=at, reason="lost"))
    store.write(lambda tx: tx.revoke_credential("op_2", at=at, reason="revoked"))
    revoked = store.read(lambda tx: tx.credential("at_a"))
    assert revoked is not None and revoked.revoked_at == pytest.approx(at)
    assert store.read(lambda tx: tx.live_agent_tokens("op_1")) == ["at_b"]
    assert store.read(lambda tx: tx.count_live_operators()) == 1
    with pytest.raises(LedgerError):
        store.write(lambda tx: tx.revoke_credential("at_a", at=time.time(), reason="again"))
    again = store.read(lambda tx: tx.credential("at_a"))
    assert again is not None and again.revoked_at == pytest.approx(at)
