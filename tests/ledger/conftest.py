"""The store under test, once per engine: every test in this directory that takes
``store`` runs against each backend in ``BACKENDS``.

An engine joins by adding a factory here that opens a fresh, empty ledger (and starts
what it needs); the contract tests themselves use nothing but the ``Store`` protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from undogate.ledger import Ledger, Store


def _sqlite(tmp_path: Path) -> Store:
    return Ledger.open(tmp_path / "data")  # a real file: WAL does not apply to :memory:


BACKENDS: dict[str, Callable[[Path], Store]] = {"sqlite": _sqlite}


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = BACKENDS[request.param](tmp_path)
    try:
        yield opened
    finally:
        opened.close()
