"""A kind from outside undogate: ``keyvalue_entry``, its own distribution
(tests/kinds/keyvalue, installed by ``make install``), found through its ``undogate.kinds``
entry point. Nothing in undogate names it; it passes the contract every built-in kind
passes, against the key-value store it ships."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from undogate_keyvalue.store import KeyValueStore

from undogate.testing import KindCase, KindContract, ServedGateway
from undogate.testing.launcher import run

pytestmark = pytest.mark.slow

TOKEN = "kv-secret-token"
_edits = itertools.count()


@pytest.fixture
def store() -> Iterator[KeyValueStore]:
    kv = KeyValueStore(token=TOKEN).start()
    try:
        yield kv
    finally:
        kv.stop()


class TestKeyValueEntryContract(KindContract):
    @pytest.fixture
    def kind_case(self, store: KeyValueStore) -> KindCase:
        store.set("greeting", "Hello")
        store.set("greeting-copy", "Hello")
        return KindCase(
            kind="keyvalue_entry",
            url=store.url("greeting"),
            test_copy_url=store.url("greeting-copy"),
            change={"value": "Back on Monday"},
            other_change={"value": "Away until Friday"},
            outside_edit=lambda: store.set("greeting", f"edited elsewhere {next(_edits)}"),
            state=lambda: json.dumps(store.value("greeting")).encode(),
            settings={"max_length": 80},
            token=TOKEN,
        )


# -- every surface, without a line of undogate naming the kind ----------------------------

KINDS = Path(__file__).resolve().parent / "kinds"
SOURCE = Path(__file__).resolve().parent.parent / "src" / "undogate"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
TOKEN_FIELD = re.compile(r'name="preview_token" value="([^"]+)"')


def _undogate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "undogate.cli", *args], env=env, timeout=120)


def test_no_line_of_undogate_names_the_kind_from_outside() -> None:
    named = [
        str(path.relative_to(SOURCE))
        for path in SOURCE.rglob("*")
        if path.suffix in (".py", ".html") and "keyvalue" in path.read_text(encoding="utf-8")
    ]
    assert named == []


def test_undogate_kinds_lists_it_with_its_distribution() -> None:
    listed = _undogate("kinds")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.splitlines()[1:]}
    assert rows["keyvalue_entry"] == ["undogate-kind-keyvalue", "0.3.0", "installed"]
    assert rows["json_record"][2] == "built-in"


@contextmanager
def _web_session(url: str, key: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, timeout=60) as client:
        form = client.get("/signin")
        signed = client.post("/signin", data={"key": key, "csrf": _csrf(form.text)})
        assert signed.status_code == 303, signed.text
        yield client


def _csrf(page: str) -> str:
    match = CSRF.search(page)
    assert match is not None
    return match.group(1)


def test_it_runs_through_mcp_the_web_page_the_cli_and_check_endpoint(
    store: KeyValueStore, tmp_path: Path
) -> None:
    store.set("greeting", "Hello")
    store.set("greeting-copy", "Hello")
    common = {"kind": "keyvalue_entry", "conditional_writes": True, "allow_loopback_http": True}
    common |= {"token_env": "KV_TOKEN", "max_length": 80}
    gateway = ServedGateway(
        tmp_path / "gateway",
        [
            {"id": "greeting", "name": "Greeting", "url": store.url("greeting"), **common},
            {
                "id": "greeting-copy",
                "name": "Greeting (test copy)",
                "url": store.url("greeting-copy"),
                "test_copy_of": "greeting",
                **common,
            },
        ],
        {"KV_TOKEN": TOKEN},
    ).start()
    env = {**os.environ, "UNDOGATE_URL": gateway.url, "UNDOGATE_KEY": gateway.operator_key}
    try:
        # An agent, over MCP (streamable HTTP): the kind is listed and described.
        prepared: dict[str, Any] = {}

        async def agent() -> None:
            headers = {"Authorization": f"Bearer {gateway.agent_key}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(streamable_http_client(f"{gateway.url}/mcp", http_client=http)) as mcp,
            ):
                tools = {t.name: t for t in (await mcp.list_tools()).tools}
                assert "kind `keyvalue_entry`" in (tools["prepare_changes"].description or "")
                inputs = tools["prepare_changes"].input_schema["$defs"]["ChangeInput"]
                assert "value" in inputs["properties"]
                listed = await mcp.call_tool("list_resources", {})
                assert {"id": "greeting", "name": "Greeting", "kind": "keyvalue_entry",
                        "fields": []} in (listed.structured_content or {})["resources"]  # fmt: skip
                done = await mcp.call_tool(
                    "prepare_changes",
                    {"summary": "new greeting",
                     "changes": [{"resource": "greeting", "value": "Back on Monday"}]},
                )  # fmt: skip
                assert not done.is_error, done.content
                prepared.update(done.structured_content or {})

        anyio.run(agent)
        job_id = prepared["job_id"]
        assert store.value("greeting") == "Hello"  # preparing wrote nothing

        # A reviewer, on the web page: the entry's row, then the preview's exact request.
        with _web_session(gateway.url, gateway.operator_key) as web:
            page = web.get(f"/jobs/{job_id}")
            assert page.status_code == 200
            assert "(entry)" in page.text and "Back on Monday" in page.text and "Hello" in page.text
            previewed = web.post(
                f"/jobs/{job_id}/previews", data={"csrf": _csrf(page.text), "operation": "apply"}
            )
            assert previewed.status_code == 303
            preview = web.get(previewed.headers["location"])
            requests = preview.text.split('id="requests-h"', 1)[1]
            assert "<strong>PUT</strong>" in requests and "If-Match" in requests
            assert "Back on Monday" in requests  # the exact body the confirm sends
            token = TOKEN_FIELD.search(preview.text)
            assert token is not None
            confirmed = web.post(
                f"/jobs/{job_id}/confirm",
                data={"csrf": _csrf(preview.text), "preview_token": token.group(1)},
            )
            assert confirmed.status_code == 303
        assert store.value("greeting") == "Back on Monday"

        # The CLI: the receipt, then the undo's exact requests (a dry run sends nothing).
        shown = _undogate("jobs", "show", job_id, env=env)
        assert shown.returncode == 0, shown.stderr
        assert "value" in shown.stdout and "Back on Monday" in shown.stdout
        dry = _undogate("undo", "--dry-run", job_id, env=env)
        assert dry.returncode == 0, dry.stderr + dry.stdout
        assert '{"value": "Hello"}' in dry.stdout and store.value("greeting") == "Back on Monday"
        assert gateway.operate(job_id, "undo").json()["job"]["state"] == "undone"
        assert store.value("greeting") == "Hello"

        # check-endpoint, through the API of the server that owns the ledger.
        config = str(gateway.config_path)
        checked = _undogate("check-endpoint", "--config", config, "greeting-copy", env=env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "greeting: verified on a test copy" in checked.stdout
        assert store.value("greeting-copy") == "Hello"
    finally:
        gateway.stop()


# -- a distribution whose kind cannot be served -------------------------------------------


def _with_broken(*args: str) -> subprocess.CompletedProcess[str]:
    """``undogate`` with tests/kinds/broken on its path: real importlib.metadata finds
    its .dist-info, whose entry points name kinds that cannot be served."""
    path = os.pathsep.join(p for p in (str(KINDS / "broken"), os.environ.get("PYTHONPATH")) if p)
    return _undogate(*args, env={**os.environ, "PYTHONPATH": path})


def test_a_kind_that_fails_to_load_is_named_with_its_distribution_and_harms_no_other(
    tmp_path: Path,
) -> None:
    listed = _with_broken("kinds")
    assert listed.returncode == 1
    assert "Traceback" not in listed.stdout + listed.stderr
    lines = listed.stdout.splitlines()[1:]
    rows = {line.split()[0]: line for line in lines if "undogate-kind-broken" in line}
    served = {line.split()[0]: line for line in lines if "undogate-kind-broken" not in line}
    assert rows["broken_thing"].split()[1:3] == ["undogate-kind-broken", "1.0"]
    assert (
        "NOT LOADED: importing undogate_kind_broken.failing:BrokenThing failed: RuntimeError: "
        "this kind needs a library that is not installed"
    ) in rows["broken_thing"]
    assert "this kind needs a library that is not installed" in rows["broken_thing"]
    assert "NOT LOADED" in rows["clashing_thing"] and "member set differs" in rows["clashing_thing"]
    # A distribution cannot take a built-in kind's name: it is refused, the built-in stays.
    assert "already provided by undogate" in rows["json_record"]
    # Every kind served without the broken distribution is served beside it.
    alone = _undogate("kinds")
    assert alone.returncode == 0, alone.stderr
    unharmed = {line.split()[0] for line in alone.stdout.splitlines()[1:] if line.strip()}
    assert {"json_record", "webdav_text", "keyvalue_entry"} <= unharmed
    assert set(served) == unharmed
    assert all(line.endswith(("built-in", "installed")) for line in served.values())

    def config(kind: str) -> Path:
        path = tmp_path / f"{kind}.yaml"
        resource: dict[str, object] = {"id": "r", "agent_id": "a", "name": "R", "kind": kind,
                    "url": "https://records.example.com/r/1"}  # fmt: skip
        if kind == "json_record":
            resource["fields"] = ["status"]
        path.write_text(yaml.safe_dump({"resources": [resource], "agents": [{"id": "a"}]}))
        return path

    refused = _with_broken("check-config", "--config", str(config("broken_thing")))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "resources[0].kind" in refused.stderr
    assert "undogate-kind-broken 1.0" in refused.stderr and "RuntimeError" in refused.stderr
    unknown = _with_broken("check-config", "--config", str(config("spreadsheet")))
    assert unknown.returncode == 2
    installed = unknown.stderr.split("the installed kinds are ", 1)[1]
    assert "unknown kind 'spreadsheet'" in unknown.stderr
    assert all(kind in installed for kind in unharmed)  # the installed ones, listed
    assert "broken_thing" not in installed
    fine = _with_broken("check-config", "--config", str(config("json_record")))
    assert fine.returncode == 0, fine.stderr


def test_a_gateway_serves_its_kinds_beside_one_that_fails_to_load_and_says_so(
    store: KeyValueStore, tmp_path: Path
) -> None:
    store.set("greeting", "Hello")
    path = os.pathsep.join(p for p in (str(KINDS / "broken"), os.environ.get("PYTHONPATH")) if p)
    resource = {"id": "greeting", "name": "Greeting", "kind": "keyvalue_entry",
                "url": store.url("greeting"), "token_env": "KV_TOKEN",
                "conditional_writes": True, "allow_loopback_http": True}  # fmt: skip
    gateway = ServedGateway(tmp_path, [resource], {"KV_TOKEN": TOKEN, "PYTHONPATH": path})
    try:
        gateway.start()
        done = gateway.prepare({"resource": "greeting", "value": "Hi"})
        assert done.status_code == 201, done.text
    finally:
        said = gateway.stop()
    assert (
        "warning: the kind broken_thing from undogate-kind-broken 1.0 could not be loaded "
        "(importing undogate_kind_broken.failing:BrokenThing failed: RuntimeError: this kind "
        "needs a library that is not installed); a resource of that kind is refused"
    ) in said
    assert (
        "warning: the kind json_record from undogate-kind-broken 1.0 could not be loaded (the "
        "kind json_record is already provided by undogate); another distribution serves it"
    ) in said
    assert "Traceback" not in said
