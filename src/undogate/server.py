"""Running undogate: ``serve`` (uvicorn), ``init``, and the two verbs that work whether
or not a server owns the ledger (key administration and the endpoint check): directly
on the ledger, or through the running server's API (``client.ApiClient``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .auth import MASTER_ENV, READ, SCOPES, Keyring
from .client import ApiClient, is_loopback
from .config import Config, load_config
from .engine import Gateway, crash_point_from_env
from .errors import InvalidRequest, LedgerInUse
from .jsonvalue import JsonObject, JsonValue
from .ledger import Ledger
from .net import RemoteHTTP
from .operations.endpoint_check import CheckResult, check_endpoint, result_view
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
    conditional_writes: false      # set true once the endpoint honours the contract (SPEC §6)
agents:
  - id: account-assistant
    tools: [list_resources, prepare_changes]
"""


@dataclass
class Opened:
    config: Config
    ledger: Ledger
    gateway: Gateway
    keyring: Keyring


def known_agents(config: Config) -> Callable[[], set[str]]:
    return lambda: {a.id for a in config.agents}


@contextmanager
def open_service(
    config_path: Path, environ: Mapping[str, str] | None = None, *, new_ledger: bool = False
) -> Iterator[Opened]:
    """Load the config, own the ledger, build the gateway and keyring; closes both.
    ``new_ledger`` replaces a lost ledger (see ``Ledger.open``).

    Raises:
        ConfigError, LedgerInUse, LedgerError (LedgerMissing, LedgerForeign: the data
        dir remembers another ledger), InvalidRequest (a short master key, or
        ``new_ledger`` on a ledger that is whole).
    """
    env = os.environ if environ is None else environ
    config = load_config(config_path)
    # Defence in depth: token values never reach a log line, whatever logs them.
    redaction = install_redaction(
        [r.token_env for r in config.resources if r.token_env], environ=env
    )
    try:
        ledger = Ledger.open(config.server.data_dir, new_ledger=new_ledger)
    except BaseException:
        uninstall_redaction(redaction)
        raise
    http = RemoteHTTP(
        request_timeout_s=config.server.request_timeout_s, ca_bundle=config.server.ca_bundle
    )
    try:
        gateway = Gateway(
            config=config,
            ledger=ledger,
            http=http,
            environ=env,
            crash_at=crash_point_from_env(env),
        )
        keyring = Keyring.from_environ(ledger, env, known_agents(config))
        yield Opened(config, ledger, gateway, keyring)
    finally:
        http.close()
        ledger.close()
        uninstall_redaction(redaction)


def serve(config_path: Path, host: str, port: int, echo: Echo, *, new_ledger: bool = False) -> None:
    """Own the ledger, recover, and serve the API until interrupted.

    Raises:
        ConfigError, LedgerInUse, LedgerError, InvalidRequest.
    """
    import uvicorn

    with open_service(config_path, new_ledger=new_ledger) as svc:
        echo(svc.ledger.identity.describe(svc.ledger.path))
        for warning in svc.config.warnings:
            echo(f"warning: {warning}")
        if not is_loopback(host):
            echo(
                f"warning: listening on {host}: bearer keys cross the network in plain HTTP; "
                "put a TLS-terminating proxy in front"
            )
        counts = svc.gateway.recover()
        echo(
            "recovery: {uncertain} interrupted write(s) now uncertain, {settled} operation(s) "
            "settled, {invalidated} job(s) invalidated".format(**counts)
        )
        if svc.keyring.operator_count() == 0:
            echo("warning: no operator key exists yet: run `undogate keys create-operator`")
        if not svc.keyring.has_master:
            echo(f"note: {MASTER_ENV} is not set; key administration over the API is off")
        app = build_app(svc.gateway, svc.keyring)
        echo(f"undogate serving http://{host}:{port} (ledger {svc.ledger.path})")
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def build_app(gateway: Gateway, keyring: Keyring) -> Any:
    """The whole served surface: the API, the review web UI and the agents' ``/mcp``.

    Kept here rather than in ``api.create_app`` because the web UI and the MCP server
    both build on the API module.
    """
    from starlette.routing import Route

    from .api import create_app
    from .mcp_http import build_mcp_app
    from .web import web_routes

    mcp = build_mcp_app(gateway, keyring)
    routes = [Route("/mcp", endpoint=mcp), *web_routes(gateway, keyring)]
    return create_app(gateway, keyring, routes=routes, lifespan=mcp.lifespan)


def init(config_path: Path, echo: Echo, *, new_ledger: bool = False) -> str | None:
    """Write an example config if none, create the ledger, and issue the first operator
    key (returned, and printed once). Returns None when an operator key already exists.

    Raises:
        ConfigError, LedgerInUse, LedgerError, InvalidRequest (``new_ledger`` on a
        ledger that is whole).
    """
    if not config_path.exists():
        config_path.write_text(EXAMPLE_CONFIG, encoding="utf-8")
        echo(f"wrote an example config to {config_path}")
    with open_service(config_path, environ={}, new_ledger=new_ledger) as svc:
        echo(svc.ledger.identity.describe(svc.ledger.path))
        if svc.keyring.operator_count():
            echo("an operator key already exists; create more with `undogate keys create-operator`")
            return None
        issued = svc.keyring.create_operator(label="first operator", actor="cli:init")
        return issued.key


# -- key administration: directly, or through the API when a server owns the ledger -----


@dataclass(frozen=True)
class KeyCommand:
    """One key operation, expressed once and run either way."""

    action: str  # create_operator | create_agent | list | revoke
    label: str | None = None
    read_only: bool = False
    agents: tuple[str, ...] | None = None
    agent: str | None = None
    owner: str | None = None
    credential: str | None = None
    force: bool = False


def run_key_command(
    config_path: Path, cmd: KeyCommand, environ: Mapping[str, str] | None = None
) -> tuple[JsonValue, str]:
    """Run ``cmd`` on the ledger directly, or through the API with the master key when a
    server owns it. Returns the result and which path was used (``direct``/``api``).

    Raises:
        UndogateError: as the operation (or the API) refuses it.
    """
    env = os.environ if environ is None else environ
    try:
        with open_service(config_path, environ={}) as svc:
            return _direct(svc.keyring, cmd), "direct"
    except LedgerInUse as exc:
        url = env.get("UNDOGATE_URL")
        master = env.get(MASTER_ENV)
        if not url or not master:
            raise InvalidRequest(
                f"{exc.message}. To manage keys while it runs, set UNDOGATE_URL and "
                f"{MASTER_ENV} (the server's master key)"
            ) from None
        return _via_api(url, master, cmd), "api"


def _scopes(cmd: KeyCommand) -> tuple[str, ...]:
    return (READ,) if cmd.read_only else SCOPES


def _direct(keyring: Keyring, cmd: KeyCommand) -> JsonValue:
    if cmd.action == "create_operator":
        return keyring.create_operator(
            label=cmd.label or "operator", scopes=_scopes(cmd), agents=cmd.agents
        ).to_json()
    if cmd.action == "create_agent":
        assert cmd.agent and cmd.owner
        return keyring.create_agent_token(
            owner_id=cmd.owner, agent_id=cmd.agent, label=cmd.label or cmd.agent
        ).to_json()
    if cmd.action == "list":
        return {"credentials": [c.to_json() for c in keyring.list()]}
    assert cmd.action == "revoke" and cmd.credential
    return keyring.revoke(cmd.credential, force=cmd.force).to_json()


def _via_api(url: str, master: str, cmd: KeyCommand) -> JsonValue:
    body: dict[str, Any] | None
    if cmd.action == "create_operator":
        method, path = "POST", "/api/v1/admin/keys"
        body = {"kind": "operator", "label": cmd.label or "operator", "scopes": list(_scopes(cmd))}
        if cmd.agents is not None:
            body["agents"] = list(cmd.agents)
    elif cmd.action == "create_agent":
        method, path = "POST", "/api/v1/admin/keys"
        body = {
            "kind": "agent",
            "label": cmd.label or cmd.agent,
            "agent": cmd.agent,
            "owner": cmd.owner,
        }
    elif cmd.action == "list":
        method, path, body = "GET", "/api/v1/admin/keys", None
    else:
        method, path = "POST", f"/api/v1/admin/keys/{cmd.credential}/revoke"
        body = {"force": cmd.force}
    client = ApiClient(url, master)
    try:
        return client.request(method, path, body)
    finally:
        client.close()


# -- the endpoint check (SPEC §11): directly, or through the API when a server owns it ----

ENDPOINT_CHECK_PATH = "/api/v1/endpoint-checks"
ENDPOINT_CHECK_TIMEOUT_S = 300.0  # a whole check: about a dozen requests, each bounded


def run_endpoint_check(
    config_path: Path, test_copy_id: str, environ: Mapping[str, str]
) -> tuple[JsonObject, str]:
    """Run the check directly on the ledger when no server owns it, or through the
    server's API (``UNDOGATE_URL`` + ``UNDOGATE_KEY``, an operator key with
    agents:write) when one does. Returns the ``result_view`` and the path taken
    (``direct`` or ``api``).

    Raises:
        ConfigError, LedgerError, InvalidRequest (a server owns the ledger and no URL
        or key is set), ApiError (the server refused), and what ``check_endpoint`` raises.
    """
    try:
        return result_view(_run_directly(config_path, test_copy_id, environ)), "direct"
    except LedgerInUse as exc:
        url, key = environ.get("UNDOGATE_URL"), environ.get("UNDOGATE_KEY")
        if not url or not key:
            raise InvalidRequest(
                f"{exc.message}. To check while it serves, set UNDOGATE_URL and "
                "UNDOGATE_KEY (an operator key with agents:write)"
            ) from None
    client = ApiClient(url, key, timeout=ENDPOINT_CHECK_TIMEOUT_S)
    try:
        view = client.request("POST", ENDPOINT_CHECK_PATH, {"resource": test_copy_id})
    finally:
        client.close()
    if not isinstance(view, dict):
        raise InvalidRequest(f"{url} answered the check with something other than an object")
    return view, "api"


def _run_directly(config_path: Path, test_copy_id: str, environ: Mapping[str, str]) -> CheckResult:
    """Load the config, own the ledger for the check, run it, close everything.

    Raises:
        ConfigError, LedgerInUse (a server owns the ledger), LedgerError, and what
        ``check_endpoint`` raises.
    """
    config = load_config(config_path)
    redaction = install_redaction(
        [r.token_env for r in config.resources if r.token_env], environ=environ
    )
    try:
        ledger = Ledger.open(config.server.data_dir)
        try:
            http = RemoteHTTP(
                request_timeout_s=config.server.request_timeout_s,
                ca_bundle=config.server.ca_bundle,
            )
            try:
                return check_endpoint(config, ledger, http, test_copy_id, environ)
            finally:
                http.close()
        finally:
            ledger.close()
    finally:
        uninstall_redaction(redaction)
