"""``undogate export`` (docs/operating.md, Audit export): events as JSON Lines and jobs as CSV,
through a server's API (``UNDOGATE_URL``) or directly on the ledger it shares; the same
content either way, a reviewer's reason in it, never a key, and never a resource's value
(the export spans owners; the events that record values give only the fields' names)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import httpx

from .serving import cli
from .test_cli_review import prepare, reviewer_env

BODY = (
    '{"summary": "=1+1 promote", '
    '"changes": [{"resource": "customer", "set": {"status": "vip-9f3e"}}]}'
)


def _export(since: str, to: Path, config: str, env: dict[str, str]) -> Any:
    return cli("export", "--since", since, "--to", str(to), "--config", config, env=env)


def _read(directory: Path) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    events = [json.loads(line) for line in (directory / "events.jsonl").read_text().splitlines()]
    with (directory / "jobs.csv").open(newline="") as f:
        jobs = list(csv.DictReader(f))
    return events, jobs


def _apply_then_undo(served: dict[str, Any], job: str) -> None:
    """Through the API as the job's owner: the ledger then holds the values in its
    prepare, apply_done and undo_done events."""
    auth = {"Authorization": f"Bearer {served['operator']}"}
    for operation, state in (("apply", "applied"), ("undo", "undone")):
        preview = httpx.post(
            f"{served['url']}/api/v1/jobs/{job}/previews",
            json={"operation": operation},
            headers=auth,
            timeout=30,
        )
        assert preview.status_code == 200, preview.text
        done = httpx.post(
            f"{served['url']}/api/v1/jobs/{job}/confirm",
            json={"preview_token": preview.json()["preview_token"]},
            headers=auth,
            timeout=30,
        )
        assert done.status_code == 200 and done.json()["job"]["state"] == state, done.text


def test_export_through_the_api_and_directly_says_the_same(
    served: dict[str, Any], tmp_path: Path
) -> None:
    _apply_then_undo(served, prepare(served, BODY))
    job = prepare(served, BODY)
    rejected = httpx.post(
        f"{served['url']}/api/v1/jobs/{job}/reject",
        json={"reason": '=HYPERLINK("x") not now'},
        headers={"Authorization": f"Bearer {served['operator']}"},
        timeout=30,
    )
    assert rejected.status_code == 200, rejected.text
    env = reviewer_env(served)
    config = str(served["config"])
    over_api = _export("1h", tmp_path / "a", config, env)
    assert over_api.returncode == 0, over_api.stderr
    assert "(through the API)" in over_api.stderr
    events, jobs = _read(tmp_path / "a")
    operations = [e["operation"] for e in events]
    assert "credential_create_agent" in operations and "reject" in operations
    reject = next(e for e in events if e["operation"] == "reject")
    assert reject["job_id"] == job and reject["detail"] == {"reason": '=HYPERLINK("x") not now'}
    assert reject["at"].endswith("+00:00") and reject["from_state"] == "prepared"
    assert [j["id"] for j in jobs][-1] == job and jobs[-1]["state"] == "rejected"
    assert jobs[-1]["agent_id"] == "account-assistant" and jobs[-1]["changes"] == "1"
    csv_text = (tmp_path / "a" / "jobs.csv").read_text()
    written = (tmp_path / "a" / "events.jsonl").read_text() + csv_text
    for secret in (served["operator"], served["agent"], "ugm_test-master-key", "Bearer"):
        assert str(secret)[:20] not in written
    recorded = [e for e in events if e["operation"] in ("prepare", "apply_done", "undo_done")]
    assert len(recorded) == 4  # two prepares, the apply and the undo record values
    assert all("status" in json.dumps(e["detail"]) for e in recorded)  # the field's name
    assert "vip-9f3e" not in written and '"lead"' not in written  # never a value
    assert jobs[-1]["summary"] == "'=1+1 promote"  # a spreadsheet shows it, never runs it
    again = _export("1h", tmp_path / "a", config, env)
    assert again.returncode == 2 and "exists: export into a new or empty folder" in again.stderr
    plain = cli("keys", "create-operator", "--config", config, env=env).stdout.splitlines()[0]
    refused = _export("1h", tmp_path / "b", config, {**env, "UNDOGATE_KEY": plain})
    assert refused.returncode == 2 and "error [forbidden]" in refused.stderr
    bad = _export("a while", tmp_path / "c", config, env)
    assert bad.returncode == 2 and "since must be a duration ago" in bad.stderr
    without_url = {k: v for k, v in env.items() if k != "UNDOGATE_URL"}
    direct = _export("1h", tmp_path / "d", config, without_url)  # beside the server
    assert direct.returncode == 0, direct.stderr
    assert "(directly on the ledger)" in direct.stderr
    events_d, jobs_d = _read(tmp_path / "d")
    assert events_d[: len(events)] == events and jobs_d == jobs
    with (tmp_path / "a" / "jobs.csv").open(newline="") as f:
        assert next(csv.reader(f))[-1] == "summary"
