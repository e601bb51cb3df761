"""Key administration while a server owns the ledger, with the operator's own key
(``keys:admin``), ``init``'s operator id, ``--owner``'s default, and the contract
server's route listing with ``init --example`` (issue 17, newcomer items 1 and 2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import yaml
from starlette.testclient import TestClient

from undogate.contract_server import ContractServer
from undogate.jsonvalue import loads

from .serving import SERVED_PATH, cli, serving
from .worlds import ApiWorld, resource


def _config(tmp_path: Path, server: ContractServer) -> Path:
    config = tmp_path / "undogate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": str(tmp_path / "data")},
                "resources": [resource(server, "customer", SERVED_PATH)],
                "agents": [
                    {"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}
                ],
            }
        )
    )
    return config


def _env() -> dict[str, str]:
    env = {**os.environ}
    for name in ("UNDOGATE_MASTER_KEY", "UNDOGATE_KEY", "UNDOGATE_URL"):
        env.pop(name, None)
    return env


def _keys(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return cli("keys", *args, "--config", str(config), env=env)


AGENT = ("create-agent", "--agent", "account-assistant")


def test_init_prints_the_operator_id_beside_its_key(tmp_path: Path, server: ContractServer) -> None:
    init = cli("init", "--config", str(_config(tmp_path, server)), env=_env())
    assert init.returncode == 0, init.stderr
    key = init.stdout.strip()
    assert key.startswith("ugo_")
    assert f"your first operator key, id op_{key[4:16]} " in init.stderr


def test_keys_while_serving_with_the_operator_key_from_init(
    tmp_path: Path, server: ContractServer
) -> None:
    config = _config(tmp_path, server)
    env = _env()
    operator = cli("init", "--config", str(config), env=env).stdout.strip()
    with serving(config, env) as (url, _):
        # Without a URL and key, directly on the ledger the server shares.
        bare = _keys(config, env, *AGENT)
        assert bare.returncode == 0, bare.stderr
        assert "(directly on the ledger)" in bare.stderr
        assert bare.stdout.splitlines()[0].startswith("uga_")
        asking = {**env, "UNDOGATE_URL": url, "UNDOGATE_KEY": operator}
        made = _keys(config, asking, *AGENT)
        assert made.returncode == 0, made.stderr
        assert "(through the API)" in made.stderr
        agent = made.stdout.splitlines()[0]
        assert agent.startswith("uga_")
        # --owner defaulted to the operator asking: the token prepares for that owner.
        shown = made.stdout.splitlines()[1:]  # the credential as a table, words not JSON
        assert shown[0].split()[:3] == ["id", "kind", "owner"] and "at_" in shown[1]
        made = _keys(config, asking, *AGENT, "--json")
        created = loads("\n".join(made.stdout.splitlines()[1:]))
        assert isinstance(created, dict) and isinstance(created["credential"], dict)
        assert created["credential"]["owner_id"] == f"op_{operator[4:16]}"
        who = httpx.get(f"{url}/api/v1/agent", headers={"Authorization": f"Bearer {agent}"})
        assert who.status_code == 200 and who.json()["agent"] == "account-assistant"
        listed = _keys(config, asking, "list")
        assert listed.returncode == 0, listed.stderr
        assert "keys:admin" in listed.stdout and agent[4:16] in listed.stdout
        # A new operator without keys:admin may not administer keys...
        plain = _keys(config, asking, "create-operator", "--label", "bob")
        assert plain.returncode == 0, plain.stderr
        bob = plain.stdout.splitlines()[0]
        refused = _keys(config, {**asking, "UNDOGATE_KEY": bob}, "list")
        assert refused.returncode == 2
        assert (
            "error [forbidden]: key administration needs the master key or an operator key "
            "with keys:admin" in refused.stderr
        )
        # ...and one with --admin may, and its revocations are attributed to it.
        admin = _keys(config, asking, "create-operator", "--admin")
        carol = admin.stdout.splitlines()[0]
        gone = _keys(config, {**asking, "UNDOGATE_KEY": carol}, "revoke", f"op_{bob[4:16]}")
        assert gone.returncode == 0, gone.stderr
        assert '"revoked":true' in gone.stdout


def test_owner_defaults_to_the_only_operator_directly(
    tmp_path: Path, server: ContractServer
) -> None:
    config = _config(tmp_path, server)
    env = _env()
    operator = cli("init", "--config", str(config), env=env).stdout.strip()
    made = _keys(config, env, *AGENT)
    assert made.returncode == 0, made.stderr
    credential = made.stdout.splitlines()[2].split()  # the table's row: id, kind, owner...
    assert credential[1:3] == ["agent", f"op_{operator[4:16]}"]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", made.stdout)  # a date, not epoch
    second = _keys(config, env, "create-operator", "--label", "bob")
    bob = second.stdout.splitlines()[0]
    ambiguous = _keys(config, env, *AGENT)
    assert ambiguous.returncode == 2
    assert "error [invalid_request]: name the owner (--owner op_...)" in ambiguous.stderr
    assert f"op_{operator[4:16]}" in ambiguous.stderr and f"op_{bob[4:16]}" in ambiguous.stderr


def test_master_key_without_owner_needs_exactly_one_operator(api_world: ApiWorld) -> None:
    """Over the API the master key has no owner of its own: the only operator, or name one."""
    master = {"Authorization": f"Bearer {api_world.keys['master']}"}
    body = {"kind": "agent", "agent": "account-assistant"}
    with TestClient(api_world.app) as client:
        several = client.post("/api/v1/admin/keys", json=body, headers=master)
        assert several.status_code == 400, several.text
        assert several.json()["error"]["code"] == "invalid_request"
        named = client.post(
            "/api/v1/admin/keys", json={**body, "owner": api_world.owner_id}, headers=master
        )
        assert named.status_code == 201, named.text
        escalate = client.post(
            "/api/v1/admin/keys",
            json={"kind": "operator", "scopes": ["keys:admin"]},
            headers={"Authorization": f"Bearer {api_world.keys['owner']}"},
        )
        assert escalate.status_code == 403, escalate.text


def test_contract_server_prints_its_routes_and_init_example_works_against_them(
    tmp_path: Path,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "undogate.cli", "contract-server", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    timer = threading.Timer(30, proc.kill)  # a server that never says it would hang here
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "undogate init --example" in line:
                break
    finally:
        timer.cancel()
        proc.terminate()
        proc.wait(timeout=15)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    head = lines[0]
    assert head.startswith("contract server listening on http://127.0.0.1:")
    base = head.split(" on ")[1].split(";")[0]
    routes = "".join(lines)
    assert f"GET, PATCH (JSON Patch, If-Match)  {base}/records/customer-123" in routes
    assert "GET, PUT (If-Match)" in routes and f"{base}/docs/notes.md" in routes
    assert f"{base}/collections/NAME" in routes and f"{base}/collections/NAME/ID" in routes
    assert "undogate init --example" in routes
    # The example config names exactly those paths on the default port: against a
    # contract server there (here: on a free port, the one thing changed), it works.
    config = tmp_path / "undogate.yaml"
    init = cli("init", "--example", "--config", str(config), env=_env())
    assert init.returncode == 0, init.stderr
    text = config.read_text()
    assert "http://127.0.0.1:8765/records/customer-123" in text
    assert "http://127.0.0.1:8765/docs/notes.md" in text
    elsewhere = tmp_path / "on-9876.yaml"  # --port: the contract server's --port
    assert cli("init", "--example", "--port", "9876", "--config", str(elsewhere)).returncode == 0
    assert elsewhere.read_text() == text.replace(":8765", ":9876").replace(
        "port 8765:", "port 9876:"
    )
    with ContractServer(None) as contract:
        config.write_text(text.replace("http://127.0.0.1:8765", contract.base_url))
        made = _keys(config, _env(), *AGENT)
        agent = made.stdout.splitlines()[0]
        with serving(config, _env()) as (url, _):
            auth = {"Authorization": f"Bearer {agent}"}
            prepared = httpx.post(
                f"{url}/api/v1/jobs",
                headers=auth,
                json={
                    "summary": "promote",
                    "changes": [
                        {"resource": "customer", "set": {"status": "customer"}},
                        {"resource": "account-notes", "text": "# Account notes\n\nrenewed\n"},
                    ],
                },
                timeout=30,
            )
            assert prepared.status_code == 201, prepared.text


def test_an_admin_key_holds_every_scope_and_agent_or_is_not_made(api_world: ApiWorld) -> None:
    """keys:admin can make any key, so a narrower admin key would only look narrower."""
    master = {"Authorization": f"Bearer {api_world.keys['master']}"}
    every = ["agents:read", "agents:write", "keys:admin"]
    with TestClient(api_world.app) as client:
        for narrower in (
            {"scopes": ["keys:admin"]},
            {"scopes": ["agents:read", "keys:admin"]},
            {"scopes": every, "agents": ["account-assistant"]},
        ):
            refused = client.post(
                "/api/v1/admin/keys", json={"kind": "operator", **narrower}, headers=master
            )
            assert refused.status_code == 400, (narrower, refused.text)
            assert "holds every scope and every agent" in refused.json()["error"]["message"]
        made = client.post(
            "/api/v1/admin/keys",
            json={"kind": "operator", "scopes": every, "label": "second admin"},
            headers=master,
        )
        assert made.status_code == 201, made.text
    created = [
        e
        for e in api_world.gateway.ledger.read(lambda tx: tx.events_since(0.0, 0, 1000))
        if e.operation == "credential_create_operator"
    ][-1]
    assert created.detail is not None
    assert created.detail["label"] == "second admin" and created.detail["agents"] is None
    assert created.detail["scopes"] == every
