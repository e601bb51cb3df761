"""What the CLI's verbs share: how a reviewing verb reaches the running gateway
(``UNDOGATE_URL``, the key from ``UNDOGATE_KEY`` only); a refusal is printed by
``failing.fail``."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from ..errors import UndogateError
from .failing import fail as _fail

_URL = click.option("--url", envvar="UNDOGATE_URL", required=True, help="[env UNDOGATE_URL]")


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


__all__ = ["_KEY", "_URL", "_ask", "_review"]
