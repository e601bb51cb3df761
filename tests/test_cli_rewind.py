"""``undogate rewind`` and ``undogate agents stop|resume`` against a served gateway: the
plan shown as one table, confirmed by typing ``rewind``, refused without a terminal."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx

from undogate.contract_server import ContractServer
from undogate.testing.launcher import run

from .serving import SERVED_PATH
from .test_cli_review import Terminal, reviewer_env

JOB = '{{"summary": "s", "changes": [{{"resource": "customer", "set": {{"status": "{}"}}}}]}}'


def applied(served: dict[str, Any], status: str) -> str:
    auth = {"Authorization": f"Bearer {served['agent']}", "Content-Type": "application/json"}
    made = httpx.post(
        f"{served['url']}/api/v1/jobs", content=JOB.format(status), headers=auth, timeout=30
    )
    assert made.status_code == 201, made.text
    job_id = str(made.json()["job_id"])
    operator = {"Authorization": f"Bearer {served['operator']}"}
    base = f"{served['url']}/api/v1/jobs/{job_id}"
    token = httpx.post(
        base + "/previews", json={"operation": "apply"}, headers=operator, timeout=30
    ).json()["preview_token"]
    done = httpx.post(
        base + "/confirm", json={"preview_token": token}, headers=operator, timeout=30
    )
    assert done.status_code == 200, done.text
    return job_id


def cli_run(served: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "undogate.cli", *args], env=reviewer_env(served))


def test_rewind_shows_the_plan_and_runs_once_rewind_is_typed(
    served: dict[str, Any], server: ContractServer
) -> None:
    start = server.get_record(SERVED_PATH)
    first = applied(served, "customer")
    second = applied(served, "vip")
    refused = cli_run(served, "rewind", "--agent", "account-assistant", "--since", "1h")
    assert refused.returncode == 2 and "interactive terminal" in refused.stdout + refused.stderr
    term = Terminal(
        ["rewind", "--agent", "account-assistant", "--since", "1h"], reviewer_env(served)
    )
    shown = term.read_until('Type "rewind"')
    assert second in shown and first in shown and "undo" in shown
    assert "PATCH http://127.0.0.1" in shown
    assert server.get_record(SERVED_PATH)["status"] == "vip"  # nothing sent yet
    term.send("rewind")
    assert term.finish() == 0, term.text
    assert "rewound: 2 job(s) undone" in term.text
    assert server.get_record(SERVED_PATH) == start


def test_agents_stop_and_resume(served: dict[str, Any]) -> None:
    stopped = cli_run(served, "agents", "stop", "account-assistant")
    assert stopped.returncode == 0, stopped.stderr
    assert "account-assistant is stopped" in stopped.stdout
    auth = {"Authorization": f"Bearer {served['agent']}", "Content-Type": "application/json"}
    refused = httpx.post(
        f"{served['url']}/api/v1/jobs", content=JOB.format("x"), headers=auth, timeout=30
    )
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "agent_stopped"
    resumed = cli_run(served, "agents", "resume", "account-assistant")
    assert resumed.returncode == 0 and "runs" in resumed.stdout
