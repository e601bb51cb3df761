"""A small key-value text store over HTTP, the endpoint ``keyvalue_entry`` is made for.

Every entry lives at ``/kv/{key}``:

- ``GET`` answers ``200`` with ``{"key": ..., "value": ...}`` as ``application/json`` and a
  strong ``ETag`` (``"<revision>"``), or ``404``;
- ``PUT`` with ``{"value": ...}`` replaces the value only under an ``If-Match`` that
  names the current revision (strong comparison: a weak tag never matches), answers
  ``204`` with the new ``ETag``; a mismatch, or an ``If-Match`` on a key that does not
  exist, is ``412`` and changes nothing; no ``If-Match`` is ``428``;
- with a token, every request needs ``Authorization: Bearer <token>`` (else ``401``).

The store keeps everything in memory behind one lock; ``set`` is another client's
write, as a test needs one.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

PREFIX = "/kv/"


class KeyValueStore:
    """The store, served on 127.0.0.1 (port 0: a free one) until ``stop``."""

    def __init__(self, token: str | None = None, port: int = 0) -> None:
        self.token = token
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[int, str]] = {}
        self._revision = 0
        store = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                store._answer(self, "GET")

            def do_PUT(self) -> None:
                store._answer(self, "PUT")

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests read the store, not its log

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> KeyValueStore:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def url(self, key: str) -> str:
        return f"{self.base_url}{PREFIX}{key}"

    def set(self, key: str, value: str) -> None:
        """Write ``value`` as another client would (a new revision)."""
        with self._lock:
            self._put(key, value)

    def value(self, key: str) -> str | None:
        with self._lock:
            entry = self._entries.get(key)
            return entry[1] if entry else None

    def revision(self, key: str) -> int | None:
        with self._lock:
            entry = self._entries.get(key)
            return entry[0] if entry else None

    def _put(self, key: str, value: str) -> int:
        self._revision += 1
        self._entries[key] = (self._revision, value)
        return self._revision

    def _answer(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        if self.token is not None and handler.headers.get("Authorization") != (
            f"Bearer {self.token}"
        ):
            return _send(handler, 401, {"error": "unauthorized"})
        if not handler.path.startswith(PREFIX) or len(handler.path) == len(PREFIX):
            return _send(handler, 404, {"error": "no such entry"})
        key = unquote(handler.path[len(PREFIX) :])
        with self._lock:
            entry = self._entries.get(key)
            if method == "GET":
                if entry is None:
                    return _send(handler, 404, {"error": "no such entry"})
                return _send(handler, 200, {"key": key, "value": entry[1]}, entry[0])
            condition = handler.headers.get("If-Match")
            if condition is None:
                return _send(handler, 428, {"error": "If-Match is required"})
            if entry is None or condition.strip() != f'"{entry[0]}"':
                return _send(handler, 412, {"error": "the entry is not at that revision"})
            try:
                value = json.loads(body)["value"]
            except (ValueError, KeyError, TypeError):
                return _send(handler, 400, {"error": 'send {"value": "..."}'})
            if not isinstance(value, str):
                return _send(handler, 400, {"error": "a value is text"})
            return _send(handler, 204, None, self._put(key, value))


def _send(
    handler: BaseHTTPRequestHandler, status: int, body: Any, revision: int | None = None
) -> None:
    data = b"" if body is None else json.dumps(body).encode("utf-8")
    handler.send_response(status)
    if revision is not None:
        handler.send_header("ETag", f'"{revision}"')
    if data:
        handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


__all__ = ["PREFIX", "KeyValueStore"]
