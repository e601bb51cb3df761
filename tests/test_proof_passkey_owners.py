"""Who may change an owner's passkeys (operations/owner_passkeys.py; docs/proof.md): an
operator key alone enrols no first passkey (a one-time code from the host does), adds no
second one and revokes none (a live passkey approves exactly that act); a lost device is
replaced from the host, in the chain. Through the gateway, with software authenticators;
the same in real Chromium: tests/test_passkeys_browser.py."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from undogate.contract_server import ContractServer
from undogate.errors import (
    EnrolmentCodeExpired,
    EnrolmentCodeRequired,
    EnrolmentCodeUnknown,
    EnrolmentCodeUsed,
    EnrolmentNotNeeded,
    InvalidRequest,
    NotFound,
    PasskeyApprovalExpired,
    PasskeyApprovalRequired,
    PasskeyNotVerified,
    PasskeyRevoked,
    PasskeyUnknown,
    PasskeyWrongAct,
    UndogateError,
)
from undogate.jobs import Actor, JobState
from undogate.ledger import DB_NAME, Event, open_chain
from undogate.operations import owner_passkeys
from undogate.passkeys import Approval
from undogate.proof.ledger_check import verify_ledger

from .ledger.conftest import credential
from .postgres import PostgresCluster
from .soft_authenticator import SoftAuthenticator, unb64
from .test_proof_passkeys import (
    BOB,
    HOST,
    PATH,
    addition,
    approval,
    confirm,
    enrolment_code,
    preview,
    register,
    revoke,
)
from .worlds import OWNER, LocalGateway, make_config, prepare, resource


@pytest.fixture(params=["sqlite", "postgres"])
def gw(
    request: pytest.FixtureRequest, server: ContractServer, data_dir: Path, open_gateway: Any
) -> LocalGateway:
    """A resource that requires the passkey, on each engine (PostgreSQL: a ledger that
    running servers share, where the CLI enrols beside them)."""
    shared: dict[str, str] = {}
    if request.param == "postgres":
        cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
        shared["ledger"] = cluster.fresh_database()
    passkey_resource = resource(server, "customer", PATH, require_passkey=True)
    gateway: LocalGateway = open_gateway(make_config(server, data_dir, passkey_resource, **shared))
    return gateway


def passkey_events(gw: LocalGateway) -> list[Event]:
    """Every event of the ledger that is not a job's (registrations, codes, approvals)."""
    return [e for e in gw.ledger.read(lambda tx: tx.events_since(0, 0, 1000)) if e.job_id is None]


def live(gw: LocalGateway, actor: Actor = OWNER) -> list[str]:
    return [
        p.id for p in gw.ledger.read(lambda tx: tx.passkeys(actor.owner_id)) if p.revoked_at is None
    ]


def refused(
    gw: LocalGateway, attempt: Callable[[], object], error: type[UndogateError]
) -> UndogateError:
    """Run ``attempt``; it must raise ``error`` and leave the ledger's passkey side as
    it was (no registration, revocation, approval or spent code)."""
    before = (gw.ledger.read(lambda tx: tx.passkeys(OWNER.owner_id)), len(passkey_events(gw)))
    with pytest.raises(UndogateError) as caught:
        attempt()
    assert type(caught.value) is error, caught.value
    assert (
        gw.ledger.read(lambda tx: tx.passkeys(OWNER.owner_id)),
        len(passkey_events(gw)),
    ) == before
    return caught.value


def test_a_key_alone_cannot_enrol_a_first_passkey(gw: LocalGateway) -> None:
    mine = addition(SoftAuthenticator())
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, mine), EnrolmentCodeRequired)
    wrong = "AAAA-BBBB-CCCC-DDDD-EEEE-FFFF"
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, mine, wrong), EnrolmentCodeUnknown)
    bobs = enrolment_code(gw, BOB.owner_id)  # a real code, for another owner
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, mine, bobs), EnrolmentCodeUnknown)
    # No live passkey to approve it: a passkey's own signature is no way in either.
    own = approval(gw, SoftAuthenticator(), mine)
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, mine, None, own), EnrolmentCodeRequired)

    code = enrolment_code(gw, OWNER.owner_id)
    typed = code.lower().replace("-", " ")  # as a person may type it
    kept = owner_passkeys.register(gw, OWNER, mine, typed)
    assert live(gw) == [kept.id]
    registered = passkey_events(gw)[-1]
    assert registered.operation == "passkey_registered" and registered.target == kept.id
    assert registered.detail is not None and "enrolment_code_sha256" in registered.detail
    # The code enrols once, and only a first passkey.
    second = addition(SoftAuthenticator())
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, second, code), PasskeyApprovalRequired)


def test_an_enrolment_code_holds_once_for_fifteen_minutes(gw: LocalGateway) -> None:
    first = SoftAuthenticator()
    code = enrolment_code(gw, OWNER.owner_id)
    owner_passkeys.register(gw, OWNER, addition(first), code)
    revoke(gw, first, live(gw)[0])  # no live passkey again: a code is needed again
    again = addition(SoftAuthenticator())
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, again, code), EnrolmentCodeUsed)

    late = enrolment_code(gw, OWNER.owner_id)
    now = gw.clock()
    gw.clock = lambda: now + 15 * 60 + 1
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, again, late), EnrolmentCodeExpired)
    gw.clock = lambda: now + 15 * 60 - 1
    owner_passkeys.register(gw, OWNER, again, late)
    assert len(live(gw)) == 1


def test_a_second_passkey_needs_a_live_ones_approval_of_exactly_it(gw: LocalGateway) -> None:
    key = register(gw, OWNER)
    other = SoftAuthenticator()
    added = addition(other, "phone")
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, added), PasskeyApprovalRequired)
    # The new passkey approving itself: it is not a live passkey of the owner.
    itself = approval(gw, other, added)
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, added, None, itself), PasskeyUnknown)
    # An approval of adding another passkey (the thief's, say) adds nothing else.
    elsewhere = approval(gw, key, addition(SoftAuthenticator(), "phone"))
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, added, None, elsewhere), PasskeyWrongAct)
    # The same passkey, another name: another act.
    renamed = approval(gw, key, addition(other, "work phone"))
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, added, None, renamed), PasskeyWrongAct)
    bobs = approval(gw, register(gw, BOB), added)
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, added, None, bobs), PasskeyUnknown)
    asked = owner_passkeys.act_challenge(gw, OWNER.owner_id, added)
    unverified = Approval(key.approve(unb64(asked.challenge), verified=False), asked.expires_at_ms)
    refused(
        gw, lambda: owner_passkeys.register(gw, OWNER, added, None, unverified), PasskeyNotVerified
    )
    no_expiry = Approval(key.approve(unb64(asked.challenge)), None)
    refused(gw, lambda: owner_passkeys.register(gw, OWNER, added, None, no_expiry), InvalidRequest)
    stale = approval(gw, key, added)
    now = gw.clock()
    gw.clock = lambda: now + gw.config.server.preview_ttl_s + 1
    refused(
        gw, lambda: owner_passkeys.register(gw, OWNER, added, None, stale), PasskeyApprovalExpired
    )
    gw.clock = lambda: now

    approved = approval(gw, key, added)
    kept = owner_passkeys.register(gw, OWNER, added, None, approved)
    assert len(live(gw)) == 2 and live(gw)[1] == kept.id
    *_, approval_event, registered = passkey_events(gw)
    assert approval_event.operation == "passkey_approved"
    assert approval_event.detail is not None
    signed = approval_event.detail["preview"]
    assert isinstance(signed, dict) and signed["format"] == "undogate.passkey_addition/1"
    assert registered.detail is not None and registered.detail["approved_by"] == live(gw)[0]
    # Spent: the same approval adds nothing again.
    with pytest.raises(InvalidRequest, match="registered already"):
        owner_passkeys.register(gw, OWNER, added, None, approved)
    # The new passkey approves previews.
    shown = preview(gw, prepare(gw, status="vip"))
    assertion = other.approve(unb64(str(shown.passkey_challenge)))
    assert confirm(gw, shown, assertion) is JobState.APPLIED


def test_revoking_a_passkey_needs_a_live_ones_approval_of_exactly_that(gw: LocalGateway) -> None:
    key = register(gw, OWNER)
    other = SoftAuthenticator()
    owner_passkeys.register(gw, OWNER, addition(other), None, approval(gw, key, addition(other)))
    first, second = live(gw)
    refused(gw, lambda: owner_passkeys.revoke(gw, OWNER, first, None), PasskeyApprovalRequired)
    of_second = approval(gw, key, second)
    refused(gw, lambda: owner_passkeys.revoke(gw, OWNER, first, of_second), PasskeyWrongAct)
    stranger = approval(gw, SoftAuthenticator(), first)
    refused(gw, lambda: owner_passkeys.revoke(gw, OWNER, first, stranger), PasskeyUnknown)

    owner_passkeys.revoke(gw, OWNER, first, approval(gw, other, first))  # another one approves
    assert live(gw) == [second]
    *_, approval_event, revoked = passkey_events(gw)
    assert approval_event.operation == "passkey_approved" and approval_event.target == second
    assert revoked.operation == "passkey_revoked" and revoked.target == first
    assert revoked.detail == {"approved_by": second}
    # A revoked passkey approves no revocation either; the last one revokes itself.
    refused(
        gw,
        lambda: owner_passkeys.revoke(gw, OWNER, second, approval(gw, key, second)),
        PasskeyRevoked,
    )
    revoke(gw, other, second)
    assert live(gw) == []


def test_a_lost_device_is_replaced_from_the_host_in_the_chain(
    gw: LocalGateway, server: ContractServer, data_dir: Path
) -> None:
    lost = register(gw, OWNER)
    also = SoftAuthenticator()
    owner_passkeys.register(gw, OWNER, addition(also), None, approval(gw, lost, addition(also)))
    old = live(gw)
    with pytest.raises(EnrolmentNotNeeded):
        owner_passkeys.issue_enrolment(gw, HOST, OWNER.owner_id)
    assert live(gw) == old

    issued = owner_passkeys.issue_enrolment(gw, HOST, OWNER.owner_id, replace=True)
    assert issued.revoked == tuple(old) and live(gw) == []
    *_, first, second, made = passkey_events(gw)
    assert [(e.operation, e.target) for e in (first, second)] == [
        ("passkey_revoked", old[0]),
        ("passkey_revoked", old[1]),
    ]
    assert first.actor == "system:host" and first.detail == {"replaced_by_enrolment": True}
    assert made.operation == "passkey_enrolment_issued" and made.target == OWNER.owner_id
    assert made.detail is not None and made.detail["revoked"] == old

    new = SoftAuthenticator()
    owner_passkeys.register(gw, OWNER, addition(new), issued.code)
    shown = preview(gw, prepare(gw, status="vip"))
    with pytest.raises(PasskeyRevoked):  # the lost device approves nothing
        confirm(gw, shown, lost.approve(unb64(str(shown.passkey_challenge))))
    assert server.attempt_count(PATH) == 0
    assert confirm(gw, shown, new.approve(unb64(str(shown.passkey_challenge))))
    with open_chain(gw.config.server.ledger or str(data_dir)) as source:
        verdict = verify_ledger(source)  # every approval of an act, checked again offline
    assert verdict.ok, verdict.reason


def test_an_enrolment_code_is_for_a_live_operator_key_and_kept_as_its_hash(
    gw: LocalGateway, data_dir: Path
) -> None:
    with pytest.raises(NotFound):
        owner_passkeys.issue_enrolment(gw, HOST, "op_nobody")
    gw.ledger.write(lambda tx: credential(tx, "at_agent", "agent", owner="op_alice"))
    with pytest.raises(NotFound):  # an agent token owns no passkey
        owner_passkeys.issue_enrolment(gw, HOST, "at_agent")
    gw.ledger.write(lambda tx: credential(tx, "op_gone"))
    gw.ledger.write(lambda tx: tx.revoke_credential("op_gone", at=gw.clock(), reason="left"))
    with pytest.raises(NotFound):
        owner_passkeys.issue_enrolment(gw, HOST, "op_gone")

    code = enrolment_code(gw, OWNER.owner_id)
    typed = code.replace("-", "")
    kept = gw.ledger.read(
        lambda tx: tx.passkey_enrolment(hashlib.sha256(typed.encode()).hexdigest())
    )
    assert kept is not None and kept.owner_id == OWNER.owner_id and kept.used_at is None
    events = repr(passkey_events(gw))
    assert kept.code_sha256 in events and code not in events and typed not in events
    if gw.config.server.ledger is None:  # and nowhere in the whole SQLite file
        gw.ledger.close()
        with closing(sqlite3.connect(data_dir / DB_NAME)) as conn:
            dump = "\n".join(conn.iterdump())
        assert code not in dump and typed not in dump
