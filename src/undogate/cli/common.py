"""What the CLI's verbs share: how a reviewing verb reaches the running gateway
(``UNDOGATE_URL``, the key from ``UNDOGATE_KEY`` only); a refusal is printed by
``failing.fail``."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import click

from ..errors import UndogateError
from .failing import fail as _fail


def _need_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    if not value:
        raise click.UsageError(
            "no gateway address: set UNDOGATE_URL (or pass --url) to the running gateway, "
            "e.g. http://127.0.0.1:8080; the operator key comes from UNDOGATE_KEY",
            ctx,
        )
    return value


_URL = click.option(
    "--url",
    envvar="UNDOGATE_URL",
    callback=_need_url,
    help="The running gateway, e.g. http://127.0.0.1:8080 [env UNDOGATE_URL]. The operator "
    "key comes from UNDOGATE_KEY only, never an argument.",
)


class FullHelpGroup(click.Group):
    """A command group whose ``--help`` lists each command's whole first sentence, wrapped,
    never cut at the terminal's width with "..." (its subgroups too).

    The commands in ``lazy_commands`` (name: ``.module:attribute`` in this package) are
    imported only when they run or are listed, as Click's lazy group pattern does: a short
    command does not pay for importing every other one's modules."""

    group_class = type

    def __init__(
        self, *args: Any, lazy_commands: Mapping[str, str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = self.lazy_commands.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)
        module, attribute = where.split(":")
        command = getattr(importlib.import_module(module, __package__), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{where} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _KEY(fn: Callable[..., None]) -> Callable[..., None]:
    """The operator key, from UNDOGATE_KEY only: never an argument, where every user of
    the machine could read it in the process list."""

    @functools.wraps(fn)
    def with_key(*args: Any, **kwargs: Any) -> None:
        key = os.environ.get("UNDOGATE_KEY", "")
        if not key:
            click.echo("error [unauthorized]: set UNDOGATE_KEY to your operator key", err=True)
            sys.exit(2)
        fn(*args, key=key, **kwargs)

    return with_key


def _review(url: str, key: str, fn: Any) -> None:
    from rich.console import Console

    from ..api.gateway_client import ApiClient

    try:
        client = ApiClient(url, key)
    except UndogateError as exc:
        _fail(exc)
    try:
        code = fn(client, Console(highlight=False))
    except UndogateError as exc:
        _fail(exc)
    finally:
        client.close()
    sys.exit(code)


def _ask(prompt: str) -> str:
    return str(click.prompt(prompt, default="", show_default=False))


def file_copies_only(ledger_url: str | None, doing: str) -> None:
    """``backup`` and ``restore`` copy a ledger file; an engine without one has its own
    tools."""
    from ..ledger import engine_of

    engine = engine_of(ledger_url)
    if engine.own_backup is not None:
        from ..errors import InvalidRequest

        raise InvalidRequest(
            f"the ledger is {engine.name} (server.ledger): {doing} it with "
            f"{engine.own_backup}, not with this command"
        )


__all__ = ["_KEY", "_URL", "FullHelpGroup", "_ask", "_review", "file_copies_only"]
