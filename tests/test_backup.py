"""Online backup while gateways sharing the ledger keep writing, then restore."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.errors import InvalidRequest, LedgerInUse
from undogate.jobs import ChangeRequest, JobState, Operation, PrepareRequest
from undogate.ledger import Ledger
from undogate.ledger.backup import backup_ledger, restore_ledger
from undogate.net import PinnedClient

from .serving import cli
from .worlds import AGENT, OWNER, LocalGateway, make_config


def _apply_one(gw: LocalGateway, n: int, confirming: LocalGateway | None = None) -> str:
    """Prepare through ``gw``; preview and confirm through ``confirming`` (default: it)."""
    request = PrepareRequest(
        summary=f"job {n}",
        changes=(ChangeRequest(resource_id="customer", set={"notes": f"note {n}"}),),
    )
    job_id = gw.prepare(AGENT, "account-assistant", request).job.id
    confirming = confirming or gw
    token = confirming.preview(OWNER, job_id, Operation.APPLY).token
    assert token is not None
    assert confirming.confirm(OWNER, job_id, token).job.state is JobState.APPLIED
    return job_id


def test_a_backup_during_writes_restores_every_committed_receipt(
    server: ContractServer,
    data_dir: Path,
    tmp_path: Path,
    open_gateway: Callable[[Config], LocalGateway],
) -> None:
    # Two gateways on the one ledger (each with its connections and lease, as two
    # processes): each job is prepared through one and confirmed through the other.
    config = make_config(server, data_dir)
    gws = (open_gateway(config), open_gateway(config))
    committed: list[str] = []
    stop = threading.Event()
    failures: list[BaseException] = []

    def writer() -> None:
        n = 0
        try:
            while not stop.is_set():
                committed.append(_apply_one(gws[n % 2], n, gws[(n + 1) % 2]))
                n += 1
        except BaseException as exc:  # surfaced below
            failures.append(exc)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while len(committed) < 3 and time.monotonic() < deadline and not failures:
            time.sleep(0.01)
        before = list(committed)
        result = backup_ledger(data_dir, tmp_path / "backups" / "ledger.bak")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not failures, failures
    assert len(before) >= 3 and result.integrity == "ok"
    assert (result.path.stat().st_mode & 0o777) == 0o600
    assert not list(result.path.parent.glob(".*tmp*"))  # no temporary file left behind

    restored_dir = tmp_path / "restored"
    restored = restore_ledger(result.path, restored_dir)
    assert restored.set_aside is None and restored.ledger_id == result.ledger_id
    ledger = Ledger.open(restored_dir)
    try:
        assert ledger.pragma("integrity_check") == "ok"
        for job_id in before:
            job = ledger.load_job(job_id)
            assert job is not None and job.state is JobState.APPLIED
            ops = [e.operation for e in ledger.events(job_id)]
            assert ops[0] == "prepare" and ops[-1] == "finish_apply"
        with ledger.raw() as c:
            in_backup = {r[0] for r in c.execute("SELECT id FROM jobs")}
        assert set(before) <= in_backup
    finally:
        ledger.close()


def test_backup_refuses_to_overwrite_or_to_write_into_the_ledger_dir(
    server: ContractServer,
    data_dir: Path,
    tmp_path: Path,
    open_gateway: Callable[[Config], LocalGateway],
) -> None:
    open_gateway(make_config(server, data_dir))
    target = tmp_path / "b.sqlite3"
    backup_ledger(data_dir, target)
    with pytest.raises(InvalidRequest, match="exists"):
        backup_ledger(data_dir, target)
    with pytest.raises(InvalidRequest, match="outside"):
        backup_ledger(data_dir, data_dir / "copy.sqlite3")
    # Restoring over a ledger that a process owns is refused.
    with pytest.raises(LedgerInUse):
        restore_ledger(target, data_dir)


def test_restore_moves_the_current_ledger_aside(server: ContractServer, tmp_path: Path) -> None:
    first = tmp_path / "first"
    config = make_config(server, first)
    gw = LocalGateway(config=config, ledger=Ledger.open(first), http=PinnedClient())
    try:
        job_id = _apply_one(gw, 1)
        backup = backup_ledger(first, tmp_path / "b.sqlite3").path
    finally:
        gw.http.close()
        gw.ledger.close()
    second = tmp_path / "second"
    Ledger.open(second).close()
    aside = restore_ledger(backup, second).set_aside
    assert aside is not None and (aside / "ledger.sqlite3").exists()
    ledger = Ledger.open(second)  # the marker now names the restored ledger: not foreign
    try:
        assert ledger.load_job(job_id) is not None
    finally:
        ledger.close()


def test_the_backup_command_works_while_serving(served: dict[str, Any], tmp_path: Path) -> None:
    target = tmp_path / "online.bak"
    done = cli("backup", str(target), "--config", str(served["config"]), env=served["env"])
    assert done.returncode == 0, done.stderr
    assert "integrity ok" in done.stdout
    with sqlite3.connect(target) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert c.execute("SELECT COUNT(*) FROM credentials").fetchone()[0] == 2
    refused = cli("restore", str(target), "--config", str(served["config"]), env=served["env"])
    assert refused.returncode == 2 and "error [ledger_in_use]" in refused.stderr
    assert "stop every one of them first" in refused.stderr


def test_a_restore_never_brings_a_revoked_key_back(tmp_path: Path) -> None:
    from undogate.auth import Keyring
    from undogate.errors import Unauthorized

    data = tmp_path / "data"
    ledger = Ledger.open(data)
    keyring = Keyring(ledger)
    leaked = keyring.create_operator(label="leaked")
    ledger.close()
    backup = tmp_path / "backups" / "before-revocation.sqlite3"
    backup.parent.mkdir(mode=0o700)
    backup_ledger(data, backup)
    ledger = Ledger.open(data)
    Keyring(ledger).revoke(leaked.credential.id, force=True)
    ledger.close()

    restore_ledger(backup, data)
    ledger = Ledger.open(data)
    try:
        with pytest.raises(Unauthorized):
            Keyring(ledger).authenticate(leaked.key)
        with ledger.raw() as c:
            kept = c.execute(
                "SELECT COUNT(*) FROM events WHERE operation = 'revocation_kept_on_restore'"
            ).fetchone()[0]
        assert kept == 1
    finally:
        ledger.close()


@pytest.mark.parametrize("loss", ["deleted", "damaged"])
def test_a_restore_over_a_lost_ledger_says_its_revocations_could_not_be_kept(
    tmp_path: Path, loss: str
) -> None:
    from undogate.auth import Keyring

    data = tmp_path / "data"
    ledger = Ledger.open(data)
    leaked = Keyring(ledger).create_operator(label="leaked")
    ledger.close()
    backup = backup_ledger(data, tmp_path / "backups" / "b.sqlite3")
    ledger = Ledger.open(data)
    Keyring(ledger).revoke(leaked.credential.id, force=True)
    ledger.close()
    if loss == "deleted":
        (data / "ledger.sqlite3").unlink()
    else:
        with (data / "ledger.sqlite3").open("r+b") as f:
            f.write(b"\xff" * 100)

    restored = restore_ledger(backup.path, data)
    assert restored.revocations_kept == 0
    assert restored.revocations_unread is not None
    assert ("missing or empty" if loss == "deleted" else "cannot be read") in (
        restored.revocations_unread
    )
    ledger = Ledger.open(data)  # the marker names the restored ledger
    try:
        assert ledger.identity.ledger_id == backup.ledger_id == restored.ledger_id
        # What docs/operating.md warns about: with nothing to read, the key works again.
        assert Keyring(ledger).authenticate(leaked.key).credential_id == leaked.credential.id
    finally:
        ledger.close()


def test_restoring_a_backup_from_before_ids_gives_it_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Ledger.open(data).close()
    backup = backup_ledger(data, tmp_path / "old.sqlite3").path
    with sqlite3.connect(backup) as c:
        c.execute("DELETE FROM meta WHERE key = 'ledger_id'")

    restored = restore_ledger(backup, data)
    assert restored.ledger_id.startswith("ldg_")
    assert (data / "ledger.id").read_text().strip() == restored.ledger_id
    ledger = Ledger.open(data)
    try:
        assert ledger.identity.ledger_id == restored.ledger_id and not ledger.identity.adopted
    finally:
        ledger.close()


def test_two_restores_in_one_second_keep_both_replaced_ledgers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Ledger.open(data).close()
    backup = backup_ledger(data, tmp_path / "b.sqlite3").path
    first = restore_ledger(backup, data).set_aside
    second = restore_ledger(backup, data).set_aside
    assert first is not None and second is not None and first != second
    assert (first / "ledger.sqlite3").exists() and (second / "ledger.sqlite3").exists()
