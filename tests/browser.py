"""Helpers for the review UI tests: the app served for real, and Chromium.

``ServedApp`` runs an app (a ``worlds.WebWorld``'s) with uvicorn in a thread on
127.0.0.1, so a real browser can talk to it.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

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
