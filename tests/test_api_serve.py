"""The real thing: ``undogate init``, ``keys`` and ``serve`` as subprocesses, then a full
apply/undo over HTTP against the contract server."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from undogate.contract_server import ContractServer
from undogate.jsonvalue import JsonNumber, loads

from .serving import cli, serve_log, serving
from .worlds import MASTER_KEY, UNSET_TOKEN_ENV, resource

PATH = "/records/customer-123"
BIG = "123456789012345678901234567890.000000000000000000001"


def _post(client: httpx.Client, path: str, key: str, body: str) -> httpx.Response:
    return client.post(
        path,
        content=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )


def test_full_apply_and_undo_over_http_against_a_served_gateway(
    served: dict[str, object], server: ContractServer
) -> None:
    start = server.get_record(PATH)
    agent, operator = str(served["agent"]), str(served["operator"])
    with httpx.Client(base_url=str(served["url"]), timeout=30) as client:
        listed = client.get("/api/v1/resources", headers={"Authorization": f"Bearer {agent}"})
        assert listed.status_code == 200
        assert "url" not in listed.text and "127.0.0.1" not in listed.text
        body = (
            '{"summary": "Promote", "changes": [{"resource": "customer", '
            f'"set": {{"status": "customer", "balance": {BIG}}}, "assertion_kind": "observed"}}]}}'
        )
        prepared = _post(client, "/api/v1/jobs", agent, body)
        assert prepared.status_code == 201, prepared.text
        job_id = prepared.json()["job_id"]
        assert prepared.json()["review_path"] == f"/jobs/{job_id}"
        # An agent token cannot review its own job.
        assert (
            _post(
                client, f"/api/v1/jobs/{job_id}/previews", agent, '{"operation":"apply"}'
            ).status_code
            == 403
        )

        preview = _post(
            client, f"/api/v1/jobs/{job_id}/previews", operator, '{"operation":"apply"}'
        )
        assert preview.status_code == 200, preview.text
        assert preview.headers["cache-control"] == "no-store"
        token = preview.json()["preview_token"]
        # The preview shows the big number exactly (lossless on the way in and out).
        assert BIG in preview.text
        confirmed = _post(
            client, f"/api/v1/jobs/{job_id}/confirm", operator, f'{{"preview_token": "{token}"}}'
        )
        assert confirmed.status_code == 200, confirmed.text
        assert confirmed.json()["job"]["state"] == "applied"
        record = server.get_record(PATH)
        assert record["status"] == "customer"
        assert record["balance"] == JsonNumber(BIG)
        assert BIG.encode() in server.raw_bytes(PATH)

        undo = _post(client, f"/api/v1/jobs/{job_id}/previews", operator, '{"operation":"undo"}')
        assert undo.status_code == 200, undo.text
        undone = _post(
            client,
            f"/api/v1/jobs/{job_id}/confirm",
            operator,
            f'{{"preview_token": "{undo.json()["preview_token"]}"}}',
        )
        assert undone.status_code == 200, undone.text
        assert undone.json()["job"]["state"] == "undone"
        assert server.get_record(PATH) == start

        events = client.get(
            f"/api/v1/jobs/{job_id}/events", headers={"Authorization": f"Bearer {operator}"}
        )
        shown: Any = loads(events.content)
        ops = [e["operation"] for e in shown["events"]]
        assert ops[0] == "prepare" and "confirm_apply" in ops and ops[-1] == "finish_undo"
        # The master key administers keys but cannot read the owner's job.
        master = {"Authorization": f"Bearer {MASTER_KEY}"}
        assert client.get(f"/api/v1/jobs/{job_id}", headers=master).status_code == 403


def test_keys_go_through_the_api_or_directly_beside_a_running_server(
    served: dict[str, object],
) -> None:
    env = dict(served["env"])  # type: ignore[call-overload]
    listed = cli("keys", "list", "--config", str(served["config"]), env=env)
    assert listed.returncode == 0, listed.stderr
    assert "through the API" in listed.stderr
    assert str(served["owner"]) in listed.stdout
    assert str(served["operator"]) not in listed.stdout  # never the key itself
    # Without a key for the API, directly on the ledger the server shares.
    env.pop("UNDOGATE_MASTER_KEY")
    direct = cli("keys", "list", "--config", str(served["config"]), env=env)
    assert direct.returncode == 0, direct.stderr
    assert "directly on the ledger" in direct.stderr
    assert direct.stdout == listed.stdout
    # A second server on the same data dir shares the ledger too.
    with serving(Path(str(served["config"])), env) as (url, second):
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
        assert "opened beside the processes serving it" in serve_log(second)


# -- issue 17 item 4: the operator is told (refusals logged, missing tokens, a used port) --


def _served_with_unset_token(tmp_path: Path, server: ContractServer) -> tuple[Path, dict[str, str]]:
    config = tmp_path / "undogate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": str(tmp_path / "data")},
                "resources": [resource(server, "customer", PATH, token_env=UNSET_TOKEN_ENV)],
                "agents": [
                    {"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}
                ],
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if k != UNSET_TOKEN_ENV}
    env["UNDOGATE_MASTER_KEY"] = MASTER_KEY
    return config, env


async def _mcp_prepare(url: str, agent: str) -> str:
    """A prepare_changes call over /mcp with the SDK's client; the refusal's text."""
    headers = {"Authorization": f"Bearer {agent}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http_client:
        stream = streamable_http_client(f"{url}/mcp", http_client=http_client)
        async with Client(stream) as client:
            changes = [{"resource": "customer", "set": {"status": "x"}}]
            result = await client.call_tool("prepare_changes", {"summary": "s", "changes": changes})
    assert result.is_error
    return str(getattr(result.content[0], "text", ""))


def test_refusals_and_missing_tokens_reach_the_operator_log(
    tmp_path: Path, server: ContractServer
) -> None:
    config, env = _served_with_unset_token(tmp_path, server)
    operator = cli("init", "--config", str(config), env=env).stdout.strip()
    owner = "op_" + operator[4:16]
    made = cli(
        "keys", "create-agent", "--agent", "account-assistant", "--owner", owner,
        "--config", str(config), env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    agent = made.stdout.splitlines()[0]
    with serving(config, env) as (url, proc):
        with httpx.Client(base_url=url, timeout=30) as client:
            body = '{"summary": "s", "changes": [{"resource": "customer", "set": {"status": "x"}}]}'
            missing = _post(client, "/api/v1/jobs", agent, body)
            assert missing.json()["error"]["code"] == "missing_token", missing.text
            forbidden = client.get(
                "/api/v1/jobs?agent=account-assistant",
                headers={"Authorization": f"Bearer {agent}"},
            )
            assert forbidden.status_code == 403, forbidden.text
        over_mcp = anyio.run(_mcp_prepare, url, agent)
        assert over_mcp.startswith("Error executing tool prepare_changes: missing_token"), over_mcp
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        log = serve_log(proc)
    # Start-up names the resource and the variable, never a value.
    assert f"resource customer: its token variable {UNSET_TOKEN_ENV} is not set" in log
    assert log.index(UNSET_TOKEN_ENV) < log.index("undogate serving")
    # Each refusal is one line with its code; never a key or a record's value.
    assert log.count("refused [missing_token] on POST /api/v1/jobs") == 1
    assert log.count("refused [forbidden] on GET /api/v1/jobs") == 1
    assert log.count("refused [missing_token] on MCP prepare_changes") == 1
    assert agent not in log and operator not in log and '"lead"' not in log


def test_serve_on_a_port_in_use_fails_before_it_says_serving(
    tmp_path: Path, server: ContractServer
) -> None:
    config, env = _served_with_unset_token(tmp_path, server)
    assert cli("init", "--config", str(config), env=env).returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        second = cli("serve", "--config", str(config), "--port", str(port), env=env)
    assert second.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in second.stderr
    assert "serving" not in second.stderr + second.stdout
