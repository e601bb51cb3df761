"""The passkey step-up on a served gateway (``server.require_passkey``): the API
refuses a confirm without an assertion (``passkey_required``) and applies one with it;
the reviewer CLI shows the preview, cannot sign, points to the preview's page and never
downgrades to a typed answer; a passkey is registered through the review pages' own
form (a software authenticator plays the browser's part)."""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from undogate.contract_server import ContractServer

from .conftest import MASTER_KEY, SERVED_PATH, cli, resource, serve_log, serving
from .soft_authenticator import SoftAuthenticator, unb64
from .test_cli_review import Terminal


@pytest.fixture
def gateway(tmp_path: Path, server: ContractServer) -> Iterator[dict[str, Any]]:
    config = tmp_path / "undogate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": str(tmp_path / "data"), "require_passkey": True},
                "resources": [resource(server, "customer", SERVED_PATH)],
                "agents": [
                    {"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}
                ],
            }
        )
    )
    env = {**os.environ, "UNDOGATE_MASTER_KEY": MASTER_KEY}
    operator = cli("init", "--config", str(config), env=env).stdout.strip()
    owner = "op_" + operator[4:16]
    made = cli(
        "keys", "create-agent", "--agent", "account-assistant", "--owner", owner,
        "--config", str(config), env=env,
    )  # fmt: skip
    agent = made.stdout.splitlines()[0]
    with serving(config, env) as (url, proc):
        yield {
            "url": url,
            "operator": operator,
            "agent": agent,
            "env": {**env, "UNDOGATE_URL": url, "UNDOGATE_KEY": operator},
            "proc": proc,
            "data": tmp_path / "data",
        }


def _call(g: dict[str, Any], path: str, body: Any, key: str = "operator") -> httpx.Response:
    return httpx.post(
        g["url"] + path,
        json=body,
        headers={"Authorization": f"Bearer {g[key]}"},
        timeout=30,
        trust_env=False,
    )


def _prepare(g: dict[str, Any]) -> str:
    body = {"summary": "promote", "changes": [{"resource": "customer", "set": {"status": "vip"}}]}
    made = _call(g, "/api/v1/jobs", body, key="agent")
    assert made.status_code == 201, made.text
    return str(made.json()["job_id"])


def _register_through_the_page(g: dict[str, Any]) -> SoftAuthenticator:
    """Sign in, open /passkeys, answer its registration options, post the form."""
    with httpx.Client(
        base_url=g["url"], trust_env=False, timeout=30, follow_redirects=True
    ) as page:
        form = page.get("/signin").text
        token = re.search(r'name="csrf" value="([^"]+)"', form)
        assert token is not None
        page.post("/signin", data={"csrf": token.group(1), "key": g["operator"]})
        shown = page.get("/passkeys").text
        options = json.loads(html.unescape(re.findall(r'data-options="([^"]+)"', shown)[0]))
        csrf = re.findall(r'name="csrf" value="([^"]+)"', shown)[-1]
        issued = re.findall(r'name="issued" value="([^"]+)"', shown)[0]
        form = {"csrf": csrf, "issued": issued}
        too_long = page.post("/passkeys", data={**form, "label": "x" * 81})
        assert too_long.status_code == 400 and "at most 80 characters" in too_long.text
        for stale_issued in ("", "0", "x"):  # no page, or one made long ago
            stale = page.post(
                "/passkeys",
                data={**form, "issued": stale_issued, "label": "x", "credential": "{}"},
            )
            assert stale.status_code == 400 and "out of date" in stale.text
        authenticator = SoftAuthenticator(origin=g["url"], rp_id="127.0.0.1")
        credential = authenticator.register(unb64(options["challenge"]))
        # The challenge is the session's MAC of the page's time: another time is another
        # challenge, so the answer does not verify.
        moved = page.post(
            "/passkeys",
            data={**form, "issued": str(int(issued) - 1), "label": "ci", "credential": credential},
        )
        assert moved.status_code == 403 and "registration did not verify" in moved.text
        done = page.post("/passkeys", data={**form, "label": "ci", "credential": credential})
        assert "Passkey “ci” registered" in done.text, done.text
        again = page.post("/passkeys", data={**form, "label": "x", "credential": credential})
        assert again.status_code == 400  # a registration is kept once
        assert "registered already" in again.text
    return authenticator


def test_the_api_refuses_a_confirm_without_the_passkey(
    gateway: dict[str, Any], server: ContractServer
) -> None:
    job = _prepare(gateway)
    preview = _call(gateway, f"/api/v1/jobs/{job}/previews", {"operation": "apply"}).json()
    assert len(unb64(preview["passkey_challenge"])) == 32
    refused = _call(
        gateway, f"/api/v1/jobs/{job}/confirm", {"preview_token": preview["preview_token"]}
    )
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "passkey_required"
    garbage = _call(
        gateway,
        f"/api/v1/jobs/{job}/confirm",
        {"preview_token": preview["preview_token"], "passkey_assertion": {"id": "x"}},
    )
    assert garbage.status_code == 400 and garbage.json()["error"]["code"] == "invalid_request"
    not_an_object = _call(
        gateway,
        f"/api/v1/jobs/{job}/confirm",
        {"preview_token": preview["preview_token"], "passkey_assertion": "signed, honest"},
    )
    assert not_an_object.status_code == 400
    assert "PublicKeyCredential" in not_an_object.json()["error"]["message"]
    assert server.write_count(SERVED_PATH) == 0
    assert "passkey_required" in serve_log(gateway["proc"])


def test_the_api_applies_with_the_passkey_over_that_preview(
    gateway: dict[str, Any], server: ContractServer
) -> None:
    authenticator = _register_through_the_page(gateway)
    job = _prepare(gateway)
    preview = _call(gateway, f"/api/v1/jobs/{job}/previews", {"operation": "apply"}).json()
    assertion = json.loads(authenticator.approve(unb64(preview["passkey_challenge"])))
    body = {"preview_token": preview["preview_token"], "passkey_assertion": assertion}
    done = _call(gateway, f"/api/v1/jobs/{job}/confirm", body)
    assert done.status_code == 200, done.text
    assert done.json()["job"]["state"] == "applied"
    replayed = _call(gateway, f"/api/v1/jobs/{job}/confirm", body)
    assert replayed.status_code == 409
    assert replayed.json()["error"]["code"] == "passkey_replayed"
    assert server.write_count(SERVED_PATH) == 1
    verified = cli("ledger", "verify", str(gateway["data"]))
    assert verified.returncode == 0 and "ledger verified" in verified.stdout


def test_the_cli_points_to_the_preview_page_and_never_downgrades(
    gateway: dict[str, Any], server: ContractServer
) -> None:
    job = _prepare(gateway)
    term = Terminal(["apply", job], gateway["env"])
    term.read_until("needs your passkey")
    assert term.finish() == 1
    text = " ".join(term.text.split())
    assert f"{gateway['url']}/jobs/{job}" in text
    assert 'Type "apply"' not in text  # no typed answer stands in for the passkey
    assert server.write_count(SERVED_PATH) == 0
    assert gateway["operator"] not in term.text
