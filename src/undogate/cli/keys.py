"""Key administration, directly on the ledger (beside the processes serving it), or
through a server's API (``UNDOGATE_URL``) with an operator key that holds
``keys:admin`` (``UNDOGATE_KEY``) or the master key (``UNDOGATE_MASTER_KEY``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..api.gateway_client import ApiClient
from ..auth import ADMIN, MASTER_ENV, READ, SCOPES, Keyring
from ..errors import InvalidRequest, LedgerInUse
from ..invisibles import visible
from ..jsonvalue import JsonNumber, JsonValue
from .serve import open_configured


@dataclass(frozen=True)
class KeyCommand:
    """One key operation, expressed once and run either way."""

    action: str  # create_operator | create_agent | list | revoke
    label: str | None = None
    read_only: bool = False
    admin: bool = False
    agents: tuple[str, ...] | None = None
    agent: str | None = None
    owner: str | None = None
    credential: str | None = None
    force: bool = False


def run_key_command(
    config_path: Path, cmd: KeyCommand, environ: Mapping[str, str] | None = None
) -> tuple[JsonValue, str]:
    """Run ``cmd`` through a server's API when ``UNDOGATE_URL`` and a key name one
    (``UNDOGATE_KEY``, an operator key with keys:admin, or else ``UNDOGATE_MASTER_KEY``),
    else on the ledger directly (beside the processes serving it). Returns the result
    and which path was used (``direct``/``api``).

    Raises:
        UndogateError: as the operation (or the API) refuses it; InvalidRequest when an
            undogate that does not share its ledger owns it and no URL or key is set.
    """
    env = os.environ if environ is None else environ
    url = env.get("UNDOGATE_URL")
    key = env.get("UNDOGATE_KEY") or env.get(MASTER_ENV)
    if url and key:
        return _via_api(url, key, cmd), "api"
    try:
        with open_configured(config_path, environ={}) as svc:
            return _direct(svc.keyring, cmd), "direct"
    except LedgerInUse as exc:
        raise InvalidRequest(
            f"{exc.message}. To manage keys through its API, set UNDOGATE_URL (e.g. "
            f"http://127.0.0.1:8080) and UNDOGATE_KEY (an operator key with {ADMIN}, "
            f"such as the one `init` printed) or {MASTER_ENV}"
        ) from None


def _scopes(cmd: KeyCommand) -> tuple[str, ...]:
    base = (READ,) if cmd.read_only else SCOPES
    return (*base, ADMIN) if cmd.admin else base


def _direct(keyring: Keyring, cmd: KeyCommand) -> JsonValue:
    if cmd.action == "create_operator":
        return keyring.create_operator(
            label=cmd.label or "operator", scopes=_scopes(cmd), agents=cmd.agents
        ).to_json()
    if cmd.action == "create_agent":
        assert cmd.agent
        return keyring.create_agent_token(
            owner_id=cmd.owner or keyring.only_operator(),
            agent_id=cmd.agent,
            label=cmd.label or cmd.agent,
        ).to_json()
    if cmd.action == "list":
        return {"credentials": [c.to_json() for c in keyring.list()]}
    assert cmd.action == "revoke" and cmd.credential
    return keyring.revoke(cmd.credential, force=cmd.force).to_json()


def _via_api(url: str, key: str, cmd: KeyCommand) -> JsonValue:
    body: dict[str, Any] | None
    if cmd.action == "create_operator":
        method, path = "POST", "/api/v1/admin/keys"
        body = {"kind": "operator", "label": cmd.label or "operator", "scopes": list(_scopes(cmd))}
        if cmd.agents is not None:
            body["agents"] = list(cmd.agents)
    elif cmd.action == "create_agent":
        method, path = "POST", "/api/v1/admin/keys"
        body = {"kind": "agent", "label": cmd.label or cmd.agent, "agent": cmd.agent}
        if cmd.owner is not None:
            body["owner"] = cmd.owner
    elif cmd.action == "list":
        method, path, body = "GET", "/api/v1/admin/keys", None
    else:
        method, path = "POST", f"/api/v1/admin/keys/{cmd.credential}/revoke"
        body = {"force": cmd.force}
    client = ApiClient(url, key)
    try:
        return client.request(method, path, body)
    finally:
        client.close()


def _when(value: JsonValue) -> str:
    """An epoch time (a JSON number, exact or float) as a UTC date and minute."""
    from datetime import UTC, datetime

    if value is None:
        return "-"
    seconds = float(value.text) if isinstance(value, JsonNumber) else float(str(value))
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _cell(value: Any) -> str:
    text = value.text if isinstance(value, JsonNumber) else str(value)
    return visible(text, keep_newlines=False)  # labels are operator-typed: shown, never obeyed


def credentials_table(listing: JsonValue) -> list[str]:
    """``keys list`` as lines of a plain table: never wrapped or cut, whatever the
    terminal's width (ids must stay whole to be copied)."""
    credentials = listing.get("credentials") if isinstance(listing, dict) else None
    header = ("id", "kind", "owner", "agent", "scopes", "label", "created", "revoked")
    rows = [header]
    for c in credentials if isinstance(credentials, list) else []:
        if not isinstance(c, dict):
            continue
        agents = c.get("agents")
        if c.get("kind") == "agent":
            agent = _cell(c.get("agent_id"))
        else:
            agent = ",".join(map(_cell, agents)) if isinstance(agents, list) else "(all)"
        scopes = c.get("scopes")
        rows.append(
            (
                _cell(c.get("id")),
                _cell(c.get("kind")),
                _cell(c.get("owner_id")),
                agent,
                ",".join(map(_cell, scopes)) if isinstance(scopes, list) else "",
                _cell(c.get("label")),
                _when(c.get("created_at")),
                _when(c.get("revoked_at")) if c.get("revoked") else "no",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def print_result(result: JsonValue, path: str, cmd: KeyCommand, *, as_json: bool) -> None:
    """A key command's result: a new key alone on stdout's first line (shown once), then
    the credential as ``keys list`` shows it (``as_json``: as JSON); a listing as a table."""
    import click

    from ..jsonvalue import dumps

    click.echo(f"({'through the API' if path == 'api' else 'directly on the ledger'})", err=True)
    if isinstance(result, dict) and "key" in result:
        click.echo("the key (shown once; undogate keeps only its hash):", err=True)
        click.echo(str(result["key"]))
        result = {k: v for k, v in result.items() if k != "key"}
        if not as_json:  # the new credential as the listing shows it: no JSON, no epoch time
            for line in credentials_table({"credentials": [result.get("credential")]}):
                click.echo(line)
            return
    if cmd.action == "list" and not as_json:
        for line in credentials_table(result):
            click.echo(line)
        return
    click.echo(dumps(result, sort_keys=False))


__all__ = ["KeyCommand", "credentials_table", "print_result", "run_key_command"]
