"""The ``undogate`` command: one thin function per verb."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..errors import UndogateError
from . import proof
from .common import _KEY, _URL, FullHelpGroup, _ask, _review, file_copies_only
from .failing import fail as _fail
from .operating import Echo, Watching, watching_options

_CONFIG = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("undogate.yaml"),
    show_default=True,
    envvar="UNDOGATE_CONFIG",
    help="The YAML config.",
)


# The commands whose modules import much of undogate (the views, the adapters, the API
# client) are imported only when they run or are listed.
@click.group(
    cls=FullHelpGroup,
    lazy_commands={
        "kinds": ".kinds:kinds_command",
        "rewind": ".rewind:rewind_command",
        "agents": ".rewind:agents_group",
    },
)
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
@_CONFIG
def check_config(config_path: Path) -> None:
    """Validate a config file and report every problem with its path."""
    from ..config import load_config

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
    """Serve records and documents under undogate's remote contract.

    What the contract asks of an endpoint: docs/remote-contract.md.
    """
    from ..contract_server import serve_forever

    serve_forever(
        data_dir,
        port,
        host=host,
        faults=faults,
        on_ready=_announce_contract_server,
    )


def _announce_contract_server(srv: Any) -> None:
    click.echo(f"contract server listening on {srv.base_url}; it serves:")
    for line in srv.route_lines():
        click.echo(line)
    click.echo(
        "point a resource's url at one of these (with allow_loopback_http: true), or run "
        "`undogate init --example` for a config that does"
    )


# -- running the gateway -----------------------------------------------------------


def _echo_err(line: str) -> None:
    click.echo(line, err=True)


_NEW_LEDGER = click.option(
    "--new-ledger",
    is_flag=True,
    help="Replace a missing, empty, foreign or damaged ledger with a new, empty one; the "
    "old files move to DATA_DIR/before-new-ledger-<time>/ (nothing is deleted). Refused "
    "when the ledger is whole.",
)


@main.command()
@_CONFIG
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8080, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Serve from this many processes on one port, each with its own lease on the "
    "ledger (SQLite on this machine's disk, or PostgreSQL).",
)
@click.option("--listen-fd", type=int, default=None, hidden=True)  # a worker's socket
@watching_options
@_NEW_LEDGER
def serve(
    config_path: Path,
    host: str,
    port: int,
    workers: int,
    listen_fd: int | None,
    new_ledger: bool,
    watching: Watching,
    echo: Echo,
) -> None:
    """Open the ledger, recover interrupted work, and serve the HTTP API."""
    from .serve import serve as run
    from .workers import serve_workers

    if workers > 1:
        sys.exit(serve_workers(config_path, host, port, workers, echo, watching))
    run(
        config_path, host, port, echo, new_ledger=new_ledger, listen_fd=listen_fd, watching=watching
    )


@main.command()
@_CONFIG
@_NEW_LEDGER
@click.option(
    "--example",
    is_flag=True,
    help="Write a config for `undogate contract-server`, which works as is (default: a "
    "template to edit).",
)
@click.option(
    "--port",
    type=int,
    default=8765,
    show_default=True,
    help="With --example: the port `undogate contract-server --port` listens on.",
)
def init(config_path: Path, new_ledger: bool, example: bool, port: int) -> None:
    """Write a config (if none), create the ledger, print a first operator key and its id."""
    from .serve import init as run

    try:
        issued = run(config_path, _echo_err, new_ledger=new_ledger, example=example, port=port)
    except UndogateError as exc:
        _fail(exc)
    if issued is not None:
        click.echo(
            f"your first operator key, id {issued.credential.id} (it also administers keys; "
            "shown once, undogate keeps only its hash):",
            err=True,
        )
        click.echo(issued.key)


@main.command()
@_CONFIG
@click.argument("target", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--overwrite", is_flag=True, help="Replace an existing file at TARGET.")
def backup(config_path: Path, target: Path, overwrite: bool) -> None:
    """Consistent online backup of the ledger to TARGET (works while serving).

    Restore: stop the server, then `undogate restore TARGET --config ...`. Anything
    committed after the backup is not in it: that recovery history is lost.
    """
    from ..config import load_config
    from ..ledger.backup import backup_ledger

    try:
        server = load_config(config_path).server
        file_copies_only(server.ledger, "back up")
        result = backup_ledger(server.data_dir, target, overwrite=overwrite)
    except UndogateError as exc:
        _fail(exc)
    click.echo(
        f"backup of ledger {result.ledger_id or '(no id yet)'} written to {result.path}: "
        f"{result.bytes} bytes, {result.jobs} jobs, {result.events} events, "
        f"integrity {result.integrity}"
    )


@main.command()
@_CONFIG
@click.argument("source", type=click.Path(dir_okay=False, exists=True, path_type=Path))
def restore(config_path: Path, source: Path) -> None:
    """Replace the ledger with the backup SOURCE (the server must be stopped).

    The current ledger files are moved aside, never deleted; keys revoked in them stay
    revoked; the data dir's identity marker names the restored ledger.
    """
    from ..config import load_config
    from ..ledger.backup import restore_ledger

    try:
        server = load_config(config_path).server
        file_copies_only(server.ledger, "restore")
        result = restore_ledger(source, server.data_dir)
    except UndogateError as exc:
        _fail(exc)
    click.echo(
        f"restored {source} (ledger {result.ledger_id}); "
        f"{result.revocations_kept} revocation(s) carried over"
        + (f"; the previous ledger is in {result.set_aside}" if result.set_aside else "")
    )
    if result.revocations_unread:
        click.echo(
            f"warning: {result.revocations_unread}, so keys revoked after this backup was "
            "taken are not revoked in it: check `undogate keys list` and revoke them again",
            err=True,
        )


@main.command("check-endpoint")
@_CONFIG
@click.argument("test_copy_id")
def check_endpoint(config_path: Path, test_copy_id: str) -> None:
    """Earn the conditional_writes attestation on a disposable test copy.

    TEST_COPY_ID must be declared with `test_copy_of: <production id>`; the check writes
    only to it (and tries one write beside it, where nothing exists) and only reads the
    production resource. Through a server's API when UNDOGATE_URL + UNDOGATE_KEY (an
    operator key with agents:write) are set; else directly on the ledger.
    Exits 0 only when every step passed. See docs/remote-contract.md.
    """
    from ..operations.endpoint_check import report_lines
    from .endpoint_check import run_endpoint_check

    try:
        view, path = run_endpoint_check(config_path, test_copy_id, os.environ)
    except UndogateError as exc:
        _fail(exc)
    click.echo(f"({'through the API' if path == 'api' else 'directly on the ledger'})", err=True)
    for line in report_lines(view):
        click.echo(line)
    sys.exit(0 if view.get("passed") is True else 1)


@main.command()
@_CONFIG
@click.option(
    "--since", required=True, help="Events and jobs since: 30m, 12h, 7d ago, or ISO 8601."
)
@click.option(
    "--to",
    "directory",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A new or empty folder for events.jsonl and jobs.csv.",
)
def export(config_path: Path, since: str, directory: Path) -> None:
    """The audit export: the ledger's events as JSON Lines (events.jsonl) and its jobs as
    CSV (jobs.csv); ids, states, actors, reasons and counts, never a key or a value
    (docs/operating.md). Through a server's API when UNDOGATE_URL and a key (UNDOGATE_KEY
    with keys:admin, or UNDOGATE_MASTER_KEY) are set; else directly on the ledger."""
    from .export import run_export

    try:
        events, jobs, path = run_export(config_path, since, directory)
    except UndogateError as exc:
        _fail(exc)
    click.echo(f"({'through the API' if path == 'api' else 'directly on the ledger'})", err=True)
    click.echo(f"wrote {events} events to {directory / 'events.jsonl'}")
    click.echo(f"wrote {jobs} jobs to {directory / 'jobs.csv'}")


# -- keys --------------------------------------------------------------------------


@main.group()
def keys() -> None:
    """Operator keys, agent tokens, the master key. Through a server's API when
    UNDOGATE_URL and a key are set (UNDOGATE_KEY, an operator key with keys:admin such as
    init's, or UNDOGATE_MASTER_KEY); else directly on the ledger, also while servers run."""


def _run_keys(config_path: Path, cmd: Any, *, as_json: bool = False) -> None:
    from .keys import print_result, run_key_command

    try:
        result, path = run_key_command(config_path, cmd)
    except UndogateError as exc:
        _fail(exc)
    print_result(result, path, cmd, as_json=as_json)


_AS_JSON = click.option(
    "--json", "as_json", is_flag=True, help="After the key, the credential as JSON (epoch seconds)."
)


@keys.command("create-operator")
@_CONFIG
@click.option("--label", default="operator", show_default=True)
@click.option("--read-only", is_flag=True, help="Only agents:read (no confirming).")
@click.option(
    "--admin",
    is_flag=True,
    help="Also keys:admin (administer keys over the API); not with --read-only or --agent.",
)
@click.option("--agent", "agents", multiple=True, help="Limit the key to these agents.")
@_AS_JSON
def keys_create_operator(
    config_path: Path,
    label: str,
    read_only: bool,
    admin: bool,
    agents: tuple[str, ...],
    as_json: bool,
) -> None:
    """Create an operator key: a new owner."""
    from .keys import KeyCommand

    cmd = KeyCommand(
        "create_operator", label=label, read_only=read_only, admin=admin, agents=agents or None
    )
    _run_keys(config_path, cmd, as_json=as_json)


@keys.command("create-agent")
@_CONFIG
@click.option("--agent", required=True, help="The agent id from the config.")
@click.option(
    "--owner",
    default=None,
    help="The operator key id (op_...) that owns its jobs [default: the only operator key; "
    "through the API, the operator key asking].",
)
@click.option("--label", default=None)
@_AS_JSON
def keys_create_agent(
    config_path: Path, agent: str, owner: str | None, label: str | None, as_json: bool
) -> None:
    """Create an agent token for one agent, owned by one operator."""
    from .keys import KeyCommand

    cmd = KeyCommand("create_agent", label=label, agent=agent, owner=owner)
    _run_keys(config_path, cmd, as_json=as_json)


@keys.command("list")
@_CONFIG
@click.option("--json", "as_json", is_flag=True, help="The listing as JSON (epoch seconds).")
def keys_list(config_path: Path, as_json: bool) -> None:
    """List credentials as a table (never the keys)."""
    from .keys import KeyCommand

    _run_keys(config_path, KeyCommand("list"), as_json=as_json)


@keys.command("revoke")
@_CONFIG
@click.argument("credential")
@click.option("--force", is_flag=True, help="Revoke even the only owner of unresolved jobs.")
def keys_revoke(config_path: Path, credential: str, force: bool) -> None:
    """Revoke a credential (an operator key takes its agent tokens with it)."""
    from .keys import KeyCommand

    _run_keys(config_path, KeyCommand("revoke", credential=credential, force=force))


@keys.command("master")
def keys_master() -> None:
    """Print a new random master key to put in UNDOGATE_MASTER_KEY."""
    from ..auth import new_master_key

    click.echo(new_master_key())


@main.group()
def passkeys() -> None:
    """Passkeys (docs/proof.md): enrol an owner's first passkey from the server's host."""


@passkeys.command("enrol")
@_CONFIG
@click.option("--owner", default=None, help="The operator key (op_...); default: the only one.")
@click.option(
    "--replace",
    is_flag=True,
    help="First revoke the owner's live passkeys (a lost device), each an event in the chain.",
)
def passkeys_enrol(config_path: Path, owner: str | None, replace: bool) -> None:
    """Print a one-time code (15 minutes, once) that enrols the owner's first passkey on
    the passkeys page. Directly on the ledger, or through a server's API when UNDOGATE_URL
    and UNDOGATE_MASTER_KEY are set (never an operator key)."""
    from .passkeys import enrolment_lines, run_enrolment

    try:
        issued, _ = run_enrolment(config_path, owner, replace, os.environ)
    except UndogateError as exc:
        _fail(exc)
    for line in enrolment_lines(issued):
        click.echo(line, err=True)
    click.echo(issued["code"] if isinstance(issued, dict) else "")


# -- reviewing over the API --------------------------------------------------------


@main.group(
    lazy_commands={
        "list": ".inbox_commands:jobs_list",
        "reject-stale": ".inbox_commands:jobs_reject_stale",
    }
)
def jobs() -> None:
    """List and show jobs (UNDOGATE_URL, UNDOGATE_KEY)."""


@jobs.command("show")
@_URL
@_KEY
@click.argument("job_id")
def jobs_show(url: str, key: str, job_id: str) -> None:
    """A job's receipt: before/after per field, line diffs, actions."""
    from .review import show_job

    _review(url, key, lambda c, con: show_job(c, con, job_id))


def _confirming(operation: str, help_text: str) -> None:
    @main.command(operation if operation != "accept_observed" else "reconcile", help=help_text)
    @_URL
    @_KEY
    @click.argument("job_id")
    @click.option("--dry-run", is_flag=True, help="Show the exact requests; send nothing.")
    def command(url: str, key: str, job_id: str, dry_run: bool) -> None:
        from .review import confirm_operation

        _review(
            url,
            key,
            lambda c, con: confirm_operation(
                c,
                con,
                job_id,
                operation,
                dry_run=dry_run,
                interactive=sys.stdin.isatty(),
                ask=_ask,
            ),
        )


_confirming("apply", "Preview, show the exact writes, and apply a job (needs a terminal).")
_confirming("undo", "Preview, show the exact writes, and undo a job (needs a terminal).")
_confirming(
    "accept_observed",
    "Accept the observed state of uncertain actions (needs a terminal).",
)


@main.command()
@_URL
@_KEY
@click.argument("job_id")
@click.option("--reason", default=None, help="Why, for the history (and the agent's job_status).")
def reject(url: str, key: str, job_id: str, reason: str | None) -> None:
    """Reject a prepared job; it can never be applied after (needs a terminal)."""
    from .review import reject_job

    _review(
        url,
        key,
        lambda c, con: reject_job(c, con, job_id, reason, interactive=sys.stdin.isatty(), ask=_ask),
    )


@main.command("accept-undo")
@_URL
@_KEY
@click.argument("resource_id")
def accept_undo(url: str, key: str, resource_id: str) -> None:
    """Accept, once, the undos a test copy verified for RESOURCE_ID (needs a terminal)."""
    from .undo_offer import accept_undo as accept

    _review(
        url,
        key,
        lambda c, con: accept(c, con, resource_id, interactive=sys.stdin.isatty(), ask=_ask),
    )


@main.group()
def webhooks() -> None:
    """The webhook outbox: what was sent, what is retrying, what failed (UNDOGATE_URL,
    UNDOGATE_KEY)."""


@webhooks.command("list")
@_URL
@_KEY
@click.option("--status", type=click.Choice(["pending", "delivered", "failed"]), default=None)
def webhooks_list(url: str, key: str, status: str | None) -> None:
    """The newest 100 webhook messages; exits 1 if any of them failed for good."""
    from .webhooks import list_messages

    _review(url, key, lambda c, con: list_messages(c, con, status))


@main.command("mcp")
@click.option(
    "--url",
    envvar="UNDOGATE_URL",
    default=None,
    help="The running gateway, e.g. http://127.0.0.1:8080 [env UNDOGATE_URL]. The agent "
    "token comes from UNDOGATE_AGENT_TOKEN only, never an argument.",
)
def mcp_command(url: str | None) -> None:
    """Serve the agent tools over stdio (MCP), forwarding to a running gateway.

    The agent token comes from UNDOGATE_AGENT_TOKEN, never from an argument.
    """
    from ..mcp.bridge import run_stdio

    sys.exit(run_stdio(url))


@main.group("ledger")
def ledger_group() -> None:
    """Move the ledger between engines (docs/scaling.md); verify its hash chain
    (docs/proof.md)."""


@ledger_group.command("copy")
@click.option("--from", "source", required=True, help="sqlite:PATH (the data dir or its file).")
@click.option("--to", "target", required=True, help="postgresql://user@host:port/db")
def ledger_copy(source: str, target: str) -> None:
    """Copy a SQLite ledger, whole, into an empty PostgreSQL ledger, in one transaction,
    verified by row counts and a digest per table. Stop the server first. The password
    comes from PGPASSWORD, never from the URL."""
    from ..errors import InvalidRequest
    from ..ledger import ledger_url_problem
    from ..ledger.postgres_copy import copy_sqlite_to_postgres

    try:
        if not source.startswith("sqlite:"):
            raise InvalidRequest("--from must be sqlite:PATH")
        problem = ledger_url_problem(target)
        if problem is not None:
            raise InvalidRequest(f"--to {problem}")
        copied = copy_sqlite_to_postgres(Path(source.removeprefix("sqlite:")), target)
    except UndogateError as exc:
        _fail(exc)
    click.echo(f"copied ledger {copied.source_id} into {copied.target_id}, verified:")
    for table in copied.tables:
        click.echo(f"  {table.name:<20} {table.rows:>8} rows  sha256 {table.digest[:16]}")


ledger_group.add_command(proof.ledger_verify)
main.add_command(proof.export_receipt)
main.add_command(proof.verify_receipt)

if __name__ == "__main__":  # pragma: no cover
    main()
