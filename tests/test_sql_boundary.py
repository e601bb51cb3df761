"""Only ``src/undogate/ledger/`` knows SQL or a database driver.

Everything else reaches the ledger through the store protocol's verbs
(``undogate.ledger.store``). Read from the source with ``ast``, never by importing it:
a driver call (``.execute``, ``.executemany``, ``.executescript``), a driver import
(``sqlite3``, ``psycopg``...) or a string that is a SQL statement, anywhere outside the
package, fails here with its file and line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "undogate"
LEDGER = SRC / "ledger"
DRIVER_CALLS = frozenset({"execute", "executemany", "executescript"})
DRIVERS = frozenset({"sqlite3", "psycopg", "psycopg2", "psycopg_pool", "asyncpg", "sqlalchemy"})
DRIVERS |= {"apsw", "aiosqlite", "_sqlite3"}
SQL_TEXT = re.compile(
    r"^\s*(SELECT\s.+\sFROM\s|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s"
    r"|CREATE\s+(TABLE|INDEX|UNIQUE\s+INDEX|TRIGGER)\s|ALTER\s+TABLE\s|PRAGMA\s"
    # A transaction's start says how it starts; a bare "BEGIN" is also how a vCard or an
    # iCalendar component opens (and a driver running it is caught by its .execute).
    r"|BEGIN\s+(IMMEDIATE|EXCLUSIVE|DEFERRED|TRANSACTION|ISOLATION)\b)",
    re.DOTALL,
)


def violations(source: str, name: str) -> list[str]:
    """Every use of SQL or a driver in ``source`` (a module called ``name``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        where = f"{name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute) and node.attr in DRIVER_CALLS:
            found.append(f"{where} .{node.attr}")
        elif isinstance(node, ast.Import):
            found += [f"{where} import {a.name}" for a in node.names if _driver(a.name)]
        elif isinstance(node, ast.ImportFrom) and not node.level and _driver(node.module or ""):
            found.append(f"{where} from {node.module} import")
        elif isinstance(node, ast.Call) and _imports_by_name(node):
            found.append(f"{where} {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and SQL_TEXT.match(node.value)
        ):
            found.append(f"{where} SQL text {node.value[:40]!r}")
    return found


def _driver(module: str) -> bool:
    return module.split(".")[0] in DRIVERS


def _imports_by_name(call: ast.Call) -> bool:
    """``__import__("sqlite3")``, ``importlib.import_module("psycopg")``."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    if name not in ("__import__", "import_module") or not call.args:
        return False
    first = call.args[0]
    return isinstance(first, ast.Constant) and isinstance(first.value, str) and _driver(first.value)


def test_no_sql_and_no_driver_outside_the_ledger_package() -> None:
    outside = [p for p in sorted(SRC.rglob("*.py")) if LEDGER not in p.parents]
    assert len(outside) > 30, "the source tree was not found"
    found = [v for p in outside for v in violations(p.read_text("utf-8"), str(p.relative_to(SRC)))]
    assert found == [], "SQL or a driver outside src/undogate/ledger/:\n" + "\n".join(found)


def test_the_ledger_package_is_where_the_sql_is() -> None:
    inside = sorted(LEDGER.glob("*.py"))
    assert any(violations(p.read_text("utf-8"), p.name) for p in inside)


def test_the_check_sees_each_way_in() -> None:
    caught = [
        "import sqlite3",
        "import psycopg.rows",
        "from sqlite3 import connect",
        "from psycopg_pool import ConnectionPool",
        "conn.execute('x')",
        "cur.executemany(q, rows)",
        "c.executescript(s)",
        "run = db.execute",
        "__import__('sqlite3')",
        "importlib.import_module('psycopg')",
        "Q = 'SELECT id FROM jobs WHERE state = ?'",
        "Q = ('UPDATE jobs SET confirm_attempts = confirm_attempts + 1 '\n 'WHERE id = ?')",
        "Q = 'INSERT INTO events(job_id) VALUES (?)'",
        "Q = 'DELETE FROM resource_identities'",
        "Q = 'PRAGMA journal_mode'",
        "Q = 'BEGIN IMMEDIATE'",
        "Q = 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY'",
    ]
    for snippet in caught:
        assert violations(snippet, "x.py"), snippet
    passed = [
        "from .ledger import Store",
        "from ..ledger.store import Transaction",
        "ledger.write(lambda tx: tx.count_confirm_attempt(job_id))",
        "message = 'select a resource from the list'",
        "note = 'the update set is empty'",
        "import importlib",
        "line = 'BEGIN:VCARD'",
        "if name == 'BEGIN': depth += 1",
    ]
    for snippet in passed:
        assert not violations(snippet, "x.py"), snippet
