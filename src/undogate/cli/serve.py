"""Running undogate: ``open_configured`` (a config file's service, its tokens kept out of
every log), ``serve`` (uvicorn) and ``init``. ``workers`` runs several ``serve``
processes."""

from __future__ import annotations

import errno
import os
import signal
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from ..api.gateway_client import is_loopback
from ..auth import ADMIN, ALL_SCOPES, MASTER_ENV, IssuedKey
from ..config import Config, load_config
from ..errors import ConfigError, InvalidRequest
from ..net import PinnedClient
from ..operations.lease_sweep import ExpiredLeaseSweep
from ..service import Service, open_service
from ..webhooks.delivery import WebhookDelivery, webhook_warnings
from .kinds import kind_warnings
from .operating import PLAIN, Watching
from .redact import install_redaction, uninstall_redaction

Echo = Callable[[str], None]

EXAMPLE_CONFIG = """\
# undogate config: see the README. Tokens live in environment variables, never here.
server:
  data_dir: ./.undogate          # the ledger (dir 0700, db 0600)
  http_timeout_s: 45
resources:
  - id: customer
    agent_id: account-assistant
    name: Customer record
    kind: json_record
    url: https://records.example.com/customers/123
    token_env: CUSTOMER_SERVICE_TOKEN
    fields: [status, owner]
    conditional_writes: false      # set true once the endpoint honours docs/remote-contract.md
agents:
  - id: account-assistant
    tools: [list_resources, prepare_changes]
"""


# `undogate init --example`: the seed of `undogate contract-server` (its default port,
# no --data) as it serves it, so the README's walkthrough runs with nothing to edit.
CONTRACT_PORT = 8765
CONTRACT_EXAMPLE_CONFIG = """\
# undogate config for `undogate contract-server` (the reference endpoint) on port 8765:
# it works as is. The contract server needs no token; a real service would
# (token_env: NAME_OF_AN_ENVIRONMENT_VARIABLE). See docs/config.md.
server:
  data_dir: ./.undogate          # the ledger (dir 0700, db 0600)
resources:
  - id: customer
    agent_id: account-assistant
    name: Customer record
    kind: json_record
    url: http://127.0.0.1:8765/records/customer-123
    fields: [status, owner, tier, balance]
    conditional_writes: true       # the contract server honours docs/remote-contract.md
    allow_loopback_http: true
  - id: account-notes
    agent_id: account-assistant
    name: Account notes
    kind: webdav_text
    url: http://127.0.0.1:8765/docs/notes.md
    conditional_writes: true
    allow_loopback_http: true
agents:
  - id: account-assistant
    tools: [list_resources, prepare_changes]
"""


def contract_example_config(port: int) -> str:
    """The example config for a contract server on ``port`` (``contract-server --port``)."""
    return CONTRACT_EXAMPLE_CONFIG.replace(f":{CONTRACT_PORT}", f":{port}").replace(
        f"port {CONTRACT_PORT}:", f"port {port}:"
    )


@contextmanager
def open_configured(
    config_path: Path, environ: Mapping[str, str] | None = None, *, new_ledger: bool = False
) -> Iterator[Service]:
    """Load the config and open its service (``service.open_service``), with every token
    value it names scrubbed from the logs meanwhile.

    Raises:
        ConfigError, and what ``service.open_service`` raises.
    """
    env = os.environ if environ is None else environ
    config = load_config(config_path)
    # Defence in depth: credential values never reach a log line, whatever logs them.
    redaction = install_redaction(
        [MASTER_ENV, *config.credential_variables, *config.webhooks.secret_envs], environ=env
    )
    try:
        with open_service(config, env, new_ledger=new_ledger) as service:
            yield service
    finally:
        uninstall_redaction(redaction)


def missing_token_warnings(config: Config, environ: Mapping[str, str]) -> list[str]:
    """One warning per unset variable of a resource's credential (names, never values)."""
    return [
        f"warning: resource {r.id}: its token variable {name} is not set, so "
        "undogate refuses to read or write it (missing_token)"
        for r in config.resources
        for name in r.credential_variables
        if not environ.get(name)
    ]


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything says "serving".

    Raises:
        InvalidRequest: the address is in use or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle off only on sockets that name TCP, and
    # with it on every reply waited ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        in_use = exc.errno == errno.EADDRINUSE
        reason = "the port is in use (another undogate?)" if in_use else exc.strerror
        raise InvalidRequest(f"cannot listen on {host}:{port}: {reason}") from None
    sock.set_inheritable(True)
    return sock


def require_config_file(config_path: Path) -> None:
    """Raises: ConfigError (no config file, suggesting ``init``)."""
    if not config_path.is_file():
        raise ConfigError(
            [("", f"no such file: run `undogate init --config {config_path}` to write one")],
            str(config_path),
        )


def serve(
    config_path: Path,
    host: str,
    port: int,
    echo: Echo,
    *,
    new_ledger: bool = False,
    listen_fd: int | None = None,
    watching: Watching = PLAIN,
) -> None:
    """Take a lease on the ledger, recover, and serve
    the API until interrupted. ``listen_fd``: serve on that inherited listening socket
    (a worker of ``serve --workers``) instead of binding ``host:port``. ``watching``:
    the log format (configured by the caller) and the metrics bind.

    Raises:
        ConfigError (also: no config file, suggesting ``init``), LedgerInUse, LedgerError,
        InvalidRequest (also: the port is in use).
    """
    import uvicorn
    from starlette.types import ASGIApp
    from uvicorn.config import LOGGING_CONFIG

    from ..api.metrics import MetricsBind
    from ..metrics import serving

    require_config_file(config_path)
    # A SIGTERM exits through the finally blocks below, which close the ledger (a
    # PostgreSQL lease is then ended, not left to expire): by default it would kill the
    # process outright, also when uvicorn re-raises the one it shut down on.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    sock = listen(host, port) if listen_fd is None else socket.socket(fileno=listen_fd)
    sockets = [sock]
    sweep: ExpiredLeaseSweep | None = None  # started once recovery has run
    try:
        sockets += _metrics_socket(watching)
        with open_configured(config_path, new_ledger=new_ledger) as svc:
            ledger = svc.context.ledger
            echo(ledger.describe())
            for warning in svc.config.warnings:
                echo(f"warning: {warning}")
            for warning in missing_token_warnings(svc.config, os.environ):
                echo(warning)
            for warning in webhook_warnings(svc.config.webhooks, os.environ):
                echo(warning)
            for warning in kind_warnings():
                echo(warning)
            if not is_loopback(host):
                echo(
                    f"warning: listening on {host}: bearer keys cross the network in plain "
                    "HTTP; put a TLS-terminating proxy in front"
                )
            counts = svc.recover()
            echo(
                "recovery: {uncertain} interrupted write(s) now uncertain, {settled} "
                "operation(s) settled, {invalidated} job(s) invalidated".format(**counts)
            )
            # Settle, as they expire, the leases of processes that die.
            every_s = svc.config.server.lease_s / 3
            sweep = ExpiredLeaseSweep(ledger, svc.context.live, every_s).start()
            if svc.keyring.operator_count() == 0:
                echo("warning: no operator key exists yet: run `undogate keys create-operator`")
            if not svc.keyring.has_master:
                echo(
                    f"note: {MASTER_ENV} is not set; key administration over the API takes "
                    f"an operator key with {ADMIN} (init's first key has it)"
                )
            from ..app import build_app

            app: ASGIApp = build_app(svc)
            echo(f"undogate serving http://{host}:{port} (ledger {ledger.location})")
            if len(sockets) > 1:
                bound = sockets[1].getsockname()
                app = MetricsBind(app, svc, (str(bound[0]), int(bound[1])))
                echo(f"metrics at http://{watching_url(bound)}/metrics (loopback, no key)")
            serving()
            config = uvicorn.Config(
                app,
                log_level="warning",
                access_log=False,
                # JSON logs: uvicorn's records go to the root's handler, not its own.
                log_config=None if watching.log_format == "json" else LOGGING_CONFIG,
            )
            try:
                with _webhook_delivery(svc):
                    uvicorn.Server(config).run(sockets=sockets)
            finally:
                if sweep is not None:
                    sweep.stop()
    finally:
        for each in sockets:
            each.close()


def _metrics_socket(watching: Watching) -> list[socket.socket]:
    """The socket of ``--metrics-bind``: bound here, or inherited by a worker."""
    if watching.metrics_fd is not None:
        return [socket.socket(fileno=watching.metrics_fd)]
    if watching.metrics_bind is not None:
        return [listen(*watching.metrics_bind)]
    return []


def watching_url(bound: tuple[str, int] | tuple[str, int, int, int]) -> str:
    host, port = str(bound[0]), int(bound[1])
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


@contextmanager
def _webhook_delivery(svc: Service) -> Iterator[None]:
    """The webhook outbox's delivery task, running beside the server (its own client:
    a receiver's time limit is the webhook settings', not a resource's)."""
    settings = svc.config.webhooks
    http = PinnedClient(request_timeout_s=settings.timeout_s, ca_bundle=svc.config.server.ca_bundle)
    delivery = WebhookDelivery(settings, svc.context.ledger, http, os.environ)
    delivery.start()
    try:
        yield
    finally:
        delivery.stop()
        http.close()


def init(
    config_path: Path,
    echo: Echo,
    *,
    new_ledger: bool = False,
    example: bool = False,
    port: int = CONTRACT_PORT,
) -> IssuedKey | None:
    """Write a config if none (``example``: one for the contract server on ``port``,
    which works as is), create the ledger, and issue the first operator key, with
    every scope, ``keys:admin`` included (returned, and printed once). Returns None when
    an operator key already exists.

    Raises:
        ConfigError, LedgerInUse, LedgerError, InvalidRequest (``new_ledger`` on a
        ledger that is whole).
    """
    if not config_path.exists():
        config_path.write_text(
            contract_example_config(port) if example else EXAMPLE_CONFIG, encoding="utf-8"
        )
        what = "a config for `undogate contract-server`" if example else "an example config"
        echo(f"wrote {what} to {config_path}")
    elif example:
        echo(f"{config_path} exists: left as it is (--example writes only a new file)")
    with open_configured(config_path, environ={}, new_ledger=new_ledger) as svc:
        echo(svc.context.ledger.describe())
        if svc.keyring.operator_count():
            echo("an operator key already exists; create more with `undogate keys create-operator`")
            return None
        # The first key administers keys too: through a server's API it is the way to
        # issue agent tokens (ADMIN), with no master key to set and no restart.
        return svc.keyring.create_operator(
            label="first operator", scopes=ALL_SCOPES, actor="cli:init"
        )
