"""The contract server's HTTP plumbing: a threading server, one handler, and the messages
between the handler and whatever answers them.

The handler reads a request (bounded body, no chunked uploads), hands it to its
``Endpoint`` and writes the reply, or drops or hangs the connection when a fault asks
for it. It knows nothing of resources or faults.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Protocol, cast
from urllib.parse import urlsplit

MAX_BODY_BYTES = 1024 * 1024


@dataclass(slots=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    query: str = ""


@dataclass(slots=True)
class Reply:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    action: Literal["respond", "drop", "hang"] = "respond"


def problem(status: int, error: str, message: str) -> Reply:
    body = json.dumps({"error": error, "message": message}).encode("utf-8")
    return Reply(status, [("Content-Type", "application/json")], body)


def json_reply(status: int, payload: Mapping[str, Any]) -> Reply:
    body = json.dumps(payload, sort_keys=True).encode("utf-8")
    return Reply(status, [("Content-Type", "application/json")], body)


class Endpoint(Protocol):
    """What the handler threads call: the contract server, seen from the socket."""

    stopping: threading.Event
    verbose: bool
    hang_seconds: float
    token_header: str | None  # a header the token travels in, besides the standard ones

    def wait_at_gate(self, request: Request) -> None: ...

    def handle(self, request: Request) -> Reply: ...


class ContractHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default listen backlog is 5: a sixth client connecting at the same
    # moment has its SYN dropped and retries a second later (16 agents or a gateway's
    # pool opening connections at once would stall for that second).
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], contract: Endpoint) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.contract = contract
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        sock = cast(socket.socket, request)
        with self._connections_lock:
            self._connections[sock] = threading.current_thread()
        try:
            if self.contract.stopping.is_set():
                self.shutdown_request(request)
                return
            super().process_request_thread(request, client_address)
        finally:
            with self._connections_lock:
                self._connections.pop(sock, None)

    def drop_connections(self, timeout: float) -> None:
        """Cut every open connection (idle keep-alives, hung writes) and wait for its thread."""
        with self._connections_lock:
            connections = list(self._connections.items())
        for sock, _thread in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for _sock, thread in connections:
            thread.join(timeout)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if self.contract.verbose:
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "undogate-contract/0.1"
    timeout = 120
    disable_nagle_algorithm = True

    def version_string(self) -> str:
        return self.server_version

    @property
    def contract(self) -> Endpoint:
        return cast(ContractHTTPServer, self.server).contract

    def log_message(self, format: str, *args: Any) -> None:
        if self.contract.verbose:
            super().log_message(format, *args)

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        body = self._read_body()
        if body is None:
            return
        headers: dict[str, str] = {}
        named: tuple[str, ...] = ("If-Match", "If-None-Match", "Content-Type", "Authorization")
        if self.contract.token_header is not None:
            named += (self.contract.token_header,)
        for name in named:
            values = self.headers.get_all(name)
            if values:
                headers[name.lower()] = ", ".join(v.strip() for v in values)
        target = urlsplit(self.path)
        request = Request(self.command, target.path, headers, body, target.query)
        self.contract.wait_at_gate(request)
        reply = self.contract.handle(request)
        if reply.action == "hang":
            self.contract.stopping.wait(self.contract.hang_seconds)
        if reply.action in ("hang", "drop"):
            self.close_connection = True
            return
        self._send(reply, head=self.command == "HEAD")

    def _read_body(self) -> bytes | None:
        if self.headers.get("Transfer-Encoding") is not None:
            self._send(problem(411, "length_required", "send a Content-Length"), close=True)
            return None
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            return b""
        try:
            length = int(length_header)
        except ValueError:
            length = -1
        if length < 0:
            self._send(problem(400, "bad_request", "malformed Content-Length"), close=True)
            return None
        if length > MAX_BODY_BYTES:
            # Drain a moderately oversized body so the client reads the 413 instead of a reset.
            drain = length <= 8 * MAX_BODY_BYTES
            if drain and not self._discard(length):
                self.close_connection = True
                return None
            message = f"bodies are limited to {MAX_BODY_BYTES} bytes"
            self._send(problem(413, "too_large", message), close=not drain)
            return None
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            return None
        return body

    def _discard(self, length: int) -> bool:
        while length > 0:
            chunk = self.rfile.read(min(length, 65536))
            if not chunk:
                return False
            length -= len(chunk)
        return True

    def _send(self, reply: Reply, *, head: bool = False, close: bool = False) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        if reply.status not in (204, 304):
            self.send_header("Content-Length", str(len(reply.body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if not head and reply.status not in (204, 304):
            self.wfile.write(reply.body)
