"""A real gateway process for the crash harness (tests/test_crash_matrix.py).

Each run opens the ledger (taking ownership), runs start-up recovery, does one thing
and prints one JSON line. With ``UNDOGATE_CRASH_AT`` set, the engine kills this very
process with SIGKILL at that point.

    python -m tests.crash_worker CONFIG COMMAND [JOB_ID]
"""

from __future__ import annotations

import json
import sys

from undogate.config import load_config
from undogate.engine import Actor, Gateway, PrepareRequest, crash_point_from_env
from undogate.errors import UndogateError
from undogate.jobs import ChangeRequest, Operation
from undogate.ledger import Ledger
from undogate.net import RemoteHTTP

OWNER = Actor(id="op_alice", owner_id="op_alice", kind="operator", access_path="test")
AGENT = Actor(id="account-assistant", owner_id="op_alice", kind="agent", access_path="test")


def main(argv: list[str]) -> int:
    config = load_config(argv[1])
    command = argv[2]
    job_id = argv[3] if len(argv) > 3 else ""
    ledger = Ledger.open(config.server.data_dir)
    http = RemoteHTTP(request_timeout_s=config.server.request_timeout_s)
    gw = Gateway(config=config, ledger=ledger, http=http, crash_at=crash_point_from_env())
    out: dict[str, object] = {"recovered": gw.recover()}
    try:
        if command == "prepare":
            fields = json.loads(argv[3])
            changes = tuple(
                ChangeRequest(resource_id=rid, set=values) for rid, values in fields.items()
            )
            job = gw.prepare(AGENT, "account-assistant", PrepareRequest("crash test", changes)).job
            out["job"] = job.id
        elif command in ("apply", "undo", "accept"):
            op = {"apply": Operation.APPLY, "undo": Operation.UNDO}.get(
                command, Operation.ACCEPT_OBSERVED
            )
            preview = gw.preview(OWNER, job_id, op)
            out["observations"] = [
                v.observation.value if v.observation else None for v in preview.changes
            ]
            if preview.token is None:
                out["blockers"] = [b["code"] for b in preview.blockers]
            else:
                out["state"] = gw.confirm(OWNER, job_id, preview.token).job.state.value
        elif command == "preview-apply":
            preview = gw.preview(OWNER, job_id, Operation.APPLY)
            out["token"] = preview.token is not None
        elif command != "inspect":
            raise SystemExit(f"unknown command {command}")
        if job_id:
            job = gw.get_job(OWNER.owner_id, job_id)
            out["state"] = job.state.value
            out["changes"] = [c.state.value for c in job.changes]
            out["actions"] = [
                [a.change_index, a.operation.value, a.status.value] for a in job.actions
            ]
        with ledger.raw() as c:
            out["integrity"] = c.execute("PRAGMA integrity_check").fetchone()[0]
            out["events"] = c.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    except UndogateError as exc:
        out["error"] = exc.code
    finally:
        http.close()
        ledger.close()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
