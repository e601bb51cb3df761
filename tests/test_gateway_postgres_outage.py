"""A served gateway whose PostgreSQL stops (``pg_ctl stop -m immediate``) and starts
again: a write sent while the database was away, whose outcome could not be committed,
is settled by the process's own loop as soon as the ledger answers (``needs_review``,
announced), with no request to that process; and the first request after the database
is back is served (docs/scaling.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from undogate.contract_server import ContractServer

from .postgres import PostgresCluster, start_cluster
from .serving import serve_log, serving
from .test_webhooks_served import PATH, WebhookWorld
from .webhook_receiver import Receiver, new_secret

# The gateway's own loop tries every second and its pool reconnects about every second;
# psycopg_pool's backoff alone left it waiting 8 to 32 s after a restart like this one.
SETTLED_WITHIN_S = 8.0


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    own = start_cluster()  # its own: this test stops it
    try:
        yield own
    finally:
        own.stop()


def test_a_write_whose_outcome_was_lost_with_the_database_is_settled_when_it_returns(
    tmp_path: Path, server: ContractServer, cluster: PostgresCluster
) -> None:
    receiver = Receiver(new_secret()).start()
    try:
        gw = WebhookWorld(tmp_path, server, receiver, ledger=cluster.fresh_database())
        # A long lease: the sweep of expired leases runs only every 100 s, so only the
        # confirm that left the write unsettled can have woken the loop that settles it.
        config = yaml.safe_load(gw.config.read_text())
        config["server"]["lease_s"] = 300
        gw.config.write_text(yaml.safe_dump(config))
        auth = {"Authorization": f"Bearer {gw.operator}"}
        with serving(gw.config, gw.env) as (url, proc):
            job_id = gw.prepare(url)
            receiver.wait_for(1)
            preview = httpx.post(
                f"{url}/api/v1/jobs/{job_id}/previews", json={"operation": "apply"}, headers=auth
            )
            assert preview.status_code == 200, preview.text
            gate = server.hold_next_write(PATH)
            answers: list[httpx.Response] = []
            confirming = threading.Thread(
                target=lambda: answers.append(
                    httpx.post(
                        f"{url}/api/v1/jobs/{job_id}/confirm",
                        json={"preview_token": preview.json()["preview_token"]},
                        headers=auth,
                        timeout=120,
                    )
                )
            )
            confirming.start()
            assert gate.arrived.wait(30)  # its intent is committed; the write is held
            cluster.pg_ctl("stop", "-m", "immediate")
            gate.release()  # the write lands; its outcome cannot be committed
            confirming.join(120)
            [answer] = answers
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"]["code"] == "ledger_error"
            assert "was sent, but the ledger could not record its outcome" in answer.text
            assert server.write_count(PATH) == 1

            cluster.pg_ctl("start")
            started = time.monotonic()
            # No request reaches the gateway: its own loop settles the write.
            bodies = receiver.wait_for(2, timeout=60)
            settled_after = time.monotonic() - started
            assert [b["type"] for b in bodies] == ["job.prepared", "job.needs_review"]
            assert bodies[1]["data"]["job_id"] == job_id
            assert settled_after < SETTLED_WITHIN_S, settled_after

            job = httpx.get(f"{url}/api/v1/jobs/{job_id}", headers=auth, timeout=30)
            assert job.status_code == 200, job.text
            assert job.json()["state"] == "needs_review"
            assert [a["status"] for a in job.json()["actions"]] == ["uncertain"]
            log = serve_log(proc)
        assert "settled interrupted work: 1 write(s) now uncertain" in log
    finally:
        receiver.stop()
