"""The pinned client: the one way adapters reach a server. No redirects, no retries.

``PinnedClient.send`` checks the URL with the policy (``check_url``: one resolution, every
address judged), then connects only to the checked addresses through a network backend
that ignores the name it is handed (``_PinnedBackend``), while the request keeps the
original ``Host`` header and TLS server name, so certificates are verified for the
configured name and DNS rebinding never gets a second answer in.

httpcore's errors are mapped here, once, to ``TransportFailure``: ``sent=False`` when the
request certainly never left, ``sent=True`` when its fate is unknown.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import re
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import httpcore
import httpx

from .. import __version__
from ..errors import BlockedAddress
from .errors import ResponseTooLarge, TransportFailure
from .policy import IPNetwork, NetworkFlags, PinnedTarget, check_url, parse_networks
from .resolve import Resolver, system_resolver


@dataclass(frozen=True)
class RemoteResponse:
    status: int
    headers: httpx.Headers
    body: bytes
    address: str | None


# -- the pinned transport ----------------------------------------------------------------


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects to the checked addresses only, whatever name httpcore hands it."""

    def __init__(self, target: PinnedTarget) -> None:
        self._target = target
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        if host.lower() != self._target.host or port != self._target.port:
            raise httpcore.ConnectError("the connection is not to the checked host")
        failure: Exception | None = None
        for address in self._target.addresses:
            try:
                return self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not used for remote traffic")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _pinned_pool(target: PinnedTarget, ssl_context: ssl.SSLContext) -> httpcore.ConnectionPool:
    """An httpcore pool whose every connection goes to ``target``'s checked addresses."""
    return httpcore.ConnectionPool(
        ssl_context=ssl_context,
        max_connections=10,
        max_keepalive_connections=5,
        keepalive_expiry=5.0,
        http1=True,
        http2=False,
        retries=0,
        network_backend=_PinnedBackend(target),
    )


_PoolKey: TypeAlias = tuple[str, str, int, tuple[str, ...]]


class _PinnedPools:
    """One keep-alive pool per checked (origin, addresses); the least recently used go."""

    max_pools = 32

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        self.ssl_context = ssl_context
        self._pools: OrderedDict[_PoolKey, httpcore.ConnectionPool] = OrderedDict()
        self._lock = threading.Lock()

    def for_target(self, target: PinnedTarget) -> httpcore.ConnectionPool:
        key = (target.scheme, target.host, target.port, target.addresses)
        evicted: list[httpcore.ConnectionPool] = []
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                pool = self._pools[key] = _pinned_pool(target, self.ssl_context)
            self._pools.move_to_end(key)
            while len(self._pools) > self.max_pools:
                evicted.append(self._pools.popitem(last=False)[1])
        for old in evicted:
            old.close()
        return pool

    def close(self) -> None:
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.close()


def _ssl_context(ca_bundle: Path | None) -> ssl.SSLContext:
    if ca_bundle is None:
        return httpx.create_ssl_context(verify=True, trust_env=False)
    return ssl.create_default_context(cafile=str(ca_bundle))


def _connect_reason(exc: Exception) -> str:
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        return "could not connect: the TLS certificate was not trusted or did not match"
    if isinstance(exc, httpcore.ConnectTimeout | httpcore.PoolTimeout):
        return f"could not connect: timed out ({type(exc).__name__})"
    return f"could not connect: {type(exc).__name__}"


def _fate_unknown(exc: Exception) -> TransportFailure:
    """An httpcore failure once the request may have left: whether it arrived is unknown."""
    if isinstance(exc, httpcore.TimeoutException):
        return TransportFailure(f"timed out: {type(exc).__name__}", sent=True)
    return TransportFailure(f"transport error: {type(exc).__name__}", sent=True)


def _peer_address(response: httpcore.Response, target: PinnedTarget) -> str | None:
    """The address the connection actually reached (one of the checked ones)."""
    stream = response.extensions.get("network_stream")
    try:
        peer = stream.get_extra_info("server_addr") if stream is not None else None
    except OSError:
        peer = None
    if isinstance(peer, tuple) and peer and isinstance(peer[0], str):
        found = _canonical_address(peer[0])
        if found is not None:
            return found
    return target.addresses[0] if len(target.addresses) == 1 else None


@functools.lru_cache(maxsize=1024)
def _canonical_address(text: str) -> str | None:
    """``text`` as ``ipaddress`` writes it, or None. Cached: a peer is parsed on every
    request, and a gateway talks to few addresses."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


_HTTPCORE_ERRORS = (
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
    httpcore.TimeoutException,
)
_USER_AGENT = f"undogate/{__version__}".encode("ascii")
_TOKEN_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FORBIDDEN_IN_VALUE = re.compile(r"[\x00\r\n]")


def sent_url(url: str) -> str:
    """``url`` exactly as this client sends it (httpx's parse: percent-encoded path, the
    IDNA form of the host, no default port): what a signature over a request covers."""
    return str(httpx.URL(url))


def body_framing(method: str, content: bytes | None) -> dict[str, str]:
    """The framing this client adds to a request: the body's ``Content-Length`` (an
    empty body's, on a POST, PUT or PATCH without one)."""
    if content is not None or method in ("POST", "PUT", "PATCH"):
        return {"Content-Length": str(len(content or b""))}
    return {}


def _request(
    method: str,
    target: PinnedTarget,
    headers: dict[str, str],
    content: bytes | None,
    timeout: float,
) -> httpcore.Request:
    """The request for ``target``, with the headers an HTTP/1.1 client must send.

    ``Host`` is the checked name (with its port when not the default); httpcore adds no
    header of its own. Header text must be ASCII, and is checked here so that a header
    HTTP/1.1 cannot carry is refused before a connection is opened.

    Raises:
        UnicodeEncodeError: a header name or value is not ASCII.
        ValueError: a name that is not a token, a value with CR, LF or NUL, or a
            caller's own Content-Length or Transfer-Encoding.
    """
    url = target.url
    lines: list[tuple[bytes, bytes]] = [
        (b"Host", url.netloc),
        (b"User-Agent", _USER_AGENT),
        (b"Accept", b"*/*"),
        # identity: the ETag is of the representation we read; no decompression bomb
        (b"Accept-Encoding", b"identity"),
    ]
    given = {name.lower() for name in headers}
    if given & {"content-length", "transfer-encoding"}:
        raise ValueError("the body's framing is set here, not by the caller")
    lines = [(name, value) for name, value in lines if name.decode().lower() not in given]
    for name, value in headers.items():
        if not _TOKEN_RE.fullmatch(name) or _FORBIDDEN_IN_VALUE.search(value):
            raise ValueError("a header name or value that HTTP/1.1 cannot carry")
        lines.append((name.encode("ascii"), value.encode("ascii")))
    lines.extend(
        (k.encode("ascii"), v.encode("ascii")) for k, v in body_framing(method, content).items()
    )
    return httpcore.Request(
        method.encode("ascii"),
        httpcore.URL(
            scheme=target.scheme.encode("ascii"),
            host=target.host.encode("ascii"),
            port=target.port,
            target=url.raw_path,
        ),
        headers=lines,
        content=content,
        extensions={
            "timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
        },
    )


class PinnedClient:
    """The one client factory for remote traffic (docs/security.md).

    No proxies or certificate settings from the environment (an explicit TLS context,
    pools without a proxy), no redirects followed (a 3xx is returned as a response), no
    retries, certificate verification against the system bundle or ``ca_bundle``.
    ``resolver`` and ``extra_allowed`` exist for tests: production code passes neither,
    and the config has no way to set them.
    """

    def __init__(
        self,
        *,
        request_timeout_s: float = 8.0,
        ca_bundle: Path | None = None,
        resolver: Resolver | None = None,
        extra_allowed: Iterable[str | IPNetwork] = (),
    ) -> None:
        self.request_timeout_s = request_timeout_s
        self._resolver = resolver or system_resolver
        self._extra_allowed = parse_networks(extra_allowed)
        self._pools = _PinnedPools(_ssl_context(ca_bundle))
        self._literal_targets: dict[tuple[str, NetworkFlags], PinnedTarget] = {}

    def close(self) -> None:
        self._pools.close()

    def _budget(self, started: float, deadline: float | None) -> float:
        now = time.monotonic()
        budget = self.request_timeout_s - (now - started)
        if deadline is not None:
            budget = min(budget, deadline - now)
        if budget <= 0:
            raise TransportFailure("the operation ran out of time before sending", sent=False)
        return budget

    def _resolve_within(self, timeout: float) -> Resolver:
        def resolve(host: str, port: int) -> list[str]:
            box: dict[str, Any] = {}
            done = threading.Event()

            def run() -> None:
                try:
                    box["answers"] = list(self._resolver(host, port))
                except Exception as exc:  # translated below
                    box["error"] = exc
                finally:
                    done.set()

            threading.Thread(target=run, name="undogate-resolve", daemon=True).start()
            if not done.wait(timeout):
                raise TransportFailure(f"resolving {host} timed out", sent=False)
            if "error" in box:
                error = box["error"]
                raise TransportFailure(
                    f"could not resolve {host}: {type(error).__name__}", sent=False
                )
            answers: list[str] = box["answers"]
            return answers

        return resolve

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        content: bytes | None = None,
        flags: NetworkFlags,
        deadline: float | None = None,
        fresh_connection: bool = False,
        max_body: int = 1024 * 1024,
        read_body: bool = True,
    ) -> RemoteResponse:
        """Check, resolve once, connect to the checked address, and read a bounded body.

        The time allowed is ``min(request_timeout_s, deadline - now)``, resolution included.
        ``read_body=False`` answers with the status and headers as soon as they arrive and
        an empty body: whatever follows them is never read, so it can neither delay nor
        fail the request (a webhook's receiver).

        Raises:
            BlockedAddress: the URL or an address of its host is refused (nothing sent).
            TransportFailure: the request failed below HTTP; ``sent`` says whether
                anything may have left.
        """
        started = time.monotonic()
        if any(name.lower() == "host" for name in headers):
            raise BlockedAddress("a request must not set its own Host header")
        budget = self._budget(started, deadline)
        target = self._literal_targets.get((url, flags))
        if target is None:
            target = check_url(
                url, flags, self._resolve_within(budget), extra_allowed=self._extra_allowed
            )
            if target.literal:
                # A literal address needs no DNS, so its verdict cannot change: keep it.
                # Names are resolved and checked on every request (rebinding).
                self._literal_targets[(url, flags)] = target
        budget = self._budget(started, deadline)
        ends_at = time.monotonic() + budget
        try:
            request = _request(method, target, headers, content, budget)
        except (UnicodeError, ValueError, TypeError) as exc:
            raise TransportFailure(f"not sent: {type(exc).__name__}", sent=False) from None
        # Straight to httpcore: no cookie jar (a Set-Cookie from one resource must never
        # ride along on the next request to that host), no auth flow, no redirects, no
        # decompression; and far less CPU per request than an httpx client.
        pool_scope = (
            _pinned_pool(target, self._pools.ssl_context)  # closed on leaving: one use
            if fresh_connection
            else contextlib.nullcontext(self._pools.for_target(target))
        )
        with pool_scope as pool:
            try:
                response = pool.handle_request(request)
            except (httpcore.ConnectError, httpcore.ConnectTimeout, httpcore.PoolTimeout) as exc:
                raise TransportFailure(_connect_reason(exc), sent=False) from None
            except httpcore.UnsupportedProtocol as exc:
                raise TransportFailure(f"not sent: {exc}", sent=False) from None
            except _HTTPCORE_ERRORS as exc:
                raise _fate_unknown(exc) from None
            address = _peer_address(response, target)
            body = bytearray()
            try:
                for chunk in response.iter_stream() if read_body else ():
                    body.extend(chunk)
                    if len(body) > max_body:
                        raise ResponseTooLarge("response body over the size limit", sent=True)
                    if time.monotonic() > ends_at:
                        raise TransportFailure("timed out reading the response body", sent=True)
            except _HTTPCORE_ERRORS as exc:
                raise _fate_unknown(exc) from None
            finally:
                response.close()
        return RemoteResponse(
            status=response.status,
            headers=httpx.Headers(response.headers),
            body=bytes(body),
            address=address,
        )
