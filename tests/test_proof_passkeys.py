"""The passkey step-up through the gateway (docs/proof.md), with a software authenticator:
every refusal has its code and writes nothing; an approval is recorded in the chain
and ``ledger verify`` and a receipt check it again offline. The same flows in real
Chromium: tests/test_passkeys_browser.py."""

from __future__ import annotations

import json
import secrets
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from undogate.chain import ChainedRow, row_hash
from undogate.contract_server import ContractServer
from undogate.errors import (
    PasskeyNotVerified,
    PasskeyReplayed,
    PasskeyRequired,
    PasskeyRevoked,
    PasskeyUnknown,
    PasskeyWrongPreview,
    UndogateError,
)
from undogate.jobs import Actor, JobState, Operation, Preview
from undogate.ledger import open_chain
from undogate.operations import owner_passkeys
from undogate.passkeys import Addition, Approval, verify_registration
from undogate.proof.ledger_check import verify_ledger

from .ledger.conftest import credential
from .serving import cli
from .soft_authenticator import ORIGIN, RP_ID, SoftAuthenticator, unb64
from .worlds import OWNER, LocalGateway, make_config, prepare, resource

PATH = "/records/customer-123"
BOB = Actor(id="op_bob", owner_id="op_bob", kind="operator", access_path="test")
HOST = Actor(id="host", owner_id="", kind="system", access_path="cli")


@pytest.fixture
def gw(server: ContractServer, data_dir: Path, open_gateway: Any) -> LocalGateway:
    config = make_config(server, data_dir, resource(server, "customer", PATH, require_passkey=True))
    gateway: LocalGateway = open_gateway(config)
    return gateway


@pytest.fixture
def key(gw: LocalGateway) -> SoftAuthenticator:
    return register(gw, OWNER)


def addition(authenticator: SoftAuthenticator, label: str = "laptop") -> Addition:
    """A registration made with ``authenticator``, verified as the passkeys page does."""
    challenge = secrets.token_bytes(32)
    registered = verify_registration(
        authenticator.register(challenge), challenge=challenge, rp_id=RP_ID, origin=ORIGIN
    )
    return Addition(registered, label, RP_ID, ORIGIN)


def enrolment_code(gw: LocalGateway, owner_id: str, *, replace: bool = False) -> str:
    """A code from the host for ``owner_id`` (an operator key the ledger holds)."""
    if gw.ledger.read(lambda tx: tx.credential(owner_id)) is None:
        gw.ledger.write(lambda tx: credential(tx, owner_id))
    return owner_passkeys.issue_enrolment(gw, HOST, owner_id, replace=replace).code


def register(gw: LocalGateway, actor: Actor) -> SoftAuthenticator:
    """Enrol ``actor``'s owner's first passkey: a code from the host, then the page."""
    authenticator = SoftAuthenticator()
    code = enrolment_code(gw, actor.owner_id)
    owner_passkeys.register(gw, actor, addition(authenticator), enrolment_code=code)
    return authenticator


def approval(
    gw: LocalGateway, by: SoftAuthenticator, act: Addition | str, owner: Actor = OWNER
) -> Approval:
    """``by``'s approval of adding ``act`` (an Addition) or revoking it (a passkey id)."""
    asked = owner_passkeys.act_challenge(gw, owner.owner_id, act)
    return Approval(by.approve(unb64(asked.challenge)), asked.expires_at_ms)


def revoke(gw: LocalGateway, by: SoftAuthenticator, passkey_id: str, actor: Actor = OWNER) -> None:
    owner_passkeys.revoke(gw, actor, passkey_id, approval(gw, by, passkey_id, actor))


def preview(gw: LocalGateway, job_id: str, operation: Operation = Operation.APPLY) -> Preview:
    made = gw.preview(OWNER, job_id, operation)
    assert made.token is not None and made.passkey_challenge is not None
    return made


def confirm(
    gw: LocalGateway, shown: Preview, assertion: str | None, actor: Actor = OWNER
) -> JobState:
    assert shown.token is not None
    return gw.confirm(actor, shown.job_id, shown.token, passkey_assertion=assertion).job.state


def approvals(gw: LocalGateway, job_id: str) -> int:
    return sum(1 for e in gw.ledger.events(job_id) if e.operation == "passkey_approved")


def refused(
    gw: LocalGateway, server: ContractServer, shown: Preview, assertion: str | None
) -> UndogateError:
    """Confirm, expect a refusal, and check nothing was sent or recorded."""
    with pytest.raises(UndogateError) as caught:
        confirm(gw, shown, assertion)
    assert server.attempt_count(PATH) == 0
    job = gw.ledger.load_job(shown.job_id)
    assert job is not None and job.state is JobState.PREPARED
    assert approvals(gw, shown.job_id) == 0
    return caught.value


def test_a_preview_of_a_resource_that_requires_a_passkey_carries_its_digest(
    gw: LocalGateway, server: ContractServer, key: SoftAuthenticator
) -> None:
    job_id = prepare(gw, status="vip")
    first, second = preview(gw, job_id), preview(gw, job_id)
    assert len(unb64(str(first.passkey_challenge))) == 32
    assert first.passkey_challenge != second.passkey_challenge  # another token, expiry


def test_without_an_assertion_the_confirm_is_refused(
    gw: LocalGateway, server: ContractServer, key: SoftAuthenticator
) -> None:
    shown = preview(gw, prepare(gw, status="vip"))
    assert isinstance(refused(gw, server, shown, None), PasskeyRequired)


def test_without_user_verification_nothing_is_written(
    gw: LocalGateway, server: ContractServer, key: SoftAuthenticator
) -> None:
    shown = preview(gw, prepare(gw, status="vip"))
    challenge = unb64(str(shown.passkey_challenge))
    error = refused(gw, server, shown, key.approve(challenge, verified=False))
    assert isinstance(error, PasskeyNotVerified) and "verif" in error.message


def test_an_assertion_from_another_origin_is_refused(
    gw: LocalGateway, server: ContractServer, key: SoftAuthenticator
) -> None:
    shown = preview(gw, prepare(gw, status="vip"))
    challenge = unb64(str(shown.passkey_challenge))
    evil = key.approve(challenge, origin="http://localhost.evil.example")
    assert isinstance(refused(gw, server, shown, evil), PasskeyNotVerified)


def test_the_assertion_of_one_preview_is_refused_for_another(
    gw: LocalGateway, server: ContractServer, key: SoftAuthenticator
) -> None:
    job_id = prepare(gw, status="vip")
    signed, other = preview(gw, job_id), preview(gw, job_id)
    assertion = key.approve(unb64(str(signed.passkey_challenge)))
    assert isinstance(refused(gw, server, other, assertion), PasskeyWrongPreview)


def test_an_approved_confirm_applies_and_a_replay_is_refused(
    gw: LocalGateway, server: ContractServer, key: SoftAuthenticator
) -> None:
    job_id = prepare(gw, status="vip")
    shown = preview(gw, job_id)
    assertion = key.approve(unb64(str(shown.passkey_challenge)))
    assert confirm(gw, shown, assertion) is JobState.APPLIED
    assert server.attempt_count(PATH) == 1 and approvals(gw, job_id) == 1
    with pytest.raises(PasskeyReplayed):
        confirm(gw, shown, assertion)
    undo = preview(gw, job_id, Operation.UNDO)
    with pytest.raises(PasskeyReplayed):  # the old approval never approves the undo
        confirm(gw, undo, assertion)
    with pytest.raises(PasskeyRequired):  # undo needs its own
        confirm(gw, undo, None)
    assert confirm(gw, undo, key.approve(unb64(str(undo.passkey_challenge)))) is JobState.UNDONE
    assert server.attempt_count(PATH) == 2


def test_a_sign_count_that_does_not_grow_is_refused(
    gw: LocalGateway, server: ContractServer, key: SoftAuthenticator
) -> None:
    first = preview(gw, prepare(gw, status="vip"))
    assert confirm(gw, first, key.approve(unb64(str(first.passkey_challenge))))
    key.sign_count = 0  # a cloned authenticator starts over
    shown = preview(gw, prepare(gw, status="churned"))
    with pytest.raises(PasskeyNotVerified, match="sign count"):
        confirm(gw, shown, key.approve(unb64(str(shown.passkey_challenge))))


def test_a_revoked_passkey_is_refused(
    gw: LocalGateway, server: ContractServer, key: SoftAuthenticator
) -> None:
    revoke(gw, key, next(p.id for p in gw.ledger.read(lambda tx: tx.passkeys(OWNER.owner_id))))
    shown = preview(gw, prepare(gw, status="vip"))
    assertion = key.approve(unb64(str(shown.passkey_challenge)))
    assert isinstance(refused(gw, server, shown, assertion), PasskeyRevoked)


def test_another_owners_passkey_is_refused(gw: LocalGateway, server: ContractServer) -> None:
    bobs = register(gw, BOB)
    shown = preview(gw, prepare(gw, status="vip"))
    assertion = bobs.approve(unb64(str(shown.passkey_challenge)))
    assert isinstance(refused(gw, server, shown, assertion), PasskeyUnknown)


def test_a_resource_without_the_requirement_needs_no_passkey(
    server: ContractServer, data_dir: Path, open_gateway: Any
) -> None:
    gateway: LocalGateway = open_gateway(make_config(server, data_dir))
    shown = gateway.preview(OWNER, prepare(gateway, status="vip"), Operation.APPLY)
    assert shown.passkey_challenge is None
    assert confirm(gateway, shown, None) is JobState.APPLIED


def test_server_wide_requirement(server: ContractServer, data_dir: Path, open_gateway: Any) -> None:
    gateway: LocalGateway = open_gateway(make_config(server, data_dir, require_passkey=True))
    shown = gateway.preview(OWNER, prepare(gateway, status="vip"), Operation.APPLY)
    assert shown.passkey_challenge is not None
    with pytest.raises(PasskeyRequired):
        confirm(gateway, shown, None)


def _approved_ledger(gw: LocalGateway, key: SoftAuthenticator) -> tuple[Path, str]:
    job_id = prepare(gw, status="vip")
    shown = preview(gw, job_id)
    confirm(gw, shown, key.approve(unb64(str(shown.passkey_challenge))))
    location = Path(gw.ledger.location)
    gw.ledger.close()
    return location, job_id


def test_ledger_verify_rechecks_every_approval(gw: LocalGateway, key: SoftAuthenticator) -> None:
    """An attacker who rewrites an approval and recomputes every link after it still
    fails: the signature does not cover the forged preview."""
    db, _ = _approved_ledger(gw, key)
    with open_chain(str(db)) as source:
        assert verify_ledger(source).ok
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("DROP TRIGGER events_append_only_update")
        rows = conn.execute(
            "SELECT id, prev_hash, job_id, at, actor, access_path, operation, target, "
            "from_state, to_state, detail FROM events ORDER BY id"
        ).fetchall()
        forged_id = next(r[0] for r in rows if r[6] == "passkey_approved")
        prev = None
        for r in rows:
            if r[0] < forged_id:
                continue
            detail = r[10]
            if r[0] == forged_id:
                found = json.loads(detail)
                found["preview"]["requests"][0]["url"] = "https://attacker.example/records/x"
                detail = json.dumps(found)
            row = ChainedRow(r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], detail)
            prev = prev or r[1]
            linked = row_hash(prev, row)
            conn.execute(
                "UPDATE events SET detail = ?, prev_hash = ?, hash = ? WHERE id = ?",
                (detail, prev, linked, r[0]),
            )
            prev = linked
    with open_chain(str(db)) as source:
        verdict = verify_ledger(source)
    assert verdict.bad_row == forged_id
    assert "digest is not its preview's" in verdict.reason


def test_a_receipt_carries_the_approval_and_its_passkey(
    gw: LocalGateway, key: SoftAuthenticator, tmp_path: Path
) -> None:
    db, job_id = _approved_ledger(gw, key)
    receipt = tmp_path / "r.json"
    assert cli("export-receipt", job_id, "--ledger", str(db), "-o", str(receipt)).returncode == 0
    bundle = json.loads(receipt.read_text())
    assert len(bundle["passkeys"]) == 1
    checked = cli("verify-receipt", str(receipt))
    assert checked.returncode == 0, checked.stdout
    registration = next(iter(bundle["passkeys"].values()))
    with open_chain(str(db)) as source:  # the hash printed is the ledger's own row
        in_ledger = {link.hash for link in source.links(from_id=0, to_id=registration["id"])}
    assert registration["hash"] in in_ledger
    assert f"registered by the row whose hash is {registration['hash']}" in checked.stdout

    def fails(change: Any) -> str:
        copy = json.loads(json.dumps(bundle))
        change(copy)
        receipt.write_text(json.dumps(copy))
        result = cli("verify-receipt", str(receipt))
        assert result.returncode == 1, result.stdout
        return result.stdout

    def other_key(b: Any) -> None:
        entry = next(iter(b["passkeys"].values()))
        detail = json.loads(entry["event"]["detail"])
        detail["public_key"] = detail["public_key"][:-4] + "AAAA"
        entry["event"]["detail"] = json.dumps(detail)

    def no_key(b: Any) -> None:
        b["passkeys"] = {}

    assert "passkey" in fails(other_key)
    assert "passkey no earlier event registered" in fails(no_key)


def test_a_restore_never_brings_back_a_revoked_passkey(
    gw: LocalGateway, key: SoftAuthenticator, data_dir: Path, tmp_path: Path
) -> None:
    from undogate.ledger import Ledger
    from undogate.ledger.backup import backup_ledger, restore_ledger

    backup_ledger(data_dir, tmp_path / "before-revoking.sqlite3", overwrite=False)
    revoked = next(p.id for p in gw.ledger.read(lambda tx: tx.passkeys(OWNER.owner_id)))
    revoke(gw, key, revoked)
    gw.ledger.close()
    assert restore_ledger(tmp_path / "before-revoking.sqlite3", data_dir).revocations_kept == 1
    ledger = Ledger.open(data_dir)
    try:
        found = ledger.read(lambda tx: tx.passkey(revoked))
    finally:
        ledger.close()
    assert found is not None and found.revoked_at is not None
    assert cli("ledger", "verify", str(data_dir)).returncode == 0


def test_accepting_the_observed_state_needs_the_passkey_too(
    gw: LocalGateway, server: ContractServer, key: SoftAuthenticator
) -> None:
    job_id = prepare(gw, status="vip")
    shown = preview(gw, job_id)
    server.arm("apply_then_500", PATH)
    assert confirm(gw, shown, key.approve(unb64(str(shown.passkey_challenge)))) is (
        JobState.NEEDS_REVIEW
    )
    accept = preview(gw, job_id, Operation.ACCEPT_OBSERVED)
    with pytest.raises(PasskeyRequired):
        confirm(gw, accept, None)
    approval = key.approve(unb64(str(accept.passkey_challenge)))
    assert confirm(gw, accept, approval) is JobState.APPLIED
    assert approvals(gw, job_id) == 2


def test_only_a_live_passkey_of_ones_own_can_be_revoked(
    gw: LocalGateway, key: SoftAuthenticator
) -> None:
    from undogate.errors import NotFound

    mine = next(p.id for p in gw.ledger.read(lambda tx: tx.passkeys(OWNER.owner_id)))
    with pytest.raises(NotFound):
        owner_passkeys.revoke(gw, BOB, mine, approval(gw, key, mine, BOB))
    revoke(gw, key, mine)
    with pytest.raises(NotFound):
        revoke(gw, key, mine)
    with pytest.raises(NotFound):
        revoke(gw, key, "no-such-passkey")


def test_a_passkey_is_registered_once(gw: LocalGateway, key: SoftAuthenticator) -> None:
    from undogate.errors import InvalidRequest

    code = enrolment_code(gw, BOB.owner_id)
    with pytest.raises(InvalidRequest, match="registered already"):
        owner_passkeys.register(gw, BOB, addition(key, "stolen"), enrolment_code=code)
    assert gw.ledger.read(lambda tx: tx.passkeys(BOB.owner_id)) == []
