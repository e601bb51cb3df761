"""The ``undogate`` command: one thin function per verb."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__
from .errors import UndogateError


def _fail(exc: UndogateError) -> None:
    click.echo(f"error [{exc.code}]: {exc.message}", err=True)
    sys.exit(2)


@click.group()
@click.version_option(__version__, prog_name="undogate")
def main() -> None:
    """undogate: agents prepare changes, people confirm them, every write has a receipt."""


@main.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the demo ledger and data here for inspection (default: a temporary folder).",
)
def demo(data_dir: Path | None) -> None:
    """Walk prepare → preview → confirm → undo against a local contract server."""
    from .demo import run_demo

    try:
        ok = run_demo(data_dir)
    except UndogateError as exc:
        _fail(exc)
    sys.exit(0 if ok else 1)


@main.command("check-config")
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The YAML config to validate.",
)
def check_config(config_path: Path) -> None:
    """Validate a config file and report every problem with its path."""
    from .config import load_config

    try:
        cfg = load_config(config_path)
    except UndogateError as exc:
        _fail(exc)
    for warning in cfg.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"{config_path}: ok ({len(cfg.resources)} resources, {len(cfg.agents)} agents)")


@main.command("contract-server")
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder of *.json records and *.txt/*.md documents (default: built-in samples).",
)
@click.option("--port", type=int, default=8765, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--faults", is_flag=True, help="Enable the test-only fault and reset routes.")
def contract_server(data_dir: Path | None, port: int, host: str, faults: bool) -> None:
    """Serve records and documents under undogate's remote contract (SPEC §6)."""
    from .contract_server import serve_forever

    serve_forever(
        data_dir,
        port,
        host=host,
        faults=faults,
        on_ready=lambda srv: click.echo(f"contract server listening on {srv.base_url}"),
    )


if __name__ == "__main__":  # pragma: no cover
    main()
