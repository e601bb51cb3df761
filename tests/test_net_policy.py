"""The address policy (docs/security.md) as an attacker would probe it: pure, no sockets."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from undogate.errors import BlockedAddress
from undogate.net import (
    AddressClass,
    NetworkFlags,
    TransportFailure,
    address_verdict,
    check_url,
    host_spelling_problem,
)

from .fixtures.report import REPORT

# The four flag combinations, in this order, for every case below.
FLAGS = (
    NetworkFlags(allow_private_host=False, allow_loopback_http=False),
    NetworkFlags(allow_private_host=True, allow_loopback_http=False),
    NetworkFlags(allow_private_host=False, allow_loopback_http=True),
    NetworkFlags(allow_private_host=True, allow_loopback_http=True),
)
#            none   private loopback both
NEVER = (False, False, False, False)
ALWAYS = (True, True, True, True)
PRIVATE = (False, True, False, True)
LOOPBACK = (False, False, True, True)

PUBLIC_V4 = "93.184.216.34"

# (url, what the resolver answers for its host or None for a literal, verdict per flag set)
CASES: list[tuple[str, list[str] | None, tuple[bool, bool, bool, bool]]] = [
    # loopback: only http to a literal loopback address with allow_loopback_http
    ("http://127.0.0.1:8080/r", None, LOOPBACK),
    ("http://127.9.9.9/r", None, LOOPBACK),
    ("http://[::1]:8080/r", None, LOOPBACK),
    ("https://127.0.0.1/r", None, NEVER),
    ("https://[::1]/r", None, NEVER),
    ("http://localhost/r", ["127.0.0.1"], NEVER),
    ("https://loopy.example/r", ["127.0.0.1"], NEVER),
    ("https://loopy6.example/r", ["::1"], NEVER),
    ("https://sixtofour-loop.example/r", ["2002:7f00:1::"], NEVER),
    # classic numeric spellings of 127.0.0.1
    ("http://2130706433/r", None, NEVER),
    ("http://0x7f000001/r", None, NEVER),
    ("http://0x7f.0.0.1/r", None, NEVER),
    ("http://127.1/r", None, NEVER),
    ("http://0177.0.0.1/r", None, NEVER),
    ("http://127.000.000.001/r", None, NEVER),
    ("http://0/r", None, NEVER),
    ("http://127.0.0.1./r", None, NEVER),
    ("http://[::ffff:127.0.0.1]/r", None, NEVER),
    ("http://[::ffff:7f00:1]/r", None, NEVER),
    ("http://[::127.0.0.1]/r", None, NEVER),
    ("http://[64:ff9b::7f00:1]/r", None, NEVER),
    # unspecified
    ("http://[::]/r", None, NEVER),
    ("http://0.0.0.0/r", None, NEVER),
    ("https://0.0.0.0/r", None, NEVER),
    # cloud metadata, including its IPv6 and embedded spellings
    ("https://169.254.169.254/latest/meta-data", None, NEVER),
    ("http://169.254.169.254/latest/meta-data", None, NEVER),
    ("https://[::ffff:169.254.169.254]/r", None, NEVER),
    ("https://[::ffff:a9fe:a9fe]/r", None, NEVER),
    ("https://[64:ff9b::a9fe:a9fe]/r", None, NEVER),
    ("https://[2002:a9fe:a9fe::1]/r", None, NEVER),
    ("https://[2001:0:4136:e378:8000:63bf:5601:5601]/r", None, NEVER),  # Teredo
    ("https://[fd00:ec2::254]/r", None, NEVER),
    ("https://2852039166/latest", None, NEVER),
    ("https://metadata.example/r", ["169.254.169.254"], NEVER),
    ("https://ecs.example/r", ["169.254.170.2"], NEVER),
    ("https://100.100.100.200/r", None, NEVER),
    ("https://192.0.0.192/r", None, NEVER),
    # link-local, site-local, multicast, broadcast, reserved, special-purpose
    ("https://169.254.1.1/r", None, NEVER),
    ("https://[fe80::1]/r", None, NEVER),
    ("https://[fe80::1%25eth0]/r", None, NEVER),
    ("https://[fec0::1]/r", None, NEVER),
    ("https://224.0.0.1/r", None, NEVER),
    ("https://[ff02::1]/r", None, NEVER),
    ("https://255.255.255.255/r", None, NEVER),
    ("https://240.0.0.1/r", None, NEVER),
    ("https://[4000::1]/r", None, NEVER),
    ("https://192.0.2.10/r", None, NEVER),
    ("https://198.51.100.7/r", None, NEVER),
    ("https://203.0.113.9/r", None, NEVER),
    ("https://198.18.0.1/r", None, NEVER),
    ("https://192.88.99.1/r", None, NEVER),
    ("https://[2001:db8::1]/r", None, NEVER),
    ("https://[3fff::1]/r", None, NEVER),
    ("https://[100::1]/r", None, NEVER),
    ("https://[::ffff:0:7f00:1]/r", None, NEVER),
    # private and shared: only with allow_private_host (names and literals alike)
    ("https://10.0.0.5/r", None, PRIVATE),
    ("https://172.16.3.4/r", None, PRIVATE),
    ("https://172.31.255.255/r", None, PRIVATE),
    ("https://192.168.1.1/r", None, PRIVATE),
    ("https://100.64.0.1/r", None, PRIVATE),
    ("https://[fd12:3456::1]/r", None, PRIVATE),
    ("https://[fc00::1]/r", None, PRIVATE),
    ("https://[::ffff:10.0.0.1]/r", None, PRIVATE),
    ("https://intranet.example/r", ["10.1.2.3"], PRIVATE),
    ("https://cgnat.example/r", ["100.127.0.9"], PRIVATE),
    ("http://10.0.0.5/r", None, NEVER),
    # one refused answer refuses the name
    ("https://mixed.example/r", [PUBLIC_V4, "127.0.0.1"], NEVER),
    ("https://mixed-meta.example/r", [PUBLIC_V4, "169.254.169.254"], NEVER),
    ("https://mixed-private.example/r", [PUBLIC_V4, "10.0.0.1"], PRIVATE),
    # globally routable
    ("https://records.example.com/customers/123", [PUBLIC_V4], ALWAYS),
    ("https://records.example.com:8443/r", [PUBLIC_V4, "2606:2800:220:1::1"], ALWAYS),
    ("https://8.8.8.8/r", None, ALWAYS),
    ("https://172.32.0.1/r", None, ALWAYS),
    ("https://100.128.0.1/r", None, ALWAYS),
    ("https://[2606:4700::1111]/r", None, ALWAYS),
    ("https://[::ffff:8.8.8.8]/r", None, ALWAYS),
    ("https://[64:ff9b::808:808]/r", None, ALWAYS),
    ("https://[2002:808:808::1]/r", None, ALWAYS),
    ("https://B\u00fccher.example/r", [PUBLIC_V4], ALWAYS),
    # URL shapes refused whatever the address
    ("http://records.example.com/r", [PUBLIC_V4], NEVER),
    ("http://8.8.8.8/r", None, NEVER),
    ("ftp://records.example.com/r", [PUBLIC_V4], NEVER),
    ("https://user:pw@records.example.com/r", [PUBLIC_V4], NEVER),
    ("https://records.example.com/r#frag", [PUBLIC_V4], NEVER),
    ("https://records.example.com./r", [PUBLIC_V4], NEVER),
    ("https://1.2.3.4.5/r", None, NEVER),
    ("https://cdn.123/r", [PUBLIC_V4], NEVER),
    ("https://[1.2.3.4]/r", None, NEVER),
    ("https://8.8.8.8:0/r", None, NEVER),
]


def _resolver_for(answers: list[str] | None, calls: list[str]) -> object:
    def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        if answers is None:
            raise AssertionError(f"a literal host must not be resolved ({host})")
        return list(answers)

    return resolve


def _allowed(url: str, answers: list[str] | None, flags: NetworkFlags) -> bool:
    calls: list[str] = []
    try:
        target = check_url(url, flags, _resolver_for(answers, calls))  # type: ignore[arg-type]
    except BlockedAddress:
        return False
    assert len(calls) <= 1
    assert target.addresses
    return True


def test_policy_table_covers_every_flag_combination() -> None:
    assert len(CASES) >= 40
    failures = []
    checked = 0
    for url, answers, expected in CASES:
        for flags, want in zip(FLAGS, expected, strict=True):
            got = _allowed(url, answers, flags)
            checked += 1
            if got != want:
                failures.append(f"{url} {answers} {flags}: expected {want}, got {got}")
    line = f"network policy: checked {len(CASES)} URL cases x {len(FLAGS)} flag sets = {checked}"
    print(line)
    REPORT.append(line)
    assert not failures, "\n".join(failures)


def test_a_refusal_names_the_reason_and_the_class() -> None:
    with pytest.raises(BlockedAddress) as info:
        check_url(
            "https://metadata.example/r",
            NetworkFlags(),
            lambda host, port: ["169.254.169.254"],
        )
    assert info.value.code == "blocked_address"
    assert info.value.details["category"] == "cloud metadata"
    assert "always blocked" in info.value.message


def test_a_name_that_does_not_resolve_is_a_failure_before_sending() -> None:
    def nothing(host: str, port: int) -> list[str]:
        return []

    def broken(host: str, port: int) -> list[str]:
        raise OSError("no such name")

    for resolver in (nothing, broken):
        with pytest.raises(TransportFailure) as info:
            check_url("https://gone.example/r", NetworkFlags(), resolver)
        assert info.value.sent is False


def test_the_pinned_target_keeps_the_parsed_url_and_the_addresses() -> None:
    target = check_url(
        "https://records.example.com:8443/customers/1",
        NetworkFlags(),
        lambda host, port: [PUBLIC_V4, PUBLIC_V4, "2606:2800:0220:0001::1"],
    )
    assert target.host == "records.example.com"
    assert target.port == 8443
    assert target.addresses == (PUBLIC_V4, "2606:2800:220:1::1")
    assert str(target.url) == "https://records.example.com:8443/customers/1"


@pytest.mark.parametrize(
    ("address", "category"),
    [
        ("169.254.169.254", AddressClass.METADATA),
        ("169.254.170.2", AddressClass.METADATA),
        ("fd00:ec2::254", AddressClass.METADATA),
        ("169.254.0.1", AddressClass.LINK_LOCAL),
        ("fe80::abcd", AddressClass.LINK_LOCAL),
        ("0.0.0.0", AddressClass.UNSPECIFIED),
        ("::", AddressClass.UNSPECIFIED),
        ("255.255.255.255", AddressClass.BROADCAST),
        ("239.1.1.1", AddressClass.MULTICAST),
        ("ff05::2", AddressClass.MULTICAST),
        ("240.1.2.3", AddressClass.RESERVED),
        ("fec0::5", AddressClass.SITE_LOCAL),
        ("192.0.2.1", AddressClass.SPECIAL),
        ("2001:db8::5", AddressClass.SPECIAL),
        ("100.64.1.1", AddressClass.SHARED),
        ("172.20.0.1", AddressClass.PRIVATE),
        ("fd99::1", AddressClass.PRIVATE),
        ("127.0.0.1", AddressClass.LOOPBACK),
        ("::1", AddressClass.LOOPBACK),
        ("1.1.1.1", AddressClass.GLOBAL),
        ("2a00:1450:4001::1", AddressClass.GLOBAL),
        ("not-an-ip", AddressClass.INVALID),
    ],
)
def test_the_table_classifies_without_asking_ipaddress(
    address: str, category: AddressClass
) -> None:
    assert address_verdict(address, NetworkFlags()).category is category


def test_extra_allowed_opens_loopback_for_tests_but_never_metadata_or_link_local() -> None:
    extra = ["127.0.0.0/8", "169.254.0.0/16", "10.0.0.0/8"]
    assert address_verdict("127.0.0.1", NetworkFlags(), extra_allowed=extra).allowed
    assert address_verdict("10.2.3.4", NetworkFlags(), extra_allowed=extra).allowed
    assert not address_verdict("169.254.169.254", NetworkFlags(), extra_allowed=extra).allowed
    assert not address_verdict("169.254.9.9", NetworkFlags(), extra_allowed=extra).allowed


def test_loopback_needs_http_a_literal_and_the_flag() -> None:
    flags = NetworkFlags(allow_loopback_http=True)
    assert address_verdict("127.0.0.1", flags, scheme="http", literal=True).allowed
    assert not address_verdict("127.0.0.1", flags, scheme="http", literal=False).allowed
    assert not address_verdict("127.0.0.1", flags, scheme="https", literal=True).allowed
    assert not address_verdict("::ffff:127.0.0.1", flags, scheme="http", literal=True).allowed
    assert not address_verdict("127.0.0.1", NetworkFlags(), scheme="http", literal=True).allowed


_BLOCKED_V4 = [
    "127.0.0.0/8",
    "169.254.0.0/16",
    "0.0.0.0/8",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "10.0.0.0/8",
    "192.168.0.0/16",
    "100.64.0.0/10",
]


def _embeddings(v4: ipaddress.IPv4Address) -> list[str]:
    """The five IPv6 spellings that carry ``v4`` (``::`` and ``::1`` are not spellings)."""
    n = int(v4)
    forms = [
        str(ipaddress.IPv6Address((0xFFFF << 32) | n)),  # IPv4-mapped
        str(ipaddress.IPv6Address(n)),  # IPv4-compatible
        str(ipaddress.IPv6Address((0x64FF9B << 96) | n)),  # NAT64
        str(ipaddress.IPv6Address((0x2002 << 112) | (n << 80))),  # 6to4
        str(ipaddress.IPv6Address((0x20010000 << 96) | (n ^ 0xFFFFFFFF))),  # Teredo client
    ]
    return [f for f in forms if f not in ("::", "::1")]


@given(
    network=st.sampled_from(_BLOCKED_V4),
    offset=st.integers(min_value=0, max_value=2**24 - 1),
)
def test_an_embedded_form_of_a_blocked_ipv4_address_is_blocked(network: str, offset: int) -> None:
    net = ipaddress.IPv4Network(network)
    v4 = net[offset % net.num_addresses]
    assert not address_verdict(v4, NetworkFlags()).allowed
    for form in _embeddings(v4):
        verdict = address_verdict(form, NetworkFlags())
        assert not verdict.allowed, form
        assert verdict.effective == str(v4)


@given(n=st.integers(min_value=0, max_value=2**32 - 1))
def test_an_embedded_form_is_judged_as_its_ipv4_address(n: int) -> None:
    v4 = ipaddress.IPv4Address(n)
    plain = address_verdict(v4, NetworkFlags(allow_private_host=True))
    for form in _embeddings(v4):
        if ipaddress.IPv6Address(form) in ipaddress.IPv6Network("2001::/32"):
            continue  # Teredo also carries its server (0.0.0.0 here), so it is refused
        embedded = address_verdict(form, NetworkFlags(allow_private_host=True))
        # loopback is never opened through an embedding; everything else agrees
        if plain.category is not AddressClass.LOOPBACK:
            assert embedded.allowed == plain.allowed, form
        assert embedded.category is plain.category


def test_host_spelling_is_checkable_without_dns_for_config_validation() -> None:
    assert host_spelling_problem("records.example.com") is None
    assert host_spelling_problem("127.0.0.1") is None
    for host in ("2130706433", "0x7f000001", "127.1", "records.example.com.", "fe80::1%eth0"):
        assert host_spelling_problem(host), host
