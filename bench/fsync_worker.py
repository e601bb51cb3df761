"""Run under ``strace -c`` by bench/fsyncs.py: N single-change jobs, with or without
their confirm, so the difference counts the fsyncs that confirming costs."""

from __future__ import annotations

import sys
from pathlib import Path

from undogate.config import parse_config
from undogate.jobs import Actor, ChangeRequest, Operation, PrepareRequest
from undogate.ledger import Ledger
from undogate.net import PinnedClient
from undogate.operations.confirm import confirm_preview
from undogate.operations.context import Context
from undogate.operations.prepare import prepare_job
from undogate.operations.preview import preview_job
from undogate.operations.recovery import recover

from .common import UNTHROTTLED

OWNER = Actor(id="bench", owner_id="bench", kind="operator", access_path="bench")
AGENT = Actor(id="a", owner_id="bench", kind="agent", access_path="bench")


def main(base: str, data_dir: str, count: int, confirm: bool) -> None:
    config = parse_config(
        {
            "server": {"data_dir": data_dir},
            "limits": UNTHROTTLED,
            "resources": [
                {
                    "id": "r",
                    "agent_id": "a",
                    "name": "r",
                    "kind": "json_record",
                    "url": f"{base}/records/customer-123",
                    "fields": ["status"],
                    "conditional_writes": True,
                    "allow_loopback_http": True,
                }
            ],
            "agents": [{"id": "a", "tools": ["prepare_changes"]}],
        }
    )
    ledger = Ledger.open(Path(data_dir))
    gw = Context(config=config, ledger=ledger, http=PinnedClient())
    recover(ledger, config)
    for n in range(count):
        req = PrepareRequest("fsync", (ChangeRequest(resource_id="r", set={"status": f"v{n}"}),))
        job = prepare_job(gw, AGENT, "a", req).job
        token = preview_job(gw, OWNER, job, Operation.APPLY).token
        assert token
        if confirm:
            done = confirm_preview(gw, OWNER, gw.get_job(OWNER.owner_id, job.id), token)
            assert done.job.state.value == "applied"
    gw.http.close()
    ledger.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "confirm")
