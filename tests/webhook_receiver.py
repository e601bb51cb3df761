"""A real webhook receiver on 127.0.0.1 for the webhook tests: it records every request
(headers and exact body), answers with the status and body it is told to (or a body that
never ends: announced longer than what it sends, the rest held until ``stop``), and can
be started and stopped on the same port (a receiver that is down, then comes back)."""

from __future__ import annotations

import base64
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook

from .serving import free_port


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """``url`` is fixed at creation; ``start``/``stop`` bring it up and down there."""

    def __init__(self, secret: str, status: int = 204) -> None:
        self.secret = secret
        self.status = status
        self.answer = b""  # the body of every answer
        self.endless = False  # announce more than ``answer`` and hold the rest back
        self._released = threading.Event()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hooks/undogate"
        self.received: list[Received] = []
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    def start(self) -> Receiver:
        receiver = self
        self._released.clear()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.received.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                self.send_response(receiver.status)
                announced = len(receiver.answer) + (1 << 30 if receiver.endless else 0)
                self.send_header("Content-Length", str(announced))
                self.end_headers()
                try:
                    self.wfile.write(receiver.answer)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return  # the sender took the status and left: all it needs
                if receiver.endless:
                    receiver._released.wait(60)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def verified(self) -> list[dict[str, Any]]:
        """Every body received, each verified with the ``standardwebhooks`` package (it
        raises on a bad signature, a missing header or a stale timestamp)."""
        hook = Webhook(self.secret)
        with self._lock:
            got = list(self.received)
        return [hook.verify(r.body, r.headers) for r in got]

    def events(self) -> list[str]:
        return [str(body["type"]) for body in self.verified()]

    def wait_for(self, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        """Wait (polling, bounded) until ``count`` requests arrived; their verified bodies."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) >= count:
                    break
            time.sleep(0.05)  # poll interval of a bounded loop, not a fixed wait
        bodies = self.verified()
        assert len(bodies) >= count, f"only {len(bodies)} of {count} webhooks arrived"
        return bodies


def wait_until(check: Callable[[], bool], timeout: float = 20.0, what: str = "it") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)  # poll interval of a bounded loop, not a fixed wait
    raise AssertionError(f"{what} did not happen in {timeout} s")
