"""The reviewer CLI on a collection (docs/collections.md), against a served gateway: a create is
marked irreversible and needs the typed word; check-endpoint verifies the undo, and
accept-undo (a typed "accept") offers it; then undo removes exactly that record. Where
the resource requires a passkey, accept-undo cannot sign and points to the undo page."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from undogate.contract_server import ContractServer

from .collections_world import CONTACTS, contacts
from .serving import cli, serving
from .test_cli_review import Terminal
from .worlds import MASTER_KEY

COPY = "/collections/contacts-copy"


@pytest.fixture
def served(tmp_path: Path, server: ContractServer) -> Iterator[dict[str, Any]]:
    with _serve(tmp_path, server) as made:
        yield made


@contextmanager
def _serve(tmp_path: Path, server: ContractServer, **settings: Any) -> Iterator[dict[str, Any]]:
    config = tmp_path / "undogate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": str(tmp_path / "data"), **settings},
                "resources": [
                    contacts(server),
                    contacts(server, "contacts-copy", path=COPY, test_copy_of="contacts"),
                ],
                "agents": [{"id": "account-assistant", "tools": ["prepare_changes"]}],
            }
        )
    )
    env = {**os.environ, "UNDOGATE_MASTER_KEY": MASTER_KEY}
    init = cli("init", "--config", str(config), env=env)
    assert init.returncode == 0, init.stderr
    operator = init.stdout.strip()
    made = cli(
        "keys", "create-agent", "--agent", "account-assistant", "--owner",
        "op_" + operator[4:16], "--config", str(config), env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    with serving(config, env) as (url, _):
        yield {
            "url": url,
            "agent": made.stdout.splitlines()[0],
            "env": {**env, "UNDOGATE_URL": url, "UNDOGATE_KEY": operator},
            "config": config,
        }


def _prepare(served: dict[str, Any], change: dict[str, Any]) -> str:
    response = httpx.post(
        f"{served['url']}/api/v1/jobs",
        json={"summary": "add a contact", "changes": [{"resource": "contacts", **change}]},
        headers={"Authorization": f"Bearer {served['agent']}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["job_id"])


def test_a_create_needs_the_word_until_its_undo_is_verified_and_accepted(
    served: dict[str, Any], server: ContractServer
) -> None:
    env = served["env"]
    job = _prepare(served, {"create": {"email": "ann@example.com"}, "id": "ann"})
    term = Terminal(["apply", job], env)
    shown = term.read_until('Type "irreversible"')
    assert "creates a new record ann" in shown
    assert "IRREVERSIBLE" in shown and "If-None-Match: *" in shown
    term.send("yes")
    assert term.finish() == 1
    assert server.collection_records(CONTACTS) == {}  # a wrong word writes nothing

    term = Terminal(["apply", job], env)
    term.read_until('Type "irreversible"')
    term.send("irreversible")
    term.read_until('Type "apply"')
    term.send("apply")
    term.read_until("is now applied")
    assert term.finish() == 0
    assert set(server.collection_records(CONTACTS)) == {"ann"}
    listed = cli("jobs", "show", job, env=env)
    assert listed.returncode == 0 and "creates a new record ann" in listed.stdout

    term = Terminal(["accept-undo", "contacts"], env)
    assert term.finish() == 1
    assert "nothing is verified" in term.text
    checked = cli("check-endpoint", "contacts-copy", "--config", str(served["config"]), env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "verified undos: undo_of_create, recreate" in checked.stdout
    term = Terminal(["accept-undo", "contacts"], env)
    term.read_until('Type "accept"')
    term.send("accept")
    term.read_until("recorded in the ledger")
    assert term.finish() == 0

    term = Terminal(["undo", job], env)
    shown = term.read_until('Type "undo"')
    assert "DELETE" in shown and "IRREVERSIBLE" not in shown
    term.send("undo")
    term.read_until("is now undone")
    assert term.finish() == 0
    assert server.collection_records(CONTACTS) == {}


def test_accept_undo_points_to_the_page_where_a_passkey_is_required(
    tmp_path: Path, server: ContractServer
) -> None:
    with _serve(tmp_path, server, require_passkey=True) as made:
        env = made["env"]
        checked = cli("check-endpoint", "contacts-copy", "--config", str(made["config"]), env=env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        term = Terminal(["accept-undo", "contacts"], env)
        assert term.finish() == 1  # never downgraded to the typed word
        assert f"{made['url']}/resources/contacts/undo" in term.text.replace("\n", "")
        assert 'Type "accept"' not in term.text
        offer = cli("accept-undo", "contacts", env=env)
        assert offer.returncode == 1
