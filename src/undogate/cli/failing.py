"""How every CLI verb reports a refusal: one line with the stable code, exit status 2."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from ..errors import UndogateError
from ..invisibles import visible


def fail(exc: UndogateError) -> NoReturn:
    # A message may quote what an agent or a remote server wrote: shown, never obeyed.
    click.echo(visible(f"error [{exc.code}]: {exc.message}"), err=True)
    sys.exit(2)
