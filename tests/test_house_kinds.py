"""A kind is one object: no code outside ``src/undogate/adapters/`` names a kind.

Read from the source alone, like the house rules: a kind's name as a string constant
(docstrings aside) or as a constant's name (``JSON_RECORD``) anywhere else means some
module asks which kind it holds instead of asking the kind's adapter. The pages'
templates are held to the same rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from undogate.adapters import kind_names

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "undogate"
ADAPTERS = PACKAGE / "adapters"
# The registered kinds, and json_collection (docs/collections.md).
KIND_STRINGS = frozenset({*kind_names(), "json_collection"})
KIND_NAMES = frozenset(name.upper() for name in KIND_STRINGS)


def _outside_adapters(pattern: str) -> list[Path]:
    return sorted(p for p in PACKAGE.rglob(pattern) if ADAPTERS not in p.parents)


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def kind_references(source: str) -> list[str]:
    """Where ``source`` names a kind: ``line: what``."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in KIND_STRINGS
            and id(node) not in docstrings
        ):
            found.append(f"{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Name) and node.id in KIND_NAMES:
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in KIND_NAMES:
            found.append(f"{node.lineno}: .{node.attr}")
    return found


def test_no_module_outside_the_adapters_names_a_kind() -> None:
    modules = _outside_adapters("*.py")
    assert len(modules) > 20  # the walk found the package
    found = {
        str(path.relative_to(PACKAGE)): refs
        for path in modules
        if (refs := kind_references(path.read_text(encoding="utf-8")))
    }
    assert found == {}, "ask the kind's adapter (adapters.adapter_for) instead"


def test_no_template_names_a_kind() -> None:
    templates = _outside_adapters("*.html")
    assert templates
    found = [
        f"{path.relative_to(PACKAGE)}: {kind}"
        for path in templates
        for kind in sorted(KIND_STRINGS)
        if kind in path.read_text(encoding="utf-8")
    ]
    assert found == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ('if change.kind == "webdav_text":\n    pass\n', ["1: 'webdav_text'"]),
        ("x = ResourceKind.JSON_RECORD\n", ["1: .JSON_RECORD"]),
        ("from k import JSON_COLLECTION\nJSON_COLLECTION\n", ["2: JSON_COLLECTION"]),
        ('KINDS = {"json_record": 1}\n', ["1: 'json_record'"]),
        ('def f() -> None:\n    """json_record"""\n', []),
        ('"""webdav_text"""\n', []),
        ('message = "only json_record resources have fields"\n', []),
    ],
)
def test_what_counts_as_naming_a_kind(source: str, found: list[str]) -> None:
    assert kind_references(source) == found
