"""Dependencies are chosen, not accumulated: src/ imports only what pyproject.toml
declares, and pyproject.toml declares nothing that src/ does not import."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "undogate"
# The kit (undogate.testing) runs only in a kind's test suite: what it imports beyond
# the dependencies, the ``kit`` extra declares.
KIT = SRC / "testing"
# Declared for what they do at run time, not for an import: uvicorn loads its C parser.
USED_WITHOUT_IMPORT = {"httptools"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(extra: str | None = None) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["optional-dependencies"][extra] if extra else project["dependencies"]
    names = (re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0] for dep in deps)
    return {_normal(name) for name in names}


def imported_distributions() -> dict[str, set[str]]:
    """Each third-party distribution src/ imports, with the files that import it."""
    owners = packages_distributions()
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "undogate" or top in sys.stdlib_module_names:
                    continue
                for dist in owners.get(top, [top]):
                    found.setdefault(_normal(dist), set()).add(str(path.relative_to(ROOT)))
    return found


def _kit_only(files: set[str]) -> bool:
    return all((ROOT / f).is_relative_to(KIT) for f in files)


def test_src_imports_only_declared_dependencies() -> None:
    undeclared = {
        d: sorted(f)
        for d, f in imported_distributions().items()
        if d not in declared() and not (_kit_only(f) and d in declared("kit"))
    }
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_every_declared_dependency_is_imported() -> None:
    unused = declared() - set(imported_distributions()) - USED_WITHOUT_IMPORT
    assert not unused, f"declared in pyproject.toml but never imported by src/: {unused}"
