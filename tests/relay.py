"""A TCP relay on 127.0.0.1 in front of a real server (Kinto, Radicale, Xandikos), for
the one fault a real server cannot be asked for: a write held at the endpoint.

Every connection passes through byte for byte, except that the relay can be told to
withhold the next write: it reads that request whole, never forwards it, and closes the
connection without an answer. The client has sent its write and heard nothing, so it
cannot know whether the write landed; the server never saw it. (The gateway sends every
write on a fresh connection, so a write is always the first request of its connection,
which is the only one the relay reads.)
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

_WRITES = (b"PUT", b"POST", b"PATCH", b"DELETE")
_HEAD_LIMIT = 64 * 1024
_TIMEOUT_S = 10.0


class Relay:
    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        assert parts.hostname is not None and parts.port is not None
        self._upstream = (parts.hostname, parts.port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._to_withhold = 0
        self._open: set[socket.socket] = set()
        self.withheld: list[bytes] = []  # the request line of each write it withheld
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def url(self, path: str) -> str:
        return self.base_url + path

    def withhold_next_write(self) -> None:
        with self._lock:
            self._to_withhold += 1

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() it blocks in
        self._listener.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self._accepting.join(timeout=_TIMEOUT_S)

    # -- the connections --------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _track(self, sock: socket.socket) -> socket.socket:
        sock.settimeout(_TIMEOUT_S)
        with self._lock:
            self._open.add(sock)
        return sock

    def _serve(self, client: socket.socket) -> None:
        with self._track(client):
            read = b""
            while b"\r\n\r\n" not in read and len(read) < _HEAD_LIMIT:
                chunk = client.recv(65536)
                if not chunk:
                    return
                read += chunk
            head, _, body = read.partition(b"\r\n\r\n")
            if head.split(b" ", 1)[0] in _WRITES and self._take():
                self._read_body(client, head, body)
                self.withheld.append(head.split(b"\r\n", 1)[0])
                return  # closed without an answer
            with self._track(socket.create_connection(self._upstream)) as upstream:
                upstream.sendall(read)
                back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
                back.start()
                _pipe(client, upstream)
                back.join(timeout=_TIMEOUT_S)

    def _take(self) -> bool:
        with self._lock:
            if self._to_withhold == 0:
                return False
            self._to_withhold -= 1
            return True

    @staticmethod
    def _read_body(client: socket.socket, head: bytes, body: bytes) -> None:
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = client.recv(65536)
            if not chunk:
                return
            body += chunk


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy until ``source`` ends, then end ``sink``'s sending side."""
    with contextlib.suppress(OSError):
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def relay(upstream_url: str) -> Iterator[Relay]:
    running = Relay(upstream_url)
    try:
        yield running
    finally:
        running.close()
