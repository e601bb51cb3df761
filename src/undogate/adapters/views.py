"""The shapes a change takes on every surface, as lossless JSON: a table of fields and a
line diff. Adapters build their receipt and preview values from these; the API, the
pages, MCP and the CLI render them without knowing which kind they came from."""

from __future__ import annotations

from collections.abc import Sequence

from ..diffs import diff_hunks
from ..jsonvalue import JsonNumber, JsonObject, JsonValue


def _line_number(value: int | None) -> JsonValue:
    return JsonNumber(str(value)) if value is not None else None


def text_diff(before: str, after: str, context: int = 3) -> list[JsonValue]:
    """A line diff (``diffs.diff_hunks``) as JSON: per hunk an ``{"op": "@", "line":
    header}`` row, then ``{"op": " " | "-" | "+", "line", "old", "new", "newline"}``."""
    out: list[JsonValue] = []
    for hunk in diff_hunks(before, after, context):
        out.append({"op": "@", "line": hunk.header})
        for line in hunk.lines:
            out.append(
                {
                    "op": line.op,
                    "line": line.text,
                    "old": _line_number(line.old_number),
                    "new": _line_number(line.new_number),
                    "newline": line.newline,
                }
            )
    return out


def field_rows(
    fields: Sequence[str],
    left: JsonObject | None,
    right: JsonObject | None,
    names: tuple[str, str] = ("before", "after"),
) -> list[JsonValue]:
    """One row per touched field: both sides, and whether each side has the field."""
    a, b = left or {}, right or {}
    rows: list[JsonValue] = []
    for name in fields:
        rows.append(
            {
                "field": name,
                names[0]: a.get(name),
                f"{names[0]}_present": name in a,
                names[1]: b.get(name),
                f"{names[1]}_present": name in b,
                "changes": (name in a) != (name in b) or a.get(name) != b.get(name),
            }
        )
    return rows


__all__ = ["field_rows", "text_diff"]
