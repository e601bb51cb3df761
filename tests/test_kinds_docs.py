"""What the kinds declare is what every description of them says: the docs' tables, the
OpenAPI document and the MCP tool's input schema and description are generated from
the registry, and a test fails when the docs drift from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from undogate.adapters import adapters, member_takers
from undogate.api.openapi import openapi_document
from undogate.cli.kinds import builtin_adapters, refresh_docs
from undogate.mcp.descriptions import (
    list_resources_description,
    prepare_changes_description,
    prepare_changes_schema,
)

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("path", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_the_docs_tables_are_the_registrys(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert refresh_docs(text) == text, (
        f"{path.name}: a generated table drifted from the kinds; run "
        "`.venv/bin/python scripts/docs-tables.py`"
    )


def test_the_docs_hold_the_generated_tables() -> None:
    text = "".join(p.read_text(encoding="utf-8") for p in DOCS.glob("*.md"))
    for block in ("change-shapes -->", "change-members -->", "change-shapes json_collection -->"):
        assert f"<!-- generated: {block}" in text
    for adapter in builtin_adapters():
        for shape in adapter.change_shapes:
            assert shape.meaning in text  # every shape of every built-in kind is documented


def test_the_request_schemas_offer_exactly_the_members_the_kinds_declare() -> None:
    declared = set(member_takers())
    change = openapi_document()["components"]["schemas"]["ChangeRequest"]["properties"]
    assert set(change) == declared | {"resource", "expected_version", "assertion_kind"}
    mcp = prepare_changes_schema()["$defs"]["ChangeInput"]["properties"]
    assert set(mcp) == set(change)
    kinds = openapi_document()["components"]["schemas"]["ResourceList"]
    assert kinds["properties"]["resources"]["items"]["properties"]["kind"]["enum"] == [
        a.kind for a in adapters()
    ]


def test_the_tool_descriptions_name_every_kind_served() -> None:
    for adapter in adapters():
        assert f"kind `{adapter.kind}`: {adapter.agent_guide}" in prepare_changes_description()
        assert f"kind `{adapter.kind}`: {adapter.summary}" in list_resources_description()


EXCERPT = re.compile(r"<!-- excerpt: (?P<path>\S+) -->\n```[a-z]*\n(?P<code>.*?)```", re.DOTALL)


def test_the_code_docs_kinds_walks_through_is_the_real_kinds() -> None:
    """Every excerpt in docs/kinds.md is, verbatim, in the file it names."""
    root = DOCS.parent
    found = list(EXCERPT.finditer((DOCS / "kinds.md").read_text(encoding="utf-8")))
    assert len(found) >= 7
    for match in found:
        source = (root / match.group("path")).read_text(encoding="utf-8")
        assert match.group("code") in source, match.group("path")
