"""The pinned client on the wire: real servers on 127.0.0.1, a local CA, no outside network."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpcore
import pytest
import trustme

from undogate.errors import BlockedAddress
from undogate.net import NetworkFlags, PinnedClient, TransportFailure, check_url, system_resolver

LOOPBACK = NetworkFlags(allow_loopback_http=True)
DEFAULT = NetworkFlags()


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    client_port: int


@dataclass
class Reply:
    status: int = 200
    body: bytes = b'{"ok": true}'
    headers: list[tuple[str, str]] = field(default_factory=list)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, reply: Reply) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reply = reply
        self.seen: list[Seen] = []
        self.server_names: list[str | None] = []

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.seen.append(
            Seen(
                self.command,
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                self.client_address[1],
            )
        )
        reply = self.server.reply
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    do_GET = do_PATCH = do_PUT = _answer


@contextmanager
def http_server(reply: Reply | None = None, tls: ssl.SSLContext | None = None) -> Iterator[_Server]:
    server = _Server(reply or Reply())
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


@contextmanager
def silent_listener() -> Iterator[int]:
    """A port that accepts TCP connections (kernel backlog) and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@pytest.fixture
def client() -> Iterator[PinnedClient]:
    http = PinnedClient()
    yield http
    http.close()


def url(server: _Server, path: str = "/r") -> str:
    return f"http://127.0.0.1:{server.port}{path}"


# -- plain http over loopback ------------------------------------------------------------


def test_a_read_reaches_the_literal_loopback_address_and_records_it(client: PinnedClient) -> None:
    with http_server() as server:
        response = client.send("GET", url(server), headers={}, flags=LOOPBACK)
    assert response.status == 200
    assert response.body == b'{"ok": true}'
    assert response.address == "127.0.0.1"
    assert server.seen[0].headers["host"] == f"127.0.0.1:{server.port}"


def test_a_redirect_is_returned_and_never_followed(client: PinnedClient) -> None:
    with http_server() as elsewhere:
        moved = Reply(302, b"", [("Location", url(elsewhere, "/secret"))])
        with http_server(moved) as server:
            response = client.send("GET", url(server), headers={}, flags=LOOPBACK)
            assert response.status == 302
            assert response.headers["location"] == url(elsewhere, "/secret")
        assert len(server.seen) == 1
        assert elsewhere.seen == []


def test_a_cookie_set_by_a_server_is_never_sent_back(client: PinnedClient) -> None:
    reply = Reply(headers=[("Set-Cookie", "session=from-resource-a; Path=/")])
    with http_server(reply) as server:
        client.send("GET", url(server, "/a"), headers={}, flags=LOOPBACK)
        client.send("GET", url(server, "/b"), headers={}, flags=LOOPBACK)
        client.send(
            "PATCH",
            url(server, "/b"),
            headers={},
            content=b"[]",
            flags=LOOPBACK,
            fresh_connection=True,
        )
    assert len(server.seen) == 3
    assert all("cookie" not in seen.headers for seen in server.seen)


def test_a_blocked_address_sends_nothing(client: PinnedClient) -> None:
    with http_server() as server:
        with pytest.raises(BlockedAddress):
            client.send("GET", url(server), headers={}, flags=DEFAULT)
        with pytest.raises(BlockedAddress):
            client.send("GET", f"http://localhost:{server.port}/r", headers={}, flags=LOOPBACK)
        with pytest.raises(BlockedAddress):
            client.send("GET", f"http://2130706433:{server.port}/r", headers={}, flags=LOOPBACK)
    assert server.seen == []


def test_a_request_may_not_set_its_own_host_header(client: PinnedClient) -> None:
    with http_server() as server, pytest.raises(BlockedAddress):
        client.send("GET", url(server), headers={"HOST": "evil.example"}, flags=LOOPBACK)
    assert server.seen == []


def test_a_pinned_pool_connects_to_its_checked_address_only(client: PinnedClient) -> None:
    with http_server() as checked, http_server() as other:
        target = check_url(url(checked), LOOPBACK, system_resolver)
        pool = client._pools.for_target(target)
        with pytest.raises(httpcore.ConnectError):
            pool.handle_request(httpcore.Request("GET", url(other), headers=[("Host", "x")]))
    assert other.seen == []


def test_a_request_carries_the_headers_http_1_1_needs(client: PinnedClient) -> None:
    with http_server() as server:
        client.send("GET", url(server, "/r?q=1"), headers={"Accept": "text/plain"}, flags=LOOPBACK)
        client.send("PUT", url(server), headers={}, content=b"abc", flags=LOOPBACK)
        client.send("PATCH", url(server), headers={}, flags=LOOPBACK)
    read, write, empty_write = server.seen
    assert read.path == "/r?q=1"
    assert read.headers["host"] == f"127.0.0.1:{server.port}"
    assert read.headers["accept"] == "text/plain"
    assert read.headers["accept-encoding"] == "identity"
    assert read.headers["user-agent"].startswith("undogate/")
    assert "content-length" not in read.headers
    assert write.headers["content-length"] == "3"
    assert empty_write.headers["content-length"] == "0"


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Label": "caf\u00e9"},  # not ASCII
        {"X-Label": "a\r\nX-Injected: 1"},  # a second header smuggled in
        {"X-Label": "a\x00b"},
        {"Bad Name": "x"},  # not a token
        {"Content-Length": "0"},  # the body's framing is ours to set
        {"Transfer-Encoding": "chunked"},
    ],
)
def test_a_header_http_cannot_carry_is_certainly_not_sent(
    client: PinnedClient, headers: dict[str, str]
) -> None:
    with http_server() as server, pytest.raises(TransportFailure) as failure:
        client.send("PUT", url(server), headers=headers, content=b"{}", flags=LOOPBACK)
    assert failure.value.sent is False
    assert server.seen == []


def test_reads_reuse_a_connection_and_writes_get_a_fresh_one(client: PinnedClient) -> None:
    with http_server() as server:
        for _ in range(2):
            client.send("GET", url(server), headers={}, flags=LOOPBACK)
        for _ in range(2):
            client.send(
                "PATCH",
                url(server),
                headers={},
                content=b"{}",
                flags=LOOPBACK,
                fresh_connection=True,
            )
    read_a, read_b, write_a, write_b = (s.client_port for s in server.seen)
    assert read_a == read_b
    assert len({read_a, write_a, write_b}) == 3


def test_a_refused_connection_is_certainly_not_sent(client: PinnedClient) -> None:
    with silent_listener() as port:
        pass  # closed again: nothing listens on this port now
    with pytest.raises(TransportFailure) as info:
        client.send("PATCH", f"http://127.0.0.1:{port}/r", headers={}, flags=LOOPBACK)
    assert info.value.sent is False


def test_a_hanging_server_hits_the_request_timeout() -> None:
    http = PinnedClient(request_timeout_s=0.3)
    try:
        with silent_listener() as port:
            started = time.monotonic()
            with pytest.raises(TransportFailure) as info:
                http.send("GET", f"http://127.0.0.1:{port}/r", headers={}, flags=LOOPBACK)
            elapsed = time.monotonic() - started
    finally:
        http.close()
    assert info.value.sent is True
    assert "timed out" in info.value.reason
    assert 0.2 < elapsed < 3.0


def test_the_operation_deadline_shortens_the_request(client: PinnedClient) -> None:
    with silent_listener() as port:
        started = time.monotonic()
        with pytest.raises(TransportFailure) as info:
            client.send(
                "PATCH",
                f"http://127.0.0.1:{port}/r",
                headers={},
                content=b"{}",
                flags=LOOPBACK,
                deadline=started + 0.3,
                fresh_connection=True,
            )
        elapsed = time.monotonic() - started
    assert info.value.sent is True
    assert elapsed < 3.0


def test_an_expired_deadline_sends_nothing(client: PinnedClient) -> None:
    with http_server() as server, pytest.raises(TransportFailure) as info:
        client.send("GET", url(server), headers={}, flags=LOOPBACK, deadline=time.monotonic() - 1)
    assert info.value.sent is False
    assert server.seen == []


def test_a_body_over_the_limit_is_a_failure_after_sending(client: PinnedClient) -> None:
    with http_server(Reply(body=b"x" * 100)) as server, pytest.raises(TransportFailure) as info:
        client.send("GET", url(server), headers={}, flags=LOOPBACK, max_body=10)
    assert info.value.sent is True


def test_proxies_from_the_environment_are_ignored(
    client: PinnedClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    with silent_listener() as trap:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
            monkeypatch.setenv(name, f"http://127.0.0.1:{trap}")
        http = PinnedClient(request_timeout_s=2.0)
        try:
            with http_server() as server:
                response = http.send("GET", url(server), headers={}, flags=LOOPBACK)
        finally:
            http.close()
    assert response.status == 200
    assert len(server.seen) == 1


# -- TLS, pinning and SNI ----------------------------------------------------------------

NAME = "records.test"
EXTRA = ["127.0.0.1/32"]  # the test-only door: config can never set it


@dataclass
class LocalCA:
    bundle: Path
    server_context: ssl.SSLContext
    server_names: list[str | None]


@pytest.fixture
def local_ca(tmp_path: Path) -> LocalCA:
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(NAME).configure_cert(context)
    names: list[str | None] = []

    def remember(sock: Any, server_name: str | None, ctx: ssl.SSLContext) -> None:
        names.append(server_name)

    context.sni_callback = remember
    return LocalCA(bundle, context, names)


class CountingResolver:
    """Answers from a script: the first call gets ``answers[0]``, later calls the rest."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


def tls_url(server: _Server, host: str = NAME) -> str:
    return f"https://{host}:{server.port}/r"


def test_an_untrusted_certificate_is_refused_before_sending(local_ca: LocalCA) -> None:
    resolver = CountingResolver(["127.0.0.1"])
    http = PinnedClient(resolver=resolver, extra_allowed=EXTRA)
    try:
        with (
            http_server(tls=local_ca.server_context) as server,
            pytest.raises(TransportFailure) as info,
        ):
            http.send("GET", tls_url(server), headers={}, flags=DEFAULT)
    finally:
        http.close()
    assert info.value.sent is False
    assert "certificate" in info.value.reason
    assert server.seen == []


def test_the_ssl_cert_file_variable_does_not_widen_trust(
    local_ca: LocalCA, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(local_ca.bundle))
    http = PinnedClient(resolver=CountingResolver(["127.0.0.1"]), extra_allowed=EXTRA)
    try:
        with (
            http_server(tls=local_ca.server_context) as server,
            pytest.raises(TransportFailure) as info,
        ):
            http.send("GET", tls_url(server), headers={}, flags=DEFAULT)
    finally:
        http.close()
    assert info.value.sent is False


def test_a_configured_bundle_is_trusted_and_the_pinned_connection_keeps_sni_and_host(
    local_ca: LocalCA,
) -> None:
    resolver = CountingResolver(["127.0.0.1"])
    http = PinnedClient(ca_bundle=local_ca.bundle, resolver=resolver, extra_allowed=EXTRA)
    try:
        with http_server(tls=local_ca.server_context) as server:
            response = http.send("GET", tls_url(server), headers={}, flags=DEFAULT)
    finally:
        http.close()
    assert response.status == 200
    assert response.address == "127.0.0.1"
    assert local_ca.server_names == [NAME]
    assert server.seen[0].headers["host"] == f"{NAME}:{server.port}"
    assert resolver.calls == [(NAME, server.port)]


def test_the_certificate_is_checked_against_the_configured_name(local_ca: LocalCA) -> None:
    resolver = CountingResolver(["127.0.0.1"])
    http = PinnedClient(ca_bundle=local_ca.bundle, resolver=resolver, extra_allowed=EXTRA)
    try:
        with (
            http_server(tls=local_ca.server_context) as server,
            pytest.raises(TransportFailure) as info,
        ):
            http.send("GET", tls_url(server, "other.test"), headers={}, flags=DEFAULT)
    finally:
        http.close()
    assert info.value.sent is False
    assert local_ca.server_names == ["other.test"]
    assert server.seen == []


@pytest.fixture
def getaddrinfo_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every host the process asks the system resolver about."""
    calls: list[str] = []
    real: Callable[..., Any] = socket.getaddrinfo

    def spy(host: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(str(host))
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", spy)
    return calls


def test_dns_rebinding_never_gets_a_second_answer_in(
    local_ca: LocalCA, getaddrinfo_calls: list[str]
) -> None:
    # The first answer passes the policy; every later one is the metadata address.
    resolver = CountingResolver(["127.0.0.1"], ["169.254.169.254"])
    http = PinnedClient(ca_bundle=local_ca.bundle, resolver=resolver, extra_allowed=EXTRA)
    try:
        with http_server(tls=local_ca.server_context) as server:
            response = http.send("GET", tls_url(server), headers={}, flags=DEFAULT)
            assert response.address == "127.0.0.1"
            assert len(resolver.calls) == 1
            assert len(server.seen) == 1
            # the name is never handed to the system resolver: only the pinned literal is
            assert NAME not in getaddrinfo_calls
            assert "127.0.0.1" in getaddrinfo_calls
            assert set(getaddrinfo_calls) <= {"127.0.0.1"}
            # the next request resolves again, sees the rebound answer and sends nothing,
            # although a pooled connection to the old address is still open
            with pytest.raises(BlockedAddress):
                http.send("GET", tls_url(server), headers={}, flags=DEFAULT)
            assert len(resolver.calls) == 2
            assert len(server.seen) == 1
    finally:
        http.close()


def test_a_name_with_one_public_and_one_loopback_answer_is_refused(
    getaddrinfo_calls: list[str],
) -> None:
    resolver = CountingResolver(["93.184.216.34", "127.0.0.1"])
    http = PinnedClient(resolver=resolver)
    try:
        with pytest.raises(BlockedAddress) as info:
            http.send("GET", "https://rebind.example/r", headers={}, flags=DEFAULT)
    finally:
        http.close()
    assert info.value.details["address"] == "127.0.0.1"
    assert len(resolver.calls) == 1
    assert getaddrinfo_calls == []


def test_a_slow_resolver_is_bounded_by_the_request_timeout() -> None:
    release = threading.Event()

    def stuck(host: str, port: int) -> list[str]:
        release.wait(5)
        return ["93.184.216.34"]

    http = PinnedClient(request_timeout_s=0.2, resolver=stuck)
    started = time.monotonic()
    try:
        with pytest.raises(TransportFailure) as info:
            http.send("GET", "https://slow.example/r", headers={}, flags=DEFAULT)
    finally:
        release.set()
        http.close()
    assert info.value.sent is False
    assert time.monotonic() - started < 3.0


def test_a_compressed_body_is_never_decompressed(client: PinnedClient) -> None:
    import gzip

    bomb = gzip.compress(b"0" * (4 * 1024 * 1024))  # 4 MiB of zeros, a few KiB on the wire
    with http_server(Reply(body=bomb, headers=[("Content-Encoding", "gzip")])) as server:
        response = client.send("GET", url(server), headers={}, flags=LOOPBACK, max_body=64 * 1024)
    assert response.body == bomb  # the raw bytes, as sent
    assert response.headers["content-encoding"] == "gzip"
