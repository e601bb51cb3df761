"""``GET /metrics``: a real ``undogate serve`` scraped over HTTP, with real prepares and
confirms behind the figures; refused to agents; on a loopback bind of its own with
``--metrics-bind``."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from undogate.contract_server import ContractServer
from undogate.testing.launcher import Child, popen

from .processes import stop
from .serving import SERVE, SERVED_PATH, Samples, cli, free_port, samples, value, wait_healthy

BODY = '{"summary": "Promote", "changes": [{"resource": "customer", "set": {"status": "%s"}}]}'


def scrape(url: str, key: str | None = None) -> Samples:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    answer = httpx.get(f"{url}/metrics", headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=")
    return samples(answer.text)


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


def prepare(client: httpx.Client, agent: str, status: str) -> str:
    made = client.post("/api/v1/jobs", content=BODY % status, headers=_bearer(agent))
    assert made.status_code == 201, made.text
    return str(made.json()["job_id"])


def confirm(client: httpx.Client, operator: str, job_id: str, operation: str) -> str:
    preview = client.post(
        f"/api/v1/jobs/{job_id}/previews",
        content=f'{{"operation": "{operation}"}}',
        headers=_bearer(operator),
    )
    assert preview.status_code == 200, preview.text
    token = preview.json()["preview_token"]
    done = client.post(
        f"/api/v1/jobs/{job_id}/confirm",
        content=f'{{"preview_token": "{token}"}}',
        headers=_bearer(operator),
    )
    assert done.status_code == 200, done.text
    return str(done.json()["job"]["state"])


def test_the_counters_move_with_real_prepares_and_confirms(
    served: dict[str, object], server: ContractServer
) -> None:
    url, agent, operator = str(served["url"]), str(served["agent"]), str(served["operator"])
    before = scrape(url, operator)
    assert value(before, "undogate_prepares_total", outcome="prepared") == 0
    assert value(before, "undogate_processes") == 1
    with httpx.Client(base_url=url, timeout=30) as client:
        job_id = prepare(client, agent, "customer")
        # Refused by the prepare itself (a summary is required): counted by its code.
        refused = client.post(
            "/api/v1/jobs", content=BODY.replace("Promote", "") % "x", headers=_bearer(agent)
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "invalid_request"
        assert confirm(client, operator, job_id, "apply") == "applied"
        assert confirm(client, operator, job_id, "undo") == "undone"
        # A write the server applied, then answered 500: uncertain, its field quarantined.
        uncertain_job = prepare(client, agent, "churned")
        server.arm("apply_then_500", SERVED_PATH)
        assert confirm(client, operator, uncertain_job, "apply") == "needs_review"

    after = scrape(url, operator)
    assert value(after, "undogate_prepares_total", outcome="prepared") == 2
    assert value(after, "undogate_prepares_total", outcome="invalid_request") == 1
    assert value(after, "undogate_prepare_seconds_count") == 3
    assert value(after, "undogate_confirms_total", operation="apply", outcome="applied") == 1
    assert value(after, "undogate_confirms_total", operation="undo", outcome="undone") == 1
    assert value(after, "undogate_confirms_total", operation="apply", outcome="needs_review") == 1
    assert value(after, "undogate_confirm_seconds_count", operation="apply") == 2
    assert value(after, "undogate_confirm_seconds_count", operation="undo") == 1
    assert value(after, "undogate_uncertain_changes") == 1
    assert value(after, "undogate_quarantined_resources") == 1
    assert value(after, "undogate_writes_in_flight") == 0
    assert value(after, "undogate_webhook_outbox_pending") == 0


def test_metrics_need_an_operator_key_with_keys_admin_never_an_agent_token(
    served: dict[str, object],
) -> None:
    url, agent = str(served["url"]), str(served["agent"])
    env = dict(served["env"])  # type: ignore[call-overload]
    # A reviewer's key (agents:read and agents:write, no keys:admin), issued through
    # the running server with the master key.
    reviewer = cli(
        "keys", "create-operator", "--label", "reviewer", "--config", str(served["config"]),
        env=env,
    )  # fmt: skip
    assert reviewer.returncode == 0, reviewer.stderr
    reviewer_key = reviewer.stdout.splitlines()[0]
    assert reviewer_key.startswith("ugo_")
    for key, status in ((None, 401), (agent, 403), (reviewer_key, 403)):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        answer = httpx.get(f"{url}/metrics", headers=headers, timeout=10)
        assert answer.status_code == status, (key, answer.text)
        assert "undogate_prepares" not in answer.text


@contextmanager
def _serving(
    config: Path, *extra: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, Child]]:
    port = free_port()
    proc = popen(
        [*SERVE, "--config", str(config), "--port", str(port), *extra],
        env=env or dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        stop(proc)
        if proc.stderr:
            proc.stderr.close()


def test_the_metrics_bind_answers_the_scrape_alone_and_only_on_loopback(
    served: dict[str, object], tmp_path: Path
) -> None:
    config = Path(str(served["config"]))
    operator = str(served["operator"])
    stop(served["proc"])  # type: ignore[arg-type]  # the ledger has one owner: this one
    bind = free_port()
    with _serving(config, "--metrics-bind", f"127.0.0.1:{bind}") as (url, _):
        scraped = httpx.get(f"http://127.0.0.1:{bind}/metrics", timeout=10)
        assert scraped.status_code == 200
        assert value(samples(scraped.text), "undogate_processes") == 1
        for path in ("/api/v1/resources", "/healthz", "/jobs"):
            other = httpx.get(f"http://127.0.0.1:{bind}{path}", headers=_bearer(operator))
            assert other.status_code == 404, path
        # The API's own port still asks for a key.
        assert httpx.get(f"{url}/metrics", timeout=10).status_code == 401

    refused = cli(
        "serve", "--config", str(config), "--port", str(free_port()),
        "--metrics-bind", f"0.0.0.0:{free_port()}",
    )  # fmt: skip
    assert refused.returncode == 2
    assert "error [invalid_request]: --metrics-bind 0.0.0.0:" in refused.stderr
    assert "only on a loopback address" in refused.stderr
