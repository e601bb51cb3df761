"""The pytest plugin of the kit: the ``undogate_kit`` fixture that ``KindContract``'s
tests take (a fault proxy in front of the author's endpoint, and a real gateway served
over it), and a report header naming the kinds installed here.

Loaded explicitly, in the test suite's root ``conftest.py``::

    pytest_plugins = ["undogate.testing.plugin"]

(not through a ``pytest11`` entry point: installing undogate must not change every
pytest run in that environment; docs/kinds.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from ..adapters import installed_kinds
from .contract import COPY, RESOURCE, TOKEN_ENV, KindCase, Kit
from .gateway import ServedGateway
from .proxy import FaultProxy


def pytest_report_header() -> str:
    kinds = ", ".join(
        f"{k.name} ({k.distribution} {k.version})" + ("" if k.adapter else " NOT LOADED")
        for k in installed_kinds()
    )
    return f"undogate kinds: {kinds}"


@pytest.fixture
def undogate_kit(kind_case: KindCase, tmp_path: Path) -> Iterator[Kit]:
    """The proxy in front of the author's endpoint and a gateway served over it."""
    origin = urlsplit(kind_case.url)
    proxy = FaultProxy(f"{origin.scheme}://{origin.netloc}").start()
    common: dict[str, Any] = {
        "kind": kind_case.kind,
        "conditional_writes": True,
        "allow_loopback_http": True,
    }
    if kind_case.token is not None:
        common["token_env"] = TOKEN_ENV
    if kind_case.auth is not None:
        common["auth"] = dict(kind_case.auth)
    if kind_case.headers:
        common["headers"] = dict(kind_case.headers)
    resources = [
        {"id": RESOURCE, "name": "the kit's resource", "url": proxy.url(kind_case.url)},
        {
            "id": COPY,
            "name": "the kit's test copy",
            "url": proxy.url(kind_case.test_copy_url),
            "test_copy_of": RESOURCE,
        },
    ]
    environ = {**kind_case.environ}
    if kind_case.token is not None:
        environ[TOKEN_ENV] = kind_case.token
    gateway = ServedGateway(
        tmp_path / "gateway",
        [{**r, **common, **kind_case.settings} for r in resources],
        environ,
    )
    try:
        yield Kit(kind_case, proxy, gateway.start())
    finally:
        gateway.stop()
        proxy.stop()


__all__ = ["pytest_report_header", "undogate_kit"]
