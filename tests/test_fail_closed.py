"""A full disk on a real tmpfs: a write that landed is never lost (issue 13).

The ledger lives on a small tmpfs. The write is held at the contract server after its
intent committed, the disk is filled, then the write lands and its outcome cannot be
recorded. The gateway must say so clearly, hold the fields like a quarantine meanwhile,
and, once the disk has room, settle the write as uncertain in the live process.
"""

from __future__ import annotations

import errno
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from undogate.contract_server import ContractServer
from undogate.errors import Quarantined
from undogate.jobs import ActionStatus, Actor, ChangeState, JobState, Observation, Operation

from .worlds import ApiWorld

PATH = "/records/customer-123"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(disk)], check=True
    )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture
def data_dir(small_disk: Path) -> Path:
    """The shared fixtures' ledger directory, on the small disk."""
    return small_disk / "data"


def fill(disk: Path) -> Path:
    """Write a file until the disk refuses another byte."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (1 << 16, 1 << 12, 1 << 9, 1):
            while True:
                try:
                    os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return filler


def auth(world: Any, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.keys[who]}", "Content-Type": "application/json"}


def prepare(client: TestClient, world: Any, status: str) -> Any:
    body = '{"summary": "s", "changes": [{"resource": "customer", "set": {"status": "%s"}}]}'
    return client.post("/api/v1/jobs", content=body % status, headers=auth(world, "agent"))


def test_a_landed_write_whose_outcome_cannot_be_recorded_fails_closed(
    api_world: ApiWorld, server: ContractServer, small_disk: Path
) -> None:
    gw = api_world.gateway
    me = Actor(api_world.owner_id, api_world.owner_id, "operator", "test")
    with TestClient(api_world.app) as client:
        first = prepare(client, api_world, "customer").json()["job_id"]
        second = prepare(client, api_world, "vip").json()["job_id"]
        preview = client.post(
            f"/api/v1/jobs/{first}/previews",
            json={"operation": "apply"},
            headers=auth(api_world, "owner"),
        )
        token = preview.json()["preview_token"]
        gate = server.hold_next_write(PATH)
        answers: list[Any] = []
        confirm = threading.Thread(
            target=lambda: answers.append(
                client.post(
                    f"/api/v1/jobs/{first}/confirm",
                    json={"preview_token": token},
                    headers=auth(api_world, "owner"),
                )
            ),
            daemon=True,
        )
        confirm.start()
        try:
            assert gate.arrived.wait(10), "the write never reached the server"
            filler = fill(small_disk)
        finally:
            gate.release()
            confirm.join(20)
        # The endpoint took the write ...
        assert server.get_record(PATH)["status"] == "customer"
        # ... and the reviewer is told exactly that, in the error shape, never a bare 500.
        (answer,) = answers
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error["code"] == "ledger_error"
        assert "was sent" in error["message"] and "uncertain" in error["message"]
        assert error["details"]["job"] == first

        # While the disk is full nothing moves: a preview (it would pass a write still
        # marked in flight) and a prepare are refused with the same clear code.
        blocked = client.post(
            f"/api/v1/jobs/{second}/previews",
            json={"operation": "apply"},
            headers=auth(api_world, "owner"),
        )
        assert blocked.status_code == 503, blocked.text
        assert blocked.json()["error"]["code"] == "ledger_error"
        refused = prepare(client, api_world, "gold")
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "ledger_error"

        # Room again: the live process (no restart) settles the write as uncertain.
        filler.unlink()
        receipt = client.get(f"/api/v1/jobs/{first}", headers=auth(api_world, "owner"))
        assert receipt.status_code == 200, receipt.text
        job = gw.get_job(me.owner_id, first)
        assert job.state is JobState.NEEDS_REVIEW
        assert job.changes[0].state is ChangeState.UNCERTAIN
        assert [a.status for a in job.actions] == [ActionStatus.UNCERTAIN]
        with pytest.raises(Quarantined) as quarantined:
            gw.preview(me, second, Operation.APPLY)
        assert "uncertain" in quarantined.value.message
        # A reviewer reconciles it as usual: it looks applied, and was.
        observed = gw.preview(me, first, Operation.ACCEPT_OBSERVED)
        assert observed.changes[0].observation is Observation.LOOKS_APPLIED
        assert observed.token is not None
        assert gw.confirm(me, first, observed.token).job.state is JobState.APPLIED
