"""The proof verbs (docs/proof.md): ``ledger verify``, ``export-receipt`` and
``verify-receipt``. Each reads the ledger read-only or not at all."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import InvalidRequest, UndogateError
from .failing import fail


def _location(ledger: str | None, config_path: Path) -> str:
    """The ledger to read: LEDGER as given, else the one the config names."""
    from ..config import load_config
    from ..ledger import engine_of, ledger_url_problem

    if ledger is None:
        server = load_config(config_path).server
        return server.ledger or str(server.data_dir)
    if engine_of(ledger).schemes:  # a URL, not a path
        problem = ledger_url_problem(ledger)
        if problem is not None:
            raise InvalidRequest(f"LEDGER {problem}")
    return ledger


_LEDGER = click.argument("ledger", required=False)
_CONFIG = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("undogate.yaml"),
    show_default=True,
    envvar="UNDOGATE_CONFIG",
    help="The YAML config naming the ledger (when LEDGER is not given).",
)


@click.command("verify")
@_LEDGER
@_CONFIG
def ledger_verify(ledger: str | None, config_path: Path) -> None:
    """Recompute the ledger's hash chain offline, re-check every stored passkey
    assertion, and hold every job, change, credential and endpoint check to what the
    chain recorded of it. LEDGER: a data dir, its ledger.sqlite3, or a postgresql://
    URL (default: the config's). Exit 0 with the head hash, or 1 naming the first row
    that does not match. Works while serving (the SQLite file is opened read-only)."""
    from ..ledger import open_chain
    from ..proof.ledger_check import verify_ledger

    try:
        with open_chain(_location(ledger, config_path)) as source:
            verdict = verify_ledger(source)
    except UndogateError as exc:
        fail(exc)
    if verdict.ok:
        click.echo(f"ledger verified: {verdict.rows} events; head {verdict.head}")
        return
    click.echo(f"ledger does NOT verify: {verdict.where}: {verdict.reason}")
    sys.exit(1)


@click.command("export-receipt")
@click.argument("job_id")
@click.option("--ledger", default=None, help="A data dir, its file, or a postgresql:// URL.")
@_CONFIG
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the receipt here (default: JOB_ID.receipt.json).",
)
def export_receipt(job_id: str, ledger: str | None, config_path: Path, output: Path | None) -> None:
    """Write JOB_ID's receipt: one JSON file, its events and their chain links, its
    preview digests, assertions and passkeys, that `undogate verify-receipt` checks
    without the ledger. A rewind plan's id (rw_...) gives the plan's receipt: its own
    events and its jobs' between its first and its last."""
    from ..ledger import open_chain
    from ..proof.receipt import export_receipt, export_rewind_receipt, passkeys_for

    export = export_rewind_receipt if job_id.startswith("rw_") else export_receipt

    target = output or Path(f"{job_id}.receipt.json")
    try:
        with open_chain(_location(ledger, config_path)) as source:
            bundle = export(source, job_id, lambda rows: passkeys_for(source, rows))
    except UndogateError as exc:
        fail(exc)
    target.write_text(json.dumps(bundle, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")
    click.echo(
        f"receipt of {job_id} written to {target}: {len(bundle['segment'])} chain rows; "
        f"last hash {bundle['segment'][-1]['hash']}"
    )


@click.command("verify-receipt")
@click.argument("receipt", type=click.Path(dir_okay=False, exists=True, path_type=Path))
def verify_receipt(receipt: Path) -> None:
    """Check a receipt from `undogate export-receipt` without any ledger: every chain
    link, every assertion against its passkey and preview. Exit 0 when it verifies, 1
    naming what does not."""
    from ..proof.assertions import check_job_assertions
    from ..proof.receipt import verify_receipt as verify

    try:
        try:
            bundle = json.loads(receipt.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidRequest(f"{receipt} is not JSON ({exc})") from None
        verdict = verify(bundle, check_job_assertions)
    except UndogateError as exc:
        fail(exc)
    if not verdict.ok:
        click.echo(f"receipt does NOT verify: {verdict.problems[0]}")
        sys.exit(1)
    click.echo(
        f"receipt of {verdict.job_id} verified: {verdict.events} events, chained from "
        f"{verdict.first_prev} to {verdict.last_hash}"
    )
    click.echo(
        "  (it proves these events are linked as shown; that the last hash is in your "
        "ledger's chain, `undogate ledger verify` or an anchored head hash shows)"
    )
    for passkey_id, registered in verdict.registrations:
        click.echo(
            f"  passkey {passkey_id}: registered by the row whose hash is {registered} "
            "(the receipt carries that row but cannot vouch for it: look the hash up in "
            "your ledger too)"
        )
