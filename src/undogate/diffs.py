"""Line diffs of a text document's before and after, for every surface that shows them.

Pure: strings in, strings and small frozen records out. Lines are split on ``\\n`` only
(a ``\\r`` stays part of its line, so a CRLF/LF change is visible as a change, never
hidden), and a last line without a line break is marked the way ``diff -u`` marks it.

    >>> print(unified_diff("a\\nb\\n", "a\\nc\\n", "notes.md"), end="")
    --- a/notes.md
    +++ b/notes.md
    @@ -1,2 +1,2 @@
     a
    -b
    +c
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

DiffOp = Literal["+", "-", " "]
NO_NEWLINE_MARK = "\\ No newline at end of file"


@dataclass(frozen=True)
class DiffLine:
    """One line of a hunk: ``+`` added, ``-`` removed, ``" "`` unchanged context.

    ``text`` is the line without its ``\\n``; ``newline`` says whether it had one.
    Line numbers are 1-based; the side a line is not on has ``None``.
    """

    op: DiffOp
    text: str
    old_number: int | None
    new_number: int | None
    newline: bool = True


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[DiffLine, ...]

    @property
    def header(self) -> str:
        old = _range(self.old_start, self.old_count)
        new = _range(self.new_start, self.new_count)
        return f"@@ -{old} +{new} @@"


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept; the last one may lack it. ``""`` has no lines."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def diff_hunks(before: str, after: str, context: int = 3) -> list[Hunk]:
    """The changed regions of ``before`` → ``after``, each with ``context`` lines around.

    Identical texts give no hunks.
    """
    if context < 0:
        raise ValueError("context must be zero or more")
    old = split_lines(before)
    new = split_lines(after)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    hunks: list[Hunk] = []
    for group in matcher.get_grouped_opcodes(context):
        lines: list[DiffLine] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for offset, line in enumerate(old[i1:i2]):
                    lines.append(_line(" ", line, i1 + offset + 1, j1 + offset + 1))
                continue
            if tag in ("replace", "delete"):
                for offset, line in enumerate(old[i1:i2]):
                    lines.append(_line("-", line, i1 + offset + 1, None))
            if tag in ("replace", "insert"):
                for offset, line in enumerate(new[j1:j2]):
                    lines.append(_line("+", line, None, j1 + offset + 1))
        first, last = group[0], group[-1]
        hunks.append(
            Hunk(
                old_start=first[1],
                old_count=last[2] - first[1],
                new_start=first[3],
                new_count=last[4] - first[3],
                lines=tuple(lines),
            )
        )
    return hunks


def unified_diff(before: str, after: str, name: str = "document", context: int = 3) -> str:
    """The unified diff (``diff -u`` format) of ``before`` → ``after``; ``""`` if equal."""
    hunks = diff_hunks(before, after, context)
    if not hunks:
        return ""
    out = [f"--- a/{name}\n", f"+++ b/{name}\n"]
    for hunk in hunks:
        out.append(hunk.header + "\n")
        for line in hunk.lines:
            out.append(f"{line.op}{line.text}\n")
            if not line.newline:
                out.append(NO_NEWLINE_MARK + "\n")
    return "".join(out)


def diff_stats(before: str, after: str) -> tuple[int, int]:
    """(lines added, lines removed)."""
    added = removed = 0
    for hunk in diff_hunks(before, after, context=0):
        for line in hunk.lines:
            if line.op == "+":
                added += 1
            elif line.op == "-":
                removed += 1
    return added, removed


def _line(op: DiffOp, raw: str, old: int | None, new: int | None) -> DiffLine:
    newline = raw.endswith("\n")
    return DiffLine(op, raw[:-1] if newline else raw, old, new, newline)


def _range(start: int, count: int) -> str:
    """``diff -u`` range: 1-based start; an empty range names the line before it."""
    if count == 1:
        return str(start + 1)
    if count == 0:
        return f"{start},0"
    return f"{start + 1},{count}"


__all__ = [
    "NO_NEWLINE_MARK",
    "DiffLine",
    "Hunk",
    "diff_hunks",
    "diff_stats",
    "split_lines",
    "unified_diff",
]
