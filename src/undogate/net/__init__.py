"""All remote traffic goes through here: one pinned client, no redirects, no retries.

``PinnedClient.send`` is the only way adapters reach a server. For each request it:

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

Inside, each arrow points down: ``client`` (pinned pools, ``PinnedClient``, the one
mapping of httpcore's errors) uses ``policy`` (address classes, verdicts, the URL check;
pure), and both use ``resolve`` (the one DNS lookup) and ``errors`` (``TransportFailure``,
and ``ResponseTooLarge`` for a body past its bound). ``link_header`` reads an answer's
RFC 8288 ``Link`` fields (pure).
"""

from ..errors import BlockedAddress
from .client import PinnedClient, RemoteResponse, body_framing, sent_url
from .errors import ResponseTooLarge, TransportFailure
from .link_header import Link, parse_links
from .policy import (
    ALWAYS_BLOCKED,
    AddressClass,
    AddressVerdict,
    NetworkFlags,
    PinnedTarget,
    address_verdict,
    check_url,
    configured_url_problems,
    host_spelling_problem,
    is_loopback_literal,
    url_host,
)
from .resolve import Resolver, system_resolver

__all__ = [
    "ALWAYS_BLOCKED",
    "AddressClass",
    "AddressVerdict",
    "BlockedAddress",
    "Link",
    "NetworkFlags",
    "PinnedClient",
    "PinnedTarget",
    "RemoteResponse",
    "Resolver",
    "ResponseTooLarge",
    "TransportFailure",
    "address_verdict",
    "body_framing",
    "check_url",
    "configured_url_problems",
    "host_spelling_problem",
    "is_loopback_literal",
    "parse_links",
    "sent_url",
    "system_resolver",
    "url_host",
]
