"""The store contract, passkeys (SPEC §14): kept per owner, a challenge used once, a
revocation final."""

from __future__ import annotations

import time

import pytest

from undogate.errors import LedgerError
from undogate.ledger import Store, StoredPasskey


def passkey(passkey_id: str, owner: str = "op_1") -> StoredPasskey:
    return StoredPasskey(
        id=passkey_id,
        owner_id=owner,
        label="laptop",
        public_key="pQECAyYgASFYIA",
        sign_count=3,
        rp_id="localhost",
        origin="http://localhost:8080",
        created_at=time.time(),
        revoked_at=None,
    )


def test_passkeys_are_kept_per_owner_used_once_and_revoked_once(store: Store) -> None:
    store.write(lambda tx: tx.insert_passkey(passkey("pk_a")))
    store.write(lambda tx: tx.insert_passkey(passkey("pk_b", owner="op_2")))
    assert [p.id for p in store.read(lambda tx: tx.passkeys("op_1"))] == ["pk_a"]
    made = passkey("pk_a")
    kept = store.read(lambda tx: tx.passkey("pk_a"))
    assert kept is not None and vars(kept) == {**vars(made), "created_at": kept.created_at}
    assert kept.created_at == pytest.approx(made.created_at)
    assert store.read(lambda tx: tx.passkey("pk_none")) is None
    assert not store.read(lambda tx: tx.passkey_challenge_used("c1"))
    store.write(
        lambda tx: tx.record_passkey_use(
            challenge="c1", passkey_id="pk_a", job_id="job_1", sign_count=9
        )
    )
    assert store.read(lambda tx: tx.passkey_challenge_used("c1"))
    found = store.read(lambda tx: tx.passkey("pk_a"))
    assert found is not None and found.sign_count == 9
    with pytest.raises(LedgerError):  # a challenge approves once, whatever the caller does
        store.write(
            lambda tx: tx.record_passkey_use(
                challenge="c1", passkey_id="pk_a", job_id="job_2", sign_count=10
            )
        )
    store.write(lambda tx: tx.revoke_passkey("pk_a"))
    revoked = store.read(lambda tx: tx.passkey("pk_a"))
    assert revoked is not None and revoked.revoked_at is not None
    with pytest.raises(LedgerError):
        store.write(lambda tx: tx.revoke_passkey("pk_a"))
