"""Credentials: format, hashing, scopes that never widen, revocation and its guard."""

from __future__ import annotations

from pathlib import Path

import pytest

from undogate.auth import READ, Keyring
from undogate.errors import Conflict, InvalidRequest, NotFound, Unauthorized
from undogate.jobs import ChangeRequest, PrepareRequest
from undogate.ledger import DB_NAME, Ledger

from .worlds import MASTER_KEY, ApiWorld


def test_keys_have_a_visible_prefix_256_bits_and_only_their_hash_is_stored(
    api_world: ApiWorld, data_dir: Path
) -> None:
    keyring: Keyring = api_world.keyring
    issued = keyring.create_operator(label="dave")
    assert issued.key.startswith("ugo_")
    secret = issued.key.split("_", 2)[2]
    assert len(secret) >= 43  # token_urlsafe(32): 256 bits
    agent = keyring.create_agent_token(
        owner_id=issued.credential.id, agent_id="account-assistant", label="a"
    )
    assert agent.key.startswith("uga_")
    raw = (data_dir / DB_NAME).read_bytes() + (data_dir / (DB_NAME + "-wal")).read_bytes()
    assert issued.key.encode() not in raw and agent.key.encode() not in raw
    assert secret.encode() not in raw
    assert "key" not in issued.credential.to_json()


def test_authenticate_answers_the_same_for_unknown_malformed_and_revoked(
    api_world: ApiWorld,
) -> None:
    keyring: Keyring = api_world.keyring
    issued = keyring.create_operator(label="erin")
    assert keyring.authenticate(issued.key).owner_id == issued.credential.id
    tampered = issued.key[:-1] + ("A" if issued.key[-1] != "A" else "B")
    for bad in (tampered, "nonsense", "ugo_zzzzzzzzzzzz_x", issued.key + "x"):
        with pytest.raises(Unauthorized, match="missing, unknown or revoked"):
            keyring.authenticate(bad)
    keyring.revoke(issued.credential.id)
    with pytest.raises(Unauthorized, match="missing, unknown or revoked"):
        keyring.authenticate(issued.key)
    master = keyring.authenticate(MASTER_KEY)
    assert master.kind == "master" and master.owner_id == "master"


def test_a_key_revoked_by_another_process_is_refused_at_once(
    api_world: ApiWorld, data_dir: Path
) -> None:
    """No memo of verified keys: another process on the same ledger (here a second
    store on its file, with a lease of its own) revokes, and this keyring refuses the
    key, and the agent token it issued, on the very next lookup."""
    keyring: Keyring = api_world.keyring
    owner = keyring.create_operator(label="frank")
    agent = keyring.create_agent_token(
        owner_id=owner.credential.id, agent_id="account-assistant", label="a"
    )
    for key in (owner.key, agent.key):
        assert keyring.authenticate(key).kind in ("operator", "agent")
        assert keyring.master(key) is None  # only the master key skips the ledger
    assert keyring.master(MASTER_KEY) == keyring.authenticate(MASTER_KEY)

    elsewhere = Ledger.open(data_dir)
    try:
        Keyring(elsewhere).revoke(owner.credential.id)  # cascades to its agent token
    finally:
        elsewhere.close()
    for key in (owner.key, agent.key):
        with pytest.raises(Unauthorized):
            keyring.authenticate(key)


def test_a_token_revoked_over_the_api_stops_working_on_the_next_request(
    api_world: ApiWorld,
) -> None:
    from starlette.testclient import TestClient

    keyring: Keyring = api_world.keyring
    token = keyring.create_agent_token(
        owner_id=api_world.owner_id, agent_id="account-assistant", label="soon revoked"
    )
    agent = {"Authorization": f"Bearer {token.key}"}
    with TestClient(api_world.app) as client:
        assert client.get("/api/v1/agent", headers=agent).status_code == 200
        revoked = client.post(
            f"/api/v1/admin/keys/{token.credential.id}/revoke",
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
        )
        assert revoked.status_code == 200, revoked.text
        refused = client.get("/api/v1/agent", headers=agent)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthorized"


def test_scopes_are_never_widened_in_place(api_world: ApiWorld) -> None:
    """The key keeps the scopes it was made with; the database itself refuses widening
    them, deleting the key or un-revoking it (tests/ledger/test_store_history.py, on
    every engine)."""
    keyring: Keyring = api_world.keyring
    ledger = keyring.ledger
    assert isinstance(ledger, Ledger)
    reader = keyring.create_operator(label="ro", scopes=(READ,))
    assert keyring.authenticate(reader.key).scopes == frozenset({READ})


def test_revoking_the_only_owner_of_unresolved_jobs_needs_force(api_world: ApiWorld) -> None:
    keyring: Keyring = api_world.keyring
    owner = keyring.create_operator(label="frank")
    token = keyring.create_agent_token(
        owner_id=owner.credential.id, agent_id="account-assistant", label="t"
    )
    principal = keyring.authenticate(token.key)
    api_world.gateway.prepare(
        principal.actor("test"),
        "account-assistant",
        PrepareRequest("s", (ChangeRequest(resource_id="customer", set={"status": "a"}),)),
    )
    with pytest.raises(Conflict, match="only owner of 1 unresolved") as refused:
        keyring.revoke(owner.credential.id)
    assert refused.value.details["force_required"] is True
    assert keyring.authenticate(owner.key)  # still live
    done = keyring.revoke(owner.credential.id, force=True)
    assert done.unresolved_jobs == 1
    assert done.also_revoked == (token.credential.id,)  # its agent tokens go with it
    with pytest.raises(Unauthorized):
        keyring.authenticate(token.key)
    with pytest.raises(Conflict, match="already revoked"):
        keyring.revoke(owner.credential.id)
    events = keyring.ledger.read(lambda tx: tx.events_since(0, 0, 1000))
    revoked = [
        e.target for e in events if e.job_id is None and e.operation.startswith("credential_revoke")
    ]
    assert revoked[-2:] == [owner.credential.id, token.credential.id]


def test_bad_inputs_are_refused(api_world: ApiWorld) -> None:
    keyring: Keyring = api_world.keyring
    with pytest.raises(InvalidRequest):
        keyring.create_operator(label="x", scopes=("agents:admin",))
    with pytest.raises(InvalidRequest):
        keyring.create_operator(label="x", scopes=())
    with pytest.raises(InvalidRequest):
        keyring.create_operator(label="")
    with pytest.raises(InvalidRequest, match="no agent"):
        keyring.create_agent_token(owner_id=api_world.owner_id, agent_id="ghost", label="g")
    with pytest.raises(NotFound):
        keyring.create_agent_token(owner_id="op_missing", agent_id="other-agent", label="g")
    limited = keyring.create_operator(label="lim", agents=("other-agent",))
    with pytest.raises(InvalidRequest, match="no access"):
        keyring.create_agent_token(
            owner_id=limited.credential.id, agent_id="account-assistant", label="g"
        )
    with pytest.raises(InvalidRequest, match="at least 32"):
        Keyring(keyring.ledger, master_key="short")
