"""``undogate kinds``: every installed kind (name, distribution, version, built-in or
not, and why one that could not be loaded is not served), and the tables of what a
change of each kind takes, generated from the registry for the docs.

The docs hold those tables between markers (``<!-- generated: change-shapes -->`` ...
``<!-- end generated -->``); ``refresh_docs`` rewrites them and a test fails when one
drifts from the registry. A block's name may narrow it to kinds:
``change-shapes json_collection``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence

import click

from ..adapters import Adapter, InstalledKind, adapter_for, adapters, installed_kinds, kind_problem

_BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[a-z-]+)(?P<kinds>(?: [a-z0-9_]+)*) -->\n)(?P<body>.*?)"
    r"(<!-- end generated -->)",
    re.DOTALL,
)


def kinds_table(kinds: Sequence[InstalledKind]) -> list[str]:
    """One line per installed kind, aligned; a kind that could not be loaded says why."""
    rows = [("kind", "distribution", "version", "source")]
    for kind in kinds:
        source = "built-in" if kind.builtin else "installed"
        if kind.adapter is None:
            source = f"NOT LOADED: {kind.problem}"
        rows.append((kind.name, kind.distribution, kind.version, source))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
        for row in rows
    ]


def kind_warnings() -> list[str]:
    """One warning per installed kind that could not be loaded (``serve`` prints them)."""
    return [
        f"warning: the kind {k.name} from {k.distribution} {k.version} could not be loaded "
        f"({k.problem}); "
        + (
            "another distribution serves it"
            if kind_problem(k.name) is None
            else "a resource of that kind is refused"
        )
        for k in installed_kinds()
        if k.adapter is None
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def shapes_table(kinds: Sequence[Adapter]) -> str:
    """Every change shape of ``kinds``: its members, an example, what it does."""
    lines = ["| kind | a change | what it does |", "|---|---|---|"]
    for adapter in kinds:
        for shape in adapter.change_shapes:
            members = " + ".join(f"`{m}`" for m in shape.members)
            optional = "".join(f" (+ `{m}`)" for m in shape.optional)
            example = json.dumps({"resource": "…", **shape.example}, ensure_ascii=False)
            lines.append(
                f"| `{adapter.kind}` | {members}{optional}: `{_cell(example)}` "
                f"| {_cell(shape.meaning)} |"
            )
    return "\n".join(lines) + "\n"


def members_table(kinds: Sequence[Adapter]) -> str:
    """Every member a change of ``kinds`` may carry, the kinds that take it, its value."""
    taken: dict[str, tuple[str, list[str]]] = {}
    for adapter in kinds:
        for member in adapter.change_members:
            value = f"{member.schema.get('type', 'value')}: {member.schema.get('description', '')}"
            taken.setdefault(member.name, (value, []))[1].append(adapter.kind)
    lines = ["| member | taken by | value |", "|---|---|---|"]
    for name, (value, takers) in taken.items():
        lines.append(f"| `{name}` | {', '.join(f'`{k}`' for k in takers)} | {_cell(value)} |")
    return "\n".join(lines) + "\n"


def kinds_summary(kinds: Sequence[Adapter]) -> str:
    """What a resource of each of ``kinds`` is, and its own settings."""
    lines = ["| kind | what one resource is | its own settings |", "|---|---|---|"]
    for adapter in kinds:
        settings = ", ".join(f"`{name}`" for name in adapter.settings_model.model_fields)
        lines.append(f"| `{adapter.kind}` | {_cell(adapter.summary)} | {settings or 'none'} |")
    return "\n".join(lines) + "\n"


TABLES = {"change-shapes": shapes_table, "change-members": members_table, "kinds": kinds_summary}


def builtin_adapters() -> list[Adapter]:
    """The built-in kinds (the docs describe these, whatever else is installed here)."""
    return [k.adapter for k in installed_kinds() if k.builtin and k.adapter is not None]


def refresh_docs(text: str) -> str:
    """``text`` with every generated block rewritten from the built-in kinds."""

    def block(match: re.Match[str]) -> str:
        named = match.group("kinds").split()
        kinds = [adapter_for(k) for k in named] if named else builtin_adapters()
        return match.group(1) + TABLES[match.group("name")](kinds) + match.group(5)

    return _BLOCK.sub(block, text)


@click.command("kinds")
@click.option("--markdown", is_flag=True, help="Print what a change of each kind takes, as tables.")
def kinds_command(markdown: bool) -> None:
    """List every installed resource kind: its name, the distribution that provides it,
    its version, and whether it is built in. A kind from outside arrives through the
    `undogate.kinds` entry point (docs/kinds.md); one that could not be loaded is listed
    with why, and the command exits 1."""
    found = installed_kinds()
    for line in kinds_table(found):
        click.echo(line)
    if markdown:
        for table in TABLES.values():
            click.echo("")
            click.echo(table(adapters()), nl=False)
    sys.exit(1 if any(k.adapter is None for k in found) else 0)


__all__ = [
    "TABLES",
    "builtin_adapters",
    "kind_warnings",
    "kinds_command",
    "kinds_summary",
    "kinds_table",
    "members_table",
    "refresh_docs",
    "shapes_table",
]
