"""Helpers for the review UI tests: a world to review, served for real, and Chromium.

``web_world`` builds a gateway with a record and a text document, two owners (alice and
bob, each with an agent token), a read-only key, and the app exactly as ``undogate
serve`` mounts it (``worlds.review_app``).
``ServedApp`` runs that app with uvicorn in a thread on 127.0.0.1, so a real browser
can talk to it.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from undogate.auth import READ, Keyring
from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.service import Service
from undogate.web import WebSettings

from .conftest import resource
from .worlds import LocalGateway, review_app

CHROMIUM = os.environ.get("UNDOGATE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RECORD = "/records/customer-123"
DOCUMENT = "/docs/notes.md"
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "web"
DOC_SHOTS = ROOT / "docs" / "screenshots"


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)) and not shutil.which(
        CHROMIUM
    ):
        return f"Chromium is not installed at {CHROMIUM} (run scripts/system-deps.sh as root)"
    return None


def web_config(server: ContractServer, data_dir: Path, **settings: Any) -> Config:
    return parse_config(
        {
            "server": {"data_dir": str(data_dir), **settings},
            "resources": [
                resource(server, "customer", RECORD),
                resource(server, "notes", DOCUMENT, kind="webdav_text"),
            ],
            "agents": [
                {"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]},
                {"id": "other-agent", "tools": ["list_resources"]},
            ],
        }
    )


@dataclass
class WebWorld:
    gateway: LocalGateway
    keyring: Keyring
    server: ContractServer
    app: Any
    keys: dict[str, str]
    ids: dict[str, str]
    clock: list[float] = field(default_factory=lambda: [0.0])


def web_world(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[[Config], LocalGateway],
    *,
    settings: WebSettings | None = None,
    **server_settings: Any,
) -> WebWorld:
    gw = open_gateway(web_config(server, data_dir, **server_settings))
    keyring = Keyring(gw.ledger, known_agents=lambda: {a.id for a in gw.config.agents})
    alice = keyring.create_operator(label="alice")
    bob = keyring.create_operator(label="bob")
    reader = keyring.create_operator(label="carol (read only)", scopes=(READ,))
    alice_agent = keyring.create_agent_token(
        owner_id=alice.credential.id, agent_id="account-assistant", label="assistant"
    )
    bob_agent = keyring.create_agent_token(
        owner_id=bob.credential.id, agent_id="account-assistant", label="bob's assistant"
    )
    app = review_app(Service(gw, keyring), settings)
    return WebWorld(
        gateway=gw,
        keyring=keyring,
        server=server,
        app=app,
        keys={
            "alice": alice.key,
            "bob": bob.key,
            "reader": reader.key,
            "agent": alice_agent.key,
            "bob_agent": bob_agent.key,
        },
        ids={
            "alice": alice.credential.id,
            "bob": bob.credential.id,
            "reader": reader.credential.id,
        },
    )


def prepare_body(summary: str = "Promote Ada to customer and hand her to Lee", **extra: Any) -> Any:
    body: dict[str, Any] = {
        "summary": summary,
        "attribution_label": "ticket CRM-4521",
        "changes": [
            {
                "resource": "customer",
                "set": {"status": "customer", "owner": "lee"},
                "assertion_kind": "supplied",
            }
        ],
    }
    body.update(extra)
    return body


def prepare_via_api(client: httpx.Client, agent_key: str, body: Any) -> str:
    """Prepare a job through the HTTP API as the agent; returns its id."""
    made = client.post("/api/v1/jobs", json=body, headers={"Authorization": f"Bearer {agent_key}"})
    assert made.status_code == 201, made.text
    job_id = made.json()["job_id"]
    assert isinstance(job_id, str)
    return job_id


class ServedApp:
    """An ASGI app served by uvicorn in a thread on 127.0.0.1 (a real HTTP origin)."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", ws="none"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def start(self) -> ServedApp:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise AssertionError("the web app did not start")
            time.sleep(0.01)  # poll interval of a bounded wait, not a fixed sleep
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()


@contextmanager
def served(app: Any) -> Iterator[ServedApp]:
    running = ServedApp(app).start()
    try:
        yield running
    finally:
        running.stop()


def save_shot(page: Any, name: str, *, docs: bool = False) -> None:
    """A full-page screenshot under test-artifacts/web/; with ``docs`` (and
    ``UNDOGATE_UPDATE_SCREENSHOTS=1``) also the README's copy in docs/screenshots/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    if docs and os.environ.get("UNDOGATE_UPDATE_SCREENSHOTS") == "1":
        DOC_SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOC_SHOTS / f"{name}.png"), full_page=True)
