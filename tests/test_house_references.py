"""Readers have the README, docs/ and the code, never the product's specification: a
"SPEC §N" in what they read points to nothing they have. Point to the doc in docs/ that
says it, or state the rule in plain words.

Checked in the README, every file under docs/ and src/ (the CLI's help, the pages and
the OpenAPI document are built from src/), and the tests' sources.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# "SPEC", then the section sign, even across a line break; or the file's own name.
SPEC_REFERENCE = re.compile(r"\bSPEC\s*§|\bSPEC\.md\b")
SKIPPED_DIRS = {"__pycache__", "node_modules"}
THIS_FILE = Path(__file__).resolve()  # it names what it looks for


def _read_by_people() -> Iterator[Path]:
    yield ROOT / "README.md"
    for top, pattern in (("docs", "*"), ("src", "*"), ("tests", "*.py")):
        for path in sorted((ROOT / top).rglob(pattern)):
            parts = set(path.relative_to(ROOT).parts)
            if (
                path.is_file()
                and path != THIS_FILE
                and not parts & SKIPPED_DIRS
                and not any(p.endswith(".egg-info") for p in parts)
            ):
                yield path


def spec_references(text: str) -> list[str]:
    """Where ``text`` cites the specification: ``line: the citation``."""
    return [
        f"{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)!r}"
        for match in SPEC_REFERENCE.finditer(text)
    ]


def test_nothing_a_reader_sees_cites_the_specification() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{where}"
        for path in _read_by_people()
        for where in spec_references(path.read_bytes().decode("utf-8", errors="replace"))
    ]
    assert found == [], "point to the doc in docs/ that says it instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("the check (SPEC §11) on a copy", ["1: 'SPEC §'"]),
        ("x\n# leases (SPEC §13: several processes)", ["2: 'SPEC §'"]),
        ("`inbox` and `export` for SPEC\n§15's routes", ["1: 'SPEC\\n§'"]),
        ("read /work/shared/SPEC.md first", ["1: 'SPEC.md'"]),
        ("RFC 9110 §13.1.1 strong comparison", []),
        ("AddressClass.UNSPECIFIED and SPECIAL §", []),
        ("the remote contract (docs/remote-contract.md)", []),
    ],
)
def test_what_counts_as_citing_the_specification(text: str, found: list[str]) -> None:
    assert spec_references(text) == found
