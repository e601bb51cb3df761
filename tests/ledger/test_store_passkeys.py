"""The store contract, passkeys (docs/proof.md): kept per owner, a challenge used once, a
revocation final, an enrolment code kept as its hash and spent once."""

from __future__ import annotations

import time

import pytest

from undogate.errors import LedgerError
from undogate.ledger import Store, StoredEnrolment, StoredPasskey


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


def enrolment(code_sha256: str, owner: str = "op_1") -> StoredEnrolment:
    now = time.time()
    return StoredEnrolment(
        code_sha256=code_sha256,
        owner_id=owner,
        created_at=now,
        expires_at=now + 900.25,
        used_at=None,
        passkey_id=None,
    )


def test_an_enrolment_code_is_kept_as_given_and_spent_once(store: Store) -> None:
    made = enrolment("sha-1")
    store.write(lambda tx: tx.insert_passkey_enrolment(made))
    assert store.read(lambda tx: tx.passkey_enrolment("sha-1")) == made
    assert store.read(lambda tx: tx.passkey_enrolment("sha-none")) is None
    with pytest.raises(LedgerError):  # one code, one row
        store.write(lambda tx: tx.insert_passkey_enrolment(enrolment("sha-1", owner="op_2")))
    store.write(lambda tx: tx.insert_passkey(passkey("pk_a")))
    spent_at = time.time()
    store.write(lambda tx: tx.spend_passkey_enrolment("sha-1", passkey_id="pk_a", at=spent_at))
    spent = store.read(lambda tx: tx.passkey_enrolment("sha-1"))
    assert spent is not None and (spent.used_at, spent.passkey_id) == (spent_at, "pk_a")
    assert (spent.owner_id, spent.expires_at) == (made.owner_id, made.expires_at)
    with pytest.raises(LedgerError):  # spent once, whatever the caller does
        store.write(lambda tx: tx.spend_passkey_enrolment("sha-1", passkey_id="pk_b", at=1.0))
