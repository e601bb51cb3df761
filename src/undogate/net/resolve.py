"""The one place a name becomes addresses: ``system_resolver`` asks the system resolver;
tests hand ``check_url`` and ``PinnedClient`` a ``Resolver`` of their own instead.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TypeAlias

Resolver: TypeAlias = Callable[[str, int], list[str]]
"""``resolver(host, port)`` returns every address of ``host`` as text, in preference order."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every TCP address of ``host`` from the system resolver, in its order.

    Raises:
        OSError: the name does not resolve.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]
