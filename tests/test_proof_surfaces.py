"""The passkey step-up on a served gateway (``server.require_passkey``): the API
refuses a confirm without an assertion (``passkey_required``) and applies one with it;
the reviewer CLI shows the preview, cannot sign, points to the preview's page and never
downgrades to a typed answer; a passkey is enrolled through the review pages' own form
with a one-time code ``undogate passkeys enrol`` prints on the host while the server
runs (an operator key cannot make one), and another is added or one revoked only with
a live one's approval (a software authenticator plays the browser's part)."""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from undogate.contract_server import ContractServer

from .serving import SERVED_PATH, cli, serve_log, serving
from .soft_authenticator import SoftAuthenticator, b64, unb64
from .test_cli_review import Terminal
from .worlds import MASTER_KEY, resource


def _config(tmp_path: Path, server: ContractServer) -> Path:
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
    return config


@pytest.fixture
def gateway(tmp_path: Path, server: ContractServer) -> Iterator[dict[str, Any]]:
    config = _config(tmp_path, server)
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
            "config": config,
            "owner": owner,
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


@contextmanager
def _signed_in(g: dict[str, Any]) -> Iterator[httpx.Client]:
    """A browser's session on the review pages, signed in with the operator key, at
    ``localhost`` (a passkey's site is a domain name: at an IP address the passkeys page
    offers no registration, only the address that works)."""
    with httpx.Client(
        base_url=g["url"].replace("127.0.0.1", "localhost"),
        trust_env=False,
        timeout=30,
        follow_redirects=True,
    ) as page:
        form = page.get("/signin").text
        token = re.search(r'name="csrf" value="([^"]+)"', form)
        assert token is not None
        page.post("/signin", data={"csrf": token.group(1), "key": g["operator"]})
        yield page


def _form(page: httpx.Client, path: str, action: str) -> tuple[dict[str, str], str]:
    """The hidden fields of the form that posts to ``action`` on ``path``, and the page."""
    shown = page.get(path).text
    found = re.search(rf'<form method="post" action="{re.escape(action)}"(.*?)</form>', shown, re.S)
    assert found is not None, shown
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', found.group(1)))
    return {k: html.unescape(v) for k, v in fields.items()}, shown


def _options(text: str, attribute: str = "data-options") -> dict[str, Any]:
    found = re.findall(rf'{attribute}="([^"]+)"', text)
    assert found, text
    options: dict[str, Any] = json.loads(html.unescape(found[0]))
    return options


def _enrol(g: dict[str, Any], *, replace: bool = False) -> str:
    """``undogate passkeys enrol`` on the host while the server runs: through its API,
    with the master key (the fixture's environment), never the operator key."""
    env = {k: v for k, v in g["env"].items() if k != "UNDOGATE_KEY"}
    more = ["--replace"] if replace else []
    made = cli("passkeys", "enrol", "--config", str(g["config"]), *more, env=env)
    assert made.returncode == 0, made.stderr
    assert f"enrolment code for {g['owner']}, once, until" in made.stderr
    return made.stdout.strip()


def _register_through_the_page(g: dict[str, Any]) -> SoftAuthenticator:
    """Sign in, open /passkeys, answer its registration options, post the form: refused
    without an enrolment code, kept with the code from the host."""
    with _signed_in(g) as page:
        form, shown = _form(page, "/passkeys", "/passkeys")
        assert "Enrol your first passkey" in shown and 'name="enrolment_code"' in shown
        options = _options(shown)
        too_long = page.post("/passkeys", data={**form, "label": "x" * 81})
        assert too_long.status_code == 400 and "at most 80 characters" in too_long.text
        for stale_issued in ("", "0", "x"):  # no page, or one made long ago
            stale = page.post(
                "/passkeys",
                data={**form, "issued": stale_issued, "label": "x", "credential": "{}"},
            )
            assert stale.status_code == 400 and "out of date" in stale.text
        authenticator = SoftAuthenticator(
            origin=g["url"].replace("127.0.0.1", "localhost"), rp_id="localhost"
        )
        credential = authenticator.register(unb64(options["challenge"]))
        # The challenge is the session's MAC of the page's time: another time is another
        # challenge, so the answer does not verify.
        moved = page.post(
            "/passkeys",
            data={
                **form,
                "issued": str(int(form["issued"]) - 1),
                "label": "ci",
                "credential": credential,
            },
        )
        assert moved.status_code == 403 and "registration did not verify" in moved.text
        # The operator key alone: no code, and none it can make.
        alone = page.post("/passkeys", data={**form, "label": "ci", "credential": credential})
        assert alone.status_code == 403 and "enrolment_code_required" in alone.text
        minted = _call(g, "/api/v1/admin/passkey-enrolments", {})
        assert minted.status_code == 403 and minted.json()["error"]["code"] == "forbidden"
        guessed = {**form, "label": "ci", "credential": credential, "enrolment_code": "AAAA-BBBB"}
        assert "enrolment_code_unknown" in page.post("/passkeys", data=guessed).text
        code = _enrol(g)
        done = page.post("/passkeys", data={**guessed, "enrolment_code": code})
        assert "Passkey “ci” registered" in done.text, done.text
        assert "Add another passkey" in done.text  # no code asked any more
        again = page.post("/passkeys", data={**guessed, "enrolment_code": code})
        assert again.status_code == 400  # a registration is kept once
        assert "registered already" in again.text
    return authenticator


def test_another_passkey_and_a_revocation_need_a_live_ones_approval(
    gateway: dict[str, Any],
) -> None:
    first = _register_through_the_page(gateway)
    with _signed_in(gateway) as page:
        form, shown = _form(page, "/passkeys", "/passkeys/add")
        phone = SoftAuthenticator(
            origin=gateway["url"].replace("127.0.0.1", "localhost"), rp_id="localhost"
        )
        credential = phone.register(unb64(_options(shown)["challenge"]))
        made = {**form, "label": "phone", "credential": credential}
        # Straight to the registration, without the approval step: refused.
        direct = page.post("/passkeys", data=made)
        assert direct.status_code == 403 and "passkey_approval_required" in direct.text
        step = page.post("/passkeys/add", data=made)
        assert step.status_code == 200 and "Approve the new passkey" in step.text
        asks = _options(step.text, "data-passkey-options")
        assert [c["id"] for c in asks["allowCredentials"]] == [unb64_id(first)]
        approve = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', step.text))
        approve = {k: html.unescape(v) for k, v in approve.items()}
        challenge = unb64(asks["challenge"])
        itself = {**approve, "passkey_assertion": phone.approve(challenge)}
        assert "passkey_unknown" in page.post("/passkeys", data=itself).text
        signed = {**approve, "passkey_assertion": first.approve(challenge)}
        done = page.post("/passkeys", data=signed)
        assert "Passkey “phone” registered" in done.text, done.text

        revoke, shown = _form(page, "/passkeys", f"/passkeys/{unb64_id(first)}/revoke")
        path = f"/passkeys/{unb64_id(first)}/revoke"
        bare = page.post(path, data={"csrf": revoke["csrf"]})
        assert bare.status_code == 403 and "passkey_approval_required" in bare.text
        options = _options(shown, "data-passkey-options")
        signed = {**revoke, "passkey_assertion": phone.approve(unb64(options["challenge"]))}
        assert "Passkey revoked" in page.post(path, data=signed).text
        assert page.post(path, data=signed).status_code == 404  # it is revoked already
    verified = cli("ledger", "verify", str(gateway["data"]))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_passkeys_enrol_on_the_host_refuses_an_operator_key_and_replaces_a_lost_device(
    gateway: dict[str, Any],
) -> None:
    config = str(gateway["config"])
    operator_only = {k: v for k, v in gateway["env"].items() if k != "UNDOGATE_MASTER_KEY"}
    refused = cli("passkeys", "enrol", "--config", config, env=operator_only)
    assert refused.returncode != 0 and "UNDOGATE_MASTER_KEY" in refused.stderr
    assert refused.stdout == ""
    _register_through_the_page(gateway)
    master = {k: v for k, v in gateway["env"].items() if k != "UNDOGATE_KEY"}
    needed = cli("passkeys", "enrol", "--config", config, env=master)
    assert needed.returncode != 0 and "enrolment_not_needed" in needed.stderr
    code = _enrol(gateway, replace=True)
    assert len(code.replace("-", "")) == 24
    listed = cli("ledger", "verify", str(gateway["data"]))
    assert listed.returncode == 0
    with _signed_in(gateway) as page:
        shown = page.get("/passkeys").text
        assert "Enrol your first passkey" in shown and "revoked" in shown


def unb64_id(authenticator: SoftAuthenticator) -> str:
    """The credential id as the pages and the ledger spell it (base64url)."""
    return b64(authenticator.credential_id)


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


def test_passkeys_enrol_runs_on_the_ledger_itself_when_no_server_owns_it(
    tmp_path: Path, server: ContractServer
) -> None:
    config = str(_config(tmp_path, server))
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNDOGATE_")}
    operator = cli("init", "--config", config, env=env).stdout.strip()
    made = cli("passkeys", "enrol", "--config", config, env=env)  # no URL, no key at all
    assert made.returncode == 0, made.stderr
    owner = "op_" + operator[4:16]
    assert f"enrolment code for {owner}" in made.stderr and operator not in made.stderr
    assert re.fullmatch(r"([A-Z2-7]{4}-){5}[A-Z2-7]{4}\n", made.stdout)
    nobody = cli("passkeys", "enrol", "--config", config, "--owner", "op_nobody", env=env)
    assert nobody.returncode == 2 and "error [not_found]" in nobody.stderr
