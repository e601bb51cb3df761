"""The store under test, once per engine: every test in this directory that takes
``store`` runs against each backend in ``BACKENDS``.

An engine joins by adding a factory here that opens a fresh, empty ledger (and starts
what it needs); the contract tests themselves use nothing but the ``Store`` protocol.
PostgreSQL is a real server (tests/postgres.py), one fresh database per test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from undogate.ledger import Ledger, Store
from undogate.ledger.postgres import PostgresStore

from ..postgres import PostgresCluster


def _sqlite(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    return Ledger.open(tmp_path / "data")  # a real file: WAL does not apply to :memory:


def _postgres(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    return PostgresStore.open(cluster.fresh_database())


BACKENDS: dict[str, Callable[[Path, pytest.FixtureRequest], Store]] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = BACKENDS[request.param](tmp_path, request)
    try:
        yield opened
    finally:
        opened.close()
