"""How a value looks in a terminal (the reviewer's CLI and ``make demo``): inert text,
JSON values as their exact JSON text, and field rows as a table only when the table fits,
else one value a line; undogate never puts a line break inside a value (the terminal
may wrap a long line; the text is whole when copied)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..invisibles import runs
from ..jsonvalue import JsonValue, dumps

#: How a marker looks in a terminal: text cannot carry a style, so an agent's literal
#: ``⟨U+200B⟩`` prints plain and the real character's marker in reverse video.
MARKER_STYLE = "reverse"


def inert(text: str) -> Text:
    """One line of text as the reviewer must see it: every invisible, blank-looking or
    control character (newline too; tab aside) shown as ``⟨U+XXXX⟩`` in reverse video,
    never obeyed."""
    shown = Text()
    for run, is_marker in runs(text, keep_newlines=False):
        shown.append(run, style=MARKER_STYLE if is_marker else None)
    return shown


def value_text(value: JsonValue, present: bool = True) -> Text:
    if not present:
        return Text("(absent)", style="dim italic")
    return inert(dumps(value))


def render_rows(console: Console, rows: list[Any], left: str, right: str) -> None:
    cells = [
        (
            inert(str(r["field"]) + ("" if r.get("changes") else "  (unchanged)")),
            value_text(r.get(left), bool(r.get(f"{left}_present"))),
            value_text(r.get(right), bool(r.get(f"{right}_present"))),
        )
        for r in rows
    ]
    widths = [
        max([len(h), *(c[i].cell_len for c in cells)]) for i, h in enumerate(("field", left, right))
    ]
    if sum(widths) + 10 <= console.width:
        table = Table(show_header=True, header_style="bold")
        for column in ("field", left, right):
            table.add_column(column, no_wrap=True)
        for row in cells:
            table.add_row(*row)
        console.print(table)
        return
    # Too wide for a table: one value a line, never broken mid-number or mid-word
    # (the terminal may wrap a long line; undogate inserts no line break in a value).
    for field, before, after in cells:
        console.print(field, style="bold", soft_wrap=True)
        for name, value in ((left, before), (right, after)):
            console.print(Text(f"  {name}: ").append_text(value), soft_wrap=True)


__all__ = ["MARKER_STYLE", "inert", "render_rows", "value_text"]
