"""A fault proxy: a real HTTP server on 127.0.0.1 between the gateway and the endpoint a
kind's author started, which forwards every request as it came (its ``Host`` too, the
proxy's own: a signature may cover it) and, when told, commits
one fault on the next write. The contract's faults need nothing of the endpoint or of
the kind: they happen on the wire.

Faults (each armed for the next write: a request that is not a read, ``GET``, ``HEAD``,
``PROPFIND`` or ``REPORT``):

- ``drop_response``: the write reaches the endpoint, its answer never reaches the
  gateway (the connection closes): a lost response;
- ``hold_response``: the write reaches the endpoint, its answer is held until
  ``release`` (the gateway is killed meanwhile: a crash after the send);
- ``stale_read_back``: the write reaches the endpoint and is answered, then the next
  ``GET`` of that path is answered with the ``GET`` answer from before the write: a
  read-back that does not show the write;
- ``outside_edit``: a callback (another client's write) runs just before the write is
  forwarded, so the write carries a version that is no longer current.

Every request is recorded (method, path, headers, body), so a test can compare what
reached the endpoint with what the preview showed.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

# Hop-by-hop headers: the proxy's own business on each side, never forwarded.
_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding"}
)
FAULTS = ("drop_response", "hold_response", "stale_read_back", "outside_edit")
# What a kind may send while it reads (the gateway's ``remote.READ_METHODS``): never a
# write, so never one a fault is armed for.
READS = frozenset({"GET", "HEAD", "PROPFIND", "REPORT"})


@dataclass(frozen=True)
class Seen:
    """One request as it reached the proxy."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


class FaultProxy:
    """Forwards to ``upstream`` (``http://127.0.0.1:PORT``); ``url(path)`` is the same
    path through the proxy."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._lock = threading.Lock()
        self.seen: list[Seen] = []
        self._armed: str | None = None
        self._outside: Callable[[], None] | None = None
        self._held = threading.Event()
        self._last_get: dict[str, _Answer] = {}
        self._stale_for: str | None = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy._handle(self)

            do_PUT = do_POST = do_PATCH = do_DELETE = do_GET
            do_PROPFIND = do_REPORT = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the record is ``seen``

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # -- lifecycle and setup ---------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def url(self, upstream_url: str) -> str:
        """``upstream_url`` (on the endpoint) as the same path through the proxy."""
        parts = urlsplit(upstream_url)
        host, port = self._server.server_address[:2]
        return parts._replace(netloc=f"{host!s}:{port}").geturl()

    def arm(self, fault: str, outside: Callable[[], None] | None = None) -> None:
        """Commit ``fault`` on the next write (``outside``: the edit ``outside_edit``
        makes)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")
        with self._lock:
            self._armed, self._outside = fault, outside
            self._held.clear()

    def release(self) -> None:
        """Let a held answer go (to a gateway that may be dead by now)."""
        self._held.set()

    def writes(self) -> list[Seen]:
        """Every request but the reads, in the order they came."""
        with self._lock:
            return [s for s in self.seen if s.method not in READS]

    # -- forwarding ------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        seen = Seen(handler.command, handler.path, headers, body)
        with self._lock:
            self.seen.append(seen)
            fault = None
            if seen.method not in READS:
                fault, self._armed = self._armed, None
            stale = self._last_get.get(seen.path) if self._stale_for == seen.path else None
            if seen.method == "GET" and stale is not None:
                self._stale_for = None
        if stale is not None:
            return _reply(handler, stale)
        if fault == "outside_edit" and self._outside is not None:
            self._outside()
        answer = self._forward(seen)
        if seen.method == "GET":
            with self._lock:
                self._last_get[seen.path] = answer
        if fault == "stale_read_back":
            with self._lock:
                self._stale_for = seen.path
        if fault == "hold_response":
            self._held.wait(timeout=60)
        if fault in ("drop_response", "hold_response"):
            handler.close_connection = True
            with contextlib.suppress(OSError):  # the gateway may be gone already
                handler.connection.shutdown(socket.SHUT_RDWR)
            return None
        return _reply(handler, answer)

    def _forward(self, seen: Seen) -> _Answer:
        host, port = self._upstream
        connection = http.client.HTTPConnection(host, port, timeout=30)
        try:
            # As it came, Host included: a signature may cover it (AWS SigV4 does).
            headers = dict(seen.headers)
            connection.request(seen.method, seen.path, body=seen.body or None, headers=headers)
            response = connection.getresponse()
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP]
            return _Answer(response.status, kept, response.read())
        finally:
            connection.close()


def _reply(handler: BaseHTTPRequestHandler, answer: _Answer) -> None:
    handler.send_response(answer.status)
    for name, value in answer.headers:
        if name.lower() not in ("content-length", "date", "server"):  # the proxy sends its own
            handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(answer.body)))
    handler.end_headers()
    handler.wfile.write(answer.body)


__all__ = ["FAULTS", "FaultProxy", "Seen"]
