"""Rewrite the generated tables in docs/*.md from the kinds' registry.

The docs hold tables of what a change of each built-in kind takes between
``<!-- generated: NAME [KIND...] -->`` and ``<!-- end generated -->``;
``tests/test_kinds_docs.py`` fails when one drifts. Run from the project root:
``.venv/bin/python scripts/docs-tables.py``.
"""

from __future__ import annotations

from pathlib import Path

from undogate.cli.kinds import refresh_docs

for path in sorted(Path("docs").glob("*.md")):
    text = path.read_text(encoding="utf-8")
    fresh = refresh_docs(text)
    if fresh != text:
        path.write_text(fresh, encoding="utf-8")
        print(f"rewrote {path}")
