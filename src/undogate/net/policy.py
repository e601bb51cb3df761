"""The address policy (docs/security.md) and the URL check: pure, no sockets, no DNS of its own.

``check_url`` parses a URL once, checks its spelling (scheme, no user-info or fragment,
no numeric host that is not a canonical IP address: ``2130706433``, ``0x7f000001``,
``127.1``, ``0177.0.0.1``...), resolves the host once through the resolver it is handed
(``system_resolver`` unless a test passes its own), and judges every address with
``address_verdict``; one refused address refuses the name.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias
from urllib.parse import urlsplit

import httpx

from ..errors import BlockedAddress
from .errors import TransportFailure
from .resolve import Resolver, system_resolver

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class NetworkFlags:
    """What the operator opened for one resource (docs/security.md)."""

    allow_private_host: bool = False
    allow_loopback_http: bool = False


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


def parse_networks(networks: Iterable[str | IPNetwork]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(n) if isinstance(n, str) else n for n in networks)


def address_verdict(
    address: str | IPAddress,
    flags: NetworkFlags,
    *,
    scheme: str = "https",
    literal: bool = False,
    extra_allowed: Iterable[str | IPNetwork] = (),
) -> AddressVerdict:
    """Judge one address under the address policy. Pure: no sockets, no DNS.

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
        _judge(text, target, kind, flags, scheme, literal, parse_networks(extra_allowed))
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


# -- URL spelling ----------------------------------------------------------------------

_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+", re.IGNORECASE)
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_CANONICAL_IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}")
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
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        if not _CANONICAL_IPV4.fullmatch(host):
            raise BlockedAddress(
                f"the host {host!r} is numeric but not a canonical IPv4 address "
                "(decimal, hex, octal and shortened forms are refused)"
            )
        return ipaddress.IPv4Address(host)
    return None


def is_loopback_literal(host: str) -> bool:
    """127.0.0.0/8 or ::1 exactly (``is_loopback`` also admits ::ffff:127.0.0.1 on newer
    Pythons, which the address policy refuses: config and runtime must agree)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv4Address):
        return ip in ipaddress.ip_network("127.0.0.0/8")
    return ip == ipaddress.IPv6Address("::1")


def host_spelling_problem(host: str) -> str | None:
    """Why a URL host spelling is refused (no DNS), or None; for config validation."""
    try:
        _literal_host(host.lower())
    except BlockedAddress as exc:
        return exc.message
    return None


def configured_url_problems(url: str, flags: NetworkFlags, *, userinfo: str) -> list[str]:
    """Why a URL from the config (a resource's or a webhook endpoint's) is refused before
    anything is sent, no DNS: its spelling, scheme, user-info (``userinfo`` says where
    the credential goes instead), fragment, host, port, the loopback-over-http rule, and
    a literal address the policy refuses under ``flags`` (169.254.169.254, 10.0.0.5
    without allow_private_host...). Callers add their own rules; at send time
    ``check_url`` judges every address a name resolves to."""
    if any(c.isspace() or ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        return ["must not contain spaces or control characters"]
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed "[" of an IPv6 host
        return ["is not a valid URL"]
    problems: list[str] = []
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        problems.append(f"scheme must be https (got {parts.scheme or 'none'!r})")
    if "@" in parts.netloc:
        problems.append(f"must not contain user-info ({userinfo})")
    if "#" in url:
        problems.append("must not contain a fragment")
    host = parts.hostname or ""
    if not host:
        problems.append("must name a host")
    elif problem := host_spelling_problem(host):
        problems.append(problem)
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        problems.append("has an invalid port")
    if scheme == "http":
        if not flags.allow_loopback_http:
            problems.append("http is allowed only with allow_loopback_http to a loopback address")
        elif not is_loopback_literal(host):
            problems.append(
                "allow_loopback_http needs a literal loopback address such as 127.0.0.1"
            )
    if scheme == "https" and flags.allow_loopback_http:
        problems.append("allow_loopback_http applies only to http:// loopback URLs")
    literal = _literal_host(host.lower()) if host and not problems else None
    if literal is not None:
        verdict = address_verdict(literal, flags, scheme=scheme, literal=True)
        if not verdict.allowed:
            problems.append(f"its address is refused by the network policy: {verdict.reason}")
    return problems


def url_host(url: str) -> str:
    """The host of ``url`` as the policy and the client spell it in their messages
    (ASCII, IDNA-encoded, lower case); "" when it is no URL."""
    try:
        return httpx.URL(url).raw_host.decode("ascii").lower()
    except httpx.InvalidURL:
        return ""


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
    host = parsed.raw_host.decode("ascii").lower()  # as url_host spells it
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
