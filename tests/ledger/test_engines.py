"""``server.ledger`` picks the engine, through the one switch (``ledger.engines``):
absent, the SQLite ledger under data_dir; a ``postgresql://`` URL without a password,
PostgreSQL. A URL carrying a password is refused when the config loads, and the refusal
never repeats it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from undogate.config import parse_config
from undogate.errors import ConfigError, InvalidRequest, LedgerError
from undogate.ledger import ENGINES, SQLiteStore, Transaction, engine_of, open_store
from undogate.ledger.postgres import PostgresStore, PostgresTransaction
from undogate.ledger.sql_verbs import SqlVerbs
from undogate.ledger.sqlite import SQLiteTransaction

from ..postgres import PASSWORD_USER, PostgresCluster


def test_without_server_ledger_the_sqlite_ledger_under_data_dir_opens(tmp_path: Path) -> None:
    server = parse_config({"server": {"data_dir": str(tmp_path / "data")}}).server
    assert server.ledger is None
    store = open_store(server)
    try:
        assert isinstance(store, SQLiteStore)
        assert store.location == str(tmp_path / "data" / "ledger.sqlite3")
    finally:
        store.close()


def test_a_postgresql_url_opens_the_postgresql_ledger(postgres_cluster: PostgresCluster) -> None:
    url = postgres_cluster.fresh_database()
    server = parse_config({"server": {"ledger": url}}).server
    store = open_store(server)
    try:
        assert isinstance(store, PostgresStore)
        assert store.location == url and url in store.describe()
    finally:
        store.close()
    with pytest.raises(InvalidRequest, match="new database"):
        open_store(server, new_ledger=True)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://undogate:s3cr3t-pw@db.internal/undogate", "must not carry a password"),
        ("postgresql://undogate@db.internal/undogate?password=s3cr3t-pw", "PGPASSWORD"),
        ("sqlite:///var/lib/undogate/ledger.sqlite3", "must be a postgresql:// URL"),
        ("postgresql://undogate@db.internal", "must name a host and a database"),
        ("postgresql://undogate@db.internal:99999/x", "must be a URL"),
    ],
)
def test_a_ledger_url_that_cannot_be_used_is_refused_at_load(url: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"server": {"ledger": url}})
    shown = str(caught.value)
    assert problem in shown and "server.ledger" in shown
    assert "s3cr3t-pw" not in shown


def test_the_password_comes_from_pgpassword_and_is_never_shown(
    postgres_cluster: PostgresCluster,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "correct-horse-battery-staple"
    name = postgres_cluster.fresh_database().rsplit("/", 1)[1]
    with postgres_cluster.admin() as admin:
        admin.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{secret}'")
        admin.execute(f"ALTER DATABASE {name} OWNER TO {PASSWORD_USER}")
    url = f"postgresql://{PASSWORD_USER}@127.0.0.1:{postgres_cluster.port}/{name}"
    server = parse_config({"server": {"ledger": url}}).server

    monkeypatch.setenv("PGPASSWORD", "wrong-" + secret)
    with pytest.raises(LedgerError, match="password authentication failed") as caught:
        open_store(server)
    assert secret not in caught.value.message

    monkeypatch.setenv("PGPASSWORD", secret)
    store = open_store(server)
    try:
        store.write(lambda tx: tx.next_seq())
        assert secret not in store.describe()
    finally:
        store.close()
    assert secret not in caplog.text


def test_one_switch_names_every_engine() -> None:
    """``engine_of`` is the one switch: the default where no URL is given (or a path is),
    an engine for each of its URL schemes."""
    assert engine_of(None) is ENGINES[0] and ENGINES[0].schemes == ()
    for engine in ENGINES[1:]:
        for scheme in engine.schemes:
            assert engine_of(f"{scheme}://user@db.example.com/ledger") is engine
    assert engine_of("/var/lib/undogate") is ENGINES[0]
    assert engine_of("sqlite:/var/lib/undogate") is ENGINES[0]
    assert [e.name for e in ENGINES] == ["SQLite", "PostgreSQL"]


def test_every_engine_speaks_every_verb_listed_once() -> None:
    """Each engine's transaction is ``SqlVerbs`` (the nine verb mixins, listed once) and
    that list offers every verb of ``store.Transaction``."""
    for transaction in (SQLiteTransaction, PostgresTransaction):
        assert SqlVerbs in transaction.__mro__
    verbs = {
        n for n in dir(Transaction) if not n.startswith("_") and callable(getattr(Transaction, n))
    }
    missing = {n for n in verbs if not callable(getattr(SqlVerbs, n, None))}
    assert not missing, missing


SRC = Path(__file__).resolve().parents[2] / "src" / "undogate"


def test_no_module_outside_the_ledger_picks_an_engine_itself() -> None:
    """Outside ledger/, what depends on the engine asks ``engine_of``: nothing compares
    ``server.ledger`` with None or tests a ledger URL's scheme by hand."""
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        if path.is_relative_to(SRC / "ledger"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Compare)
                and isinstance(node.left, ast.Attribute)
                and node.left.attr == "ledger"
                and any(isinstance(c, ast.Constant) and c.value is None for c in node.comparators)
            ):
                found.append(f"{path.relative_to(SRC)}:{node.lineno} ledger compared with None")
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in ("postgresql:", "postgres:", "postgresql://", "postgres://")
            ):
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {node.value!r}")
    assert found == []
