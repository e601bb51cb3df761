"""All remote traffic goes through here: one pinned client, no redirects, no retries.

``RemoteHTTP.send`` is the only way adapters reach a server. For each request it:

1. parses the URL once (``httpx.URL``) and checks its spelling (``check_url``): scheme,
   no user-info or fragment, and no numeric host that is not a canonical IP address
   (``2130706433``, ``0x7f000001``, ``127.1``, ``0177.0.0.1``...);
2. resolves the host **once** and checks **every** address with the address policy
   (``address_verdict``); one refused address refuses the name;
3. connects only to the checked addresses through a network backend that ignores
   the name it is handed (``_PinnedBackend``), while the request keeps the original
   ``Host`` header and TLS server name, so certificates are verified for the
   configured name and DNS rebinding never gets a second answer in.

It distinguishes a request that certainly never left (``TransportFailure(sent=False)``)
from one whose fate is unknown (``sent=True``), because the engine records the first
as a certain refusal and the second as ``uncertain``. A policy refusal raises
``BlockedAddress`` before anything is sent.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeAlias

import httpcore
import httpx

from . import __version__
from .errors import BlockedAddress

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver: TypeAlias = Callable[[str, int], list[str]]
"""``resolver(host, port)`` returns every address of ``host`` as text, in preference order."""


@dataclass(frozen=True)
class NetworkFlags:
    """What the operator opened for one resource (SPEC §7)."""

    allow_private_host: bool = False
    allow_loopback_http: bool = False


@dataclass(frozen=True)
class RemoteResponse:
    status: int
    headers: httpx.Headers
    body: bytes
    address: str | None


class TransportFailure(Exception):
    """The request failed below HTTP. ``sent`` is False only when nothing left this host."""

    def __init__(self, reason: str, *, sent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent = sent


# -- the address policy ------------------------------------------------------------------


class AddressClass(StrEnum):
    """What an address is, by the policy's own table (not ``ipaddress.is_*``)."""

    GLOBAL = "global"
    LOOPBACK = "loopback"
    PRIVATE = "private"
    SHARED = "shared"  # 100.64.0.0/10, carrier-grade NAT
    LINK_LOCAL = "link-local"
    METADATA = "cloud metadata"
    UNSPECIFIED = "unspecified"
    MULTICAST = "multicast"
    BROADCAST = "broadcast"
    RESERVED = "reserved"
    SITE_LOCAL = "site-local"
    SPECIAL = "special-purpose"  # documentation, benchmarking, protocol assignments
    INVALID = "invalid"


ALWAYS_BLOCKED = frozenset(
    {
        AddressClass.LINK_LOCAL,
        AddressClass.METADATA,
        AddressClass.UNSPECIFIED,
        AddressClass.MULTICAST,
        AddressClass.BROADCAST,
        AddressClass.RESERVED,
        AddressClass.SITE_LOCAL,
        AddressClass.SPECIAL,
        AddressClass.INVALID,
    }
)


def _table(*rows: tuple[str, AddressClass]) -> tuple[tuple[IPNetwork, AddressClass], ...]:
    return tuple((ipaddress.ip_network(net), cls) for net, cls in rows)


# First match wins: the specific entries (metadata, broadcast) come before their ranges.
IPV4_TABLE = _table(
    ("169.254.169.254/32", AddressClass.METADATA),  # AWS, GCP, Azure, OpenStack...
    ("169.254.170.2/32", AddressClass.METADATA),  # AWS ECS task credentials
    ("100.100.100.200/32", AddressClass.METADATA),  # Alibaba Cloud
    ("192.0.0.192/32", AddressClass.METADATA),  # Oracle Cloud
    ("255.255.255.255/32", AddressClass.BROADCAST),
    ("0.0.0.0/8", AddressClass.UNSPECIFIED),  # "this network"; 0.0.0.0 reaches this host
    ("127.0.0.0/8", AddressClass.LOOPBACK),
    ("169.254.0.0/16", AddressClass.LINK_LOCAL),
    ("10.0.0.0/8", AddressClass.PRIVATE),
    ("172.16.0.0/12", AddressClass.PRIVATE),
    ("192.168.0.0/16", AddressClass.PRIVATE),
    ("100.64.0.0/10", AddressClass.SHARED),
    ("192.0.0.0/24", AddressClass.SPECIAL),  # IETF protocol assignments
    ("192.0.2.0/24", AddressClass.SPECIAL),  # TEST-NET-1
    ("198.51.100.0/24", AddressClass.SPECIAL),  # TEST-NET-2
    ("203.0.113.0/24", AddressClass.SPECIAL),  # TEST-NET-3
    ("198.18.0.0/15", AddressClass.SPECIAL),  # benchmarking
    ("192.88.99.0/24", AddressClass.SPECIAL),  # deprecated 6to4 relay anycast
    ("224.0.0.0/4", AddressClass.MULTICAST),
    ("240.0.0.0/4", AddressClass.RESERVED),
)

IPV6_TABLE = _table(
    ("fd00:ec2::254/128", AddressClass.METADATA),  # AWS IMDS over IPv6
    ("::/128", AddressClass.UNSPECIFIED),
    ("::1/128", AddressClass.LOOPBACK),
    ("::ffff:0:0:0/96", AddressClass.SPECIAL),  # SIIT translated addresses
    ("64:ff9b:1::/48", AddressClass.SPECIAL),  # local-use NAT64
    ("100::/64", AddressClass.SPECIAL),  # discard-only
    ("2001::/23", AddressClass.SPECIAL),  # IETF protocol assignments (Teredo unwrapped first)
    ("2001:db8::/32", AddressClass.SPECIAL),  # documentation
    ("3fff::/20", AddressClass.SPECIAL),  # documentation (RFC 9637)
    ("5f00::/16", AddressClass.SPECIAL),  # SRv6 SIDs
    ("fe80::/10", AddressClass.LINK_LOCAL),
    ("fec0::/10", AddressClass.SITE_LOCAL),
    ("fc00::/7", AddressClass.PRIVATE),
    ("ff00::/8", AddressClass.MULTICAST),
)
_IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_IPV4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIXTOFOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")


@dataclass(frozen=True)
class AddressVerdict:
    """The policy's answer for one address: what it is and whether it may be used."""

    address: str
    effective: str  # the address after unwrapping an embedded IPv4 form
    category: AddressClass
    allowed: bool
    reason: str
    embedded_as: str | None = None  # "IPv4-mapped", "NAT64", ... when unwrapped


def _classify_plain(ip: IPAddress) -> AddressClass:
    table = IPV4_TABLE if ip.version == 4 else IPV6_TABLE
    for network, category in table:
        if ip in network:
            return category
    if ip.version == 6 and ip not in _IPV6_GLOBAL_UNICAST:
        return AddressClass.RESERVED  # IANA has allocated no unicast outside 2000::/3
    return AddressClass.GLOBAL


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries (every one must pass the policy)."""
    value = int(ip)
    if ip in _IPV4_MAPPED:
        return [("IPv4-mapped", ipaddress.IPv4Address(value & 0xFFFFFFFF))]
    if ip in _IPV4_COMPATIBLE and value > 1:
        return [("IPv4-compatible", ipaddress.IPv4Address(value & 0xFFFFFFFF))]
    if ip in _NAT64:
        return [("NAT64", ipaddress.IPv4Address(value & 0xFFFFFFFF))]
    if ip in _SIXTOFOUR:
        return [("6to4", ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF))]
    if ip in _TEREDO:
        teredo = ip.teredo
        if teredo is not None:
            server, client = teredo
            return [("Teredo client", client), ("Teredo server", server)]
    return []


def _parse_networks(networks: Iterable[str | IPNetwork]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(n) if isinstance(n, str) else n for n in networks)


def address_verdict(
    address: str | IPAddress,
    flags: NetworkFlags,
    *,
    scheme: str = "https",
    literal: bool = False,
    extra_allowed: Iterable[str | IPNetwork] = (),
) -> AddressVerdict:
    """Judge one address under SPEC §7. Pure: no sockets, no DNS.

    ``literal`` says the URL's host *is* this address (not a name resolving to it):
    loopback is allowed only for a literal, plain (not embedded) loopback address over
    ``http`` with ``allow_loopback_http``. ``extra_allowed`` (tests only, never from
    config) opens loopback, private and shared networks; it never opens an
    always-blocked class such as metadata or link-local.
    """
    text = str(address)
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return AddressVerdict(text, text, AddressClass.INVALID, False, "not an IP address")
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        return AddressVerdict(text, text, AddressClass.INVALID, False, "a scoped (zone id) address")
    targets: list[tuple[str | None, IPAddress]] = [(None, ip)]
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded:
            targets = [(kind, v4) for kind, v4 in embedded]
    verdicts = [
        _judge(text, target, kind, flags, scheme, literal, _parse_networks(extra_allowed))
        for kind, target in targets
    ]
    return next((v for v in verdicts if not v.allowed), verdicts[0])


def _judge(
    text: str,
    ip: IPAddress,
    embedded_as: str | None,
    flags: NetworkFlags,
    scheme: str,
    literal: bool,
    extra: tuple[IPNetwork, ...],
) -> AddressVerdict:
    category = _classify_plain(ip)
    shown = f"{text} ({embedded_as} {ip})" if embedded_as else text

    def verdict(allowed: bool, reason: str) -> AddressVerdict:
        return AddressVerdict(text, str(ip), category, allowed, reason, embedded_as)

    article = "an" if category.value[0] in "aeiou" else "a"
    if category in ALWAYS_BLOCKED:
        return verdict(False, f"{shown} is {article} {category.value} address, always blocked")
    if category is AddressClass.GLOBAL:
        return verdict(True, f"{shown} is globally routable")
    if any(ip.version == net.version and ip in net for net in extra):
        return verdict(True, f"{shown} is in a network the test set-up opened")
    if category is AddressClass.LOOPBACK:
        if not flags.allow_loopback_http:
            return verdict(False, f"{shown} is loopback; only allow_loopback_http opens it")
        if scheme != "http" or not literal or embedded_as:
            return verdict(
                False,
                f"{shown} is loopback; allow_loopback_http opens only http:// to a literal "
                "loopback address such as 127.0.0.1 (never a name, never https)",
            )
        return verdict(True, f"{shown} is a literal loopback address and allow_loopback_http")
    if not flags.allow_private_host:
        return verdict(
            False, f"{shown} is {article} {category.value} address; allow_private_host opens it"
        )
    return verdict(True, f"{shown} is {category.value} and allow_private_host")


# -- URL spelling and resolution ---------------------------------------------------------

_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$", re.IGNORECASE)
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_CANONICAL_IPV4 = re.compile(rf"^{_OCTET}(?:\.{_OCTET}){{3}}$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class PinnedTarget:
    """A URL that passed the policy, with the checked addresses to connect to."""

    url: httpx.URL
    scheme: str
    host: str  # ASCII (IDNA) form, as sent in Host and TLS server name
    port: int
    addresses: tuple[str, ...]
    literal: bool


def system_resolver(host: str, port: int) -> list[str]:
    """Every TCP address of ``host`` from the system resolver, in its order.

    Raises:
        OSError: the name does not resolve.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


def _literal_host(host: str) -> IPAddress | None:
    """The host as an IP address when it is numeric; refuses ambiguous numeric spellings.

    Raises:
        BlockedAddress: a numeric host that is not a canonical IP address.
    """
    if "%" in host:
        raise BlockedAddress(f"the host {host!r} carries a zone id; refused")
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            raise BlockedAddress(f"the host {host!r} is not a valid IPv6 address") from None
    if host.endswith("."):
        raise BlockedAddress(f"the host {host!r} ends in a dot; write it without one")
    labels = host.split(".")
    if any(not label for label in labels):
        raise BlockedAddress(f"the host {host!r} has an empty label")
    if _NUMERIC_LABEL.match(labels[-1]):
        if not _CANONICAL_IPV4.match(host):
            raise BlockedAddress(
                f"the host {host!r} is numeric but not a canonical IPv4 address "
                "(decimal, hex, octal and shortened forms are refused)"
            )
        return ipaddress.IPv4Address(host)
    return None


def host_spelling_problem(host: str) -> str | None:
    """Why a URL host spelling is refused (no DNS), or None; for config validation."""
    try:
        _literal_host(host.lower())
    except BlockedAddress as exc:
        return exc.message
    return None


def check_url(
    url: str | httpx.URL,
    flags: NetworkFlags,
    resolver: Resolver = system_resolver,
    *,
    extra_allowed: Iterable[str | IPNetwork] = (),
) -> PinnedTarget:
    """Parse ``url`` once, check its spelling, resolve its host once and check every address.

    The returned target carries the parsed ``httpx.URL`` that must be the one sent.

    Raises:
        BlockedAddress: the URL or any of its host's addresses is refused (nothing sent).
        TransportFailure: the name did not resolve (``sent=False``).
    """
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise BlockedAddress(f"the URL is not valid: {exc}") from None
    scheme = parsed.scheme
    if scheme not in _DEFAULT_PORTS:
        raise BlockedAddress(f"the scheme {scheme!r} is refused; use https")
    if parsed.userinfo:
        raise BlockedAddress("a URL must not carry user-info; use token_env")
    if parsed.fragment:
        raise BlockedAddress("a URL must not carry a fragment")
    host = parsed.raw_host.decode("ascii").lower()
    if not host:
        raise BlockedAddress("the URL names no host")
    literal_ip = _literal_host(host)
    port = _DEFAULT_PORTS[scheme] if parsed.port is None else parsed.port
    if not 0 < port < 65536:
        raise BlockedAddress(f"the port {port} is refused")
    plain_loopback = literal_ip is not None and _classify_plain(literal_ip) is AddressClass.LOOPBACK
    if scheme == "http" and not (flags.allow_loopback_http and plain_loopback):
        raise BlockedAddress(
            f"http to {host} is refused: plain http is allowed only to a literal loopback "
            "address with allow_loopback_http"
        )
    if literal_ip is not None:
        answers = [str(literal_ip)]
    else:
        try:
            answers = list(resolver(host, port))
        except TransportFailure:
            raise
        except (OSError, UnicodeError, ValueError) as exc:
            raise TransportFailure(
                f"could not resolve {host}: {type(exc).__name__}", sent=False
            ) from None
    addresses = tuple(dict.fromkeys(answers))
    if not addresses:
        raise TransportFailure(f"{host} resolved to no address", sent=False)
    for address in addresses:
        verdict = address_verdict(
            address,
            flags,
            scheme=scheme,
            literal=literal_ip is not None,
            extra_allowed=extra_allowed,
        )
        if not verdict.allowed:
            raise BlockedAddress(
                f"refused to connect to {host}: {verdict.reason}",
                host=host,
                address=verdict.address,
                category=verdict.category.value,
            )
    pinned = tuple(str(ipaddress.ip_address(a)) for a in addresses)
    return PinnedTarget(parsed, scheme, host, port, pinned, literal_ip is not None)


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
    if isinstance(peer, tuple) and peer:
        try:
            return str(ipaddress.ip_address(peer[0]))
        except ValueError:
            pass
    return target.addresses[0] if len(target.addresses) == 1 else None


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
    if content is not None or method in ("POST", "PUT", "PATCH"):
        lines.append((b"Content-Length", str(len(content or b"")).encode("ascii")))
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


class RemoteHTTP:
    """The one client factory for remote traffic (SPEC §7).

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
        self._extra_allowed = _parse_networks(extra_allowed)
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
    ) -> RemoteResponse:
        """Check, resolve once, connect to the checked address, and read a bounded body.

        The time allowed is ``min(request_timeout_s, deadline - now)``, resolution included.

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
            try:
                body = bytearray()
                for chunk in response.iter_stream():
                    body.extend(chunk)
                    if len(body) > max_body:
                        raise TransportFailure("response body over the size limit", sent=True)
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


__all__ = [
    "ALWAYS_BLOCKED",
    "AddressClass",
    "AddressVerdict",
    "BlockedAddress",
    "NetworkFlags",
    "PinnedTarget",
    "RemoteHTTP",
    "RemoteResponse",
    "Resolver",
    "TransportFailure",
    "address_verdict",
    "check_url",
    "host_spelling_problem",
    "system_resolver",
]
