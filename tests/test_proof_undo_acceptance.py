"""The passkey step-up on the acceptance of a verified undo (docs/proof.md): where
the resource requires a passkey, the offer carries the challenge of exactly that
acceptance (the resource, its identity, the check and the undos it verified, the
acceptance it follows); accepting needs an assertion over it, every refusal records
nothing, and ``ledger verify`` checks the approval again offline."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.errors import (
    InvalidRequest,
    PasskeyApprovalExpired,
    PasskeyNotVerified,
    PasskeyReplayed,
    PasskeyRequired,
    PasskeyUnknown,
    PasskeyWrongPreview,
    UndogateError,
)
from undogate.ledger import open_chain
from undogate.operations.undo_offer import accept_verified_undo, resource_undo_offer
from undogate.proof.ledger_check import verify_ledger

from .browser import served
from .collections_world import contacts, record_passing_check
from .soft_authenticator import unb64
from .test_proof_passkeys import BOB, register
from .worlds import OWNER, LocalGateway, make_config, web_world


@pytest.fixture
def config(server: ContractServer, data_dir: Path) -> Config:
    return make_config(
        server,
        data_dir,
        contacts(server, require_passkey=True),
        contacts(server, "open_contacts", path="/collections/open"),
    )


@pytest.fixture
def gw(config: Config, open_gateway: Any) -> LocalGateway:
    gateway: LocalGateway = open_gateway(config)
    record_passing_check(gateway, config)
    record_passing_check(gateway, config, "open_contacts")
    return gateway


def refused(gw: LocalGateway, assertion: str | None, expires_at_ms: int | None) -> UndogateError:
    """Accept, expect a refusal, and check nothing was accepted or approved."""
    with pytest.raises(UndogateError) as caught:
        accept_verified_undo(
            gw, OWNER, "contacts", passkey_assertion=assertion, passkey_expires_at_ms=expires_at_ms
        )
    assert resource_undo_offer(gw, "contacts").accepted == frozenset()
    assert gw.ledger.read(lambda tx: tx.latest_undo_acceptance("contacts")) is None
    return caught.value


def test_accepting_a_verified_undo_needs_the_passkey_over_that_acceptance(
    gw: LocalGateway, data_dir: Path
) -> None:
    key = register(gw, OWNER)
    offer = resource_undo_offer(gw, "contacts")
    assert offer.passkey_challenge is not None and offer.awaiting_acceptance
    challenge, expires = unb64(offer.passkey_challenge), offer.passkey_expires_at_ms
    assert expires is not None

    assert isinstance(refused(gw, None, None), PasskeyRequired)
    unverified = key.approve(challenge, verified=False)
    assert isinstance(refused(gw, unverified, expires), PasskeyNotVerified)
    other = key.approve(secrets.token_bytes(32))  # signed something else
    assert isinstance(refused(gw, other, expires), PasskeyWrongPreview)
    stranger = register(gw, BOB).approve(challenge)  # another owner's passkey
    assert isinstance(refused(gw, stranger, expires), PasskeyUnknown)
    # The expiry is in what it signed: another one is another document.
    assert isinstance(refused(gw, key.approve(challenge), expires - 1), PasskeyWrongPreview)
    assert isinstance(refused(gw, key.approve(challenge), None), InvalidRequest)

    approval = key.approve(challenge)
    accepted = accept_verified_undo(
        gw, OWNER, "contacts", passkey_assertion=approval, passkey_expires_at_ms=expires
    )
    assert accepted.accepted == accepted.verified == {"recreate", "undo_of_create"}
    # The next acceptance follows this one: its challenge is new, and this one is spent.
    assert accepted.passkey_challenge not in (None, offer.passkey_challenge)
    with pytest.raises(PasskeyReplayed):
        accept_verified_undo(
            gw, OWNER, "contacts", passkey_assertion=approval, passkey_expires_at_ms=expires
        )

    with open_chain(str(data_dir)) as source:
        verdict = verify_ledger(source)  # the approval is checked again, offline
        approvals = [s for s in source.links() if s.row.operation == "passkey_approved"]
    assert verdict.ok, verdict.reason
    assert len(approvals) == 1 and approvals[0].row.job_id is None


def test_an_approval_of_an_acceptance_expires(gw: LocalGateway) -> None:
    """The acceptance document carries its expiry (as long as a preview): an approval
    sent after it is refused, and so is one whose expiry no offer gives."""
    key = register(gw, OWNER)
    offer = resource_undo_offer(gw, "contacts")
    assert offer.passkey_challenge is not None and offer.passkey_expires_at_ms is not None
    ttl_ms = gw.config.server.preview_ttl_s * 1000
    assert offer.passkey_expires_at_ms == pytest.approx(gw.clock() * 1000 + ttl_ms, abs=5_000)
    approval = key.approve(unb64(offer.passkey_challenge))
    started = gw.clock()
    gw.clock = lambda: started + gw.config.server.preview_ttl_s + 1
    error = refused(gw, approval, offer.passkey_expires_at_ms)
    assert isinstance(error, PasskeyApprovalExpired) and error.code == "passkey_approval_expired"
    # An expiry an hour later than any offer made now gives (as a clock set ahead
    # would make it): refused too.
    gw.clock = lambda: started + 3600
    late = resource_undo_offer(gw, "contacts")
    assert late.passkey_challenge is not None and late.passkey_expires_at_ms is not None
    gw.clock = lambda: started
    error = refused(gw, key.approve(unb64(late.passkey_challenge)), late.passkey_expires_at_ms)
    assert isinstance(error, PasskeyApprovalExpired) and "no page gives" in error.message


def test_a_resource_that_requires_no_passkey_is_accepted_without_one(gw: LocalGateway) -> None:
    assert resource_undo_offer(gw, "open_contacts").passkey_challenge is None
    accepted = accept_verified_undo(gw, OWNER, "open_contacts")
    assert accepted.accepted == accepted.verified


def test_the_api_refuses_an_acceptance_without_the_passkey(
    server: ContractServer, data_dir: Path, open_gateway: Any
) -> None:
    world = web_world(server, data_dir, open_gateway, require_passkey=True)
    record_passing_check(world.gateway, world.gateway.config, "notes", ("undo_of_create",))
    with served(world.app) as site:
        url = f"{site.url}/api/v1/resources/notes"
        auth = {"Authorization": f"Bearer {world.keys['alice']}"}
        offer = httpx.get(f"{url}/undo-offer", headers=auth, timeout=30, trust_env=False)
        assert offer.status_code == 200 and len(unb64(offer.json()["passkey_challenge"])) == 32
        for body, code in (
            (None, "passkey_required"),
            ({"passkey_assertion": "text"}, "invalid_request"),
            ({"passkey_assertion": {}}, "invalid_request"),
            ({"passkey_expires_at_ms": "1"}, "invalid_request"),
            ({"passkey_expires_at_ms": True}, "invalid_request"),
        ):
            done = httpx.post(
                f"{url}/undo-acceptance", json=body, headers=auth, timeout=30, trust_env=False
            )
            assert done.status_code in (400, 403) and done.json()["error"]["code"] == code, (
                done.text
            )
    assert resource_undo_offer(world.gateway, "notes").accepted == frozenset()
