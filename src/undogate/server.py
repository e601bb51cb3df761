"""Running undogate: ``serve`` (uvicorn), ``init``, and key administration that works
whether or not a server owns the ledger."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .auth import MASTER_ENV, READ, SCOPES, Keyring
from .config import Config, load_config
from .engine import Gateway, crash_point_from_env
from .errors import InvalidRequest, LedgerInUse, UndogateError
from .jsonvalue import JsonObject, JsonValue, dumps, from_python, loads
from .ledger import Store, open_store
from .net import RemoteHTTP
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
    ledger: Store
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
        ledger = open_store(config.server, new_ledger=new_ledger)
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
        echo(svc.ledger.describe())
        for warning in svc.config.warnings:
            echo(f"warning: {warning}")
        if not _is_loopback(host):
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
        echo(f"undogate serving http://{host}:{port} (ledger {svc.ledger.location})")
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


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
        echo(svc.ledger.describe())
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


class ApiError(UndogateError):
    """An error answer from a remote undogate API, carrying its stable code."""

    def __init__(self, code: str, message: str, status: int, details: JsonObject) -> None:
        super().__init__(message, status=status, **details)
        self.code = code  # type: ignore[misc]


def require_safe_gateway_url(url: str) -> None:
    """A key may travel to a gateway over https, or over plain http only to this machine.

    Raises:
        InvalidRequest: plain http (or another scheme) to any other host.
    """
    parsed = httpx.URL(url)
    if parsed.scheme != "https" and not (parsed.scheme == "http" and _is_loopback(parsed.host)):
        raise InvalidRequest(
            f"refusing to send a key to {parsed.scheme}://{parsed.host}: use https "
            "(plain http is only for 127.0.0.1 or localhost)"
        )


class ApiClient:
    """A small client of undogate's own API (the CLI's only way to a running server)."""

    def __init__(self, url: str, key: str, *, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        require_safe_gateway_url(self.url)
        self._client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
            trust_env=False,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, path: str, body: Any = None) -> JsonValue:
        """Raises: ApiError (the server's error), InvalidRequest (unreachable server)."""
        content = dumps(from_python(body) if body is not None else {}) if body is not None else None
        try:
            response = self._client.request(
                method,
                path,
                content=content,
                headers={"Content-Type": "application/json"} if content is not None else None,
            )
        except httpx.HTTPError as exc:
            raise InvalidRequest(
                f"cannot reach undogate at {self.url}: {exc.__class__.__name__}"
            ) from None
        try:
            value = loads(response.content)
        except ValueError:
            raise ApiError(
                "invalid_response",
                f"HTTP {response.status_code}: not JSON",
                response.status_code,
                {},
            ) from None
        if response.status_code >= 400:
            error = value.get("error") if isinstance(value, dict) else None
            if isinstance(error, dict):
                details = error.get("details")
                raise ApiError(
                    str(error.get("code")),
                    str(error.get("message")),
                    response.status_code,
                    details if isinstance(details, dict) else {},
                )
            raise ApiError("http_error", f"HTTP {response.status_code}", response.status_code, {})
        return value
