"""``undogate demo``: the whole promise in one run, on the embedded default.

A contract server with sample data on 127.0.0.1, a fresh ledger, the served gateway,
and a scripted walk: an agent prepares through the MCP tools (streamable HTTP at
``/mcp``, with its own agent token), then a reviewer previews, confirms and undoes.
It exits 0 only when every resource ends byte-for-byte as it started.
"""

from __future__ import annotations

import json
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import yaml
from rich.console import Console
from rich.table import Table

from .. import views
from ..app import build_app
from ..config import Config, parse_config
from ..contract_server import ContractServer
from ..diffs import unified_diff
from ..jobs import Actor, Job, Operation, Preview
from ..operations.confirm import confirm_preview
from ..operations.context import Context
from ..operations.endpoint_check import check_endpoint
from ..operations.preview import preview_job
from ..operations.undo_offer import accept_verified_undo
from ..service import open_service
from .terminal_values import render_rows

DEMO_CONFIG = "demo.yaml"  # beside this module


def demo_config(server: ContractServer, data_dir: Path) -> Config:
    """The demo's config file, pointed at ``server`` and a ledger under ``data_dir``."""
    text = resources.files(__package__ or "undogate").joinpath(DEMO_CONFIG).read_text("utf-8")
    data = yaml.safe_load(text)
    for resource in data["resources"]:
        resource["url"] = server.url(resource["url"])
    data["server"] = {"data_dir": str(data_dir / "ledger")}
    return parse_config(data)


@contextmanager
def _workspace(data_dir: Path | None) -> Iterator[Path]:
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        yield data_dir
        return
    with tempfile.TemporaryDirectory(prefix="undogate-demo-") as tmp:
        yield Path(tmp)


@contextmanager
def _served(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port, in a thread."""
    import uvicorn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the demo gateway did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


async def _agent_prepares(mcp_url: str, token: str, notes: str) -> dict[str, Any]:
    """What an agent does: list its resources, then prepare one job, all over MCP."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http_client,
        Client(streamable_http_client(mcp_url, http_client=http_client)) as client,
    ):
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        listed = await client.call_tool("list_resources", {})
        names = [r["id"] for r in (listed.structured_content or {}).get("resources", [])]
        print(f"agent sees tools {tools} and resources {names}")
        result = await client.call_tool(
            "prepare_changes",
            {
                "summary": "Convert Ada to a customer owned by Grace, note it in the account",
                "changes": [
                    {
                        "resource": "customer",
                        "set": {
                            "status": "customer",
                            "owner": "grace",
                            "balance": 123456789012345678901234567891,
                        },
                        "assertion_kind": "supplied",
                    },
                    {
                        "resource": "account-notes",
                        "text": notes + "- Converted to customer; owner Grace.\n",
                        "assertion_kind": "inferred",
                    },
                    {
                        "resource": "contacts",
                        "upsert": {"email": "Ada@Example.com", "name": "Ada", "status": "customer"},
                        "assertion_kind": "supplied",
                    },
                ],
                "idempotency_key": "demo-1",
                "attribution_label": "demo script",
            },
        )
        if result.is_error or result.structured_content is None:
            raise RuntimeError(f"prepare_changes was refused: {result.content}")
        return dict(result.structured_content)


def _show_preview(console: Console, preview: Preview) -> None:
    """Each change as its preview view shows it: a line diff, or its fields' rows (as the
    reviewer's CLI shows them: a table when it fits, never a value broken mid-number)."""
    console.print(f"[bold]Preview: {preview.operation.value}[/]")
    changes = views.preview_view(preview, None, time.time())["changes"]
    assert isinstance(changes, list)
    for change in changes:
        assert isinstance(change, dict)
        resource, current, planned = (
            str(change["resource"]),
            change.get("current_text"),
            change.get("planned_text"),
        )
        if change.get("operation") == "create":
            console.print(f"[bold]{resource}[/]: creates a new record {change.get('record_id')}")
        if isinstance(planned, str):
            diff = unified_diff(current if isinstance(current, str) else "", planned, resource)
            console.print(f"[bold]{resource}[/] (line diff, current → planned):")
            console.print(diff, markup=False, highlight=False)
            continue
        rows = change.get("rows") or []
        assert isinstance(rows, list)
        console.print(f"[bold]{resource}[/] (exact JSON, current → planned):")
        render_rows(console, rows, "current", "planned")


def _show_receipt(console: Console, job: Job) -> None:
    table = Table(title=f"Receipt {job.id}: {job.state.value}")
    for col in ("action", "change", "operation", "status", "HTTP", "new ETag"):
        table.add_column(col, overflow="fold")
    for action in job.actions:
        table.add_row(
            str(action.id),
            str(action.change_index),
            action.operation.value,
            action.status.value,
            str(action.response_status or ""),
            action.result_etag or "",
        )
    console.print(table)


def _verify_create_undo(console: Console, context: Context, reviewer: Actor) -> None:
    """Undo of a create is offered only once a test copy verified it and a reviewer
    accepted it (SPEC §12): the demo runs the check on its copy, then accepts."""
    result = check_endpoint(context, "contacts-copy")
    console.print(
        f"[bold]check-endpoint contacts-copy[/]: passed={result.passed}, "
        f"verified undos {list(result.undos)}"
    )
    offer = accept_verified_undo(context, reviewer, "contacts")
    console.print(f"[bold]accepted[/] the verified undos {sorted(offer.accepted)} of contacts")


def _preview(context: Context, reviewer: Actor, job_id: str, operation: Operation) -> Preview:
    return preview_job(context, reviewer, context.get_job(reviewer.owner_id, job_id), operation)


def _confirm(context: Context, reviewer: Actor, job_id: str, token: str) -> Job:
    job = context.get_job(reviewer.owner_id, job_id)
    return confirm_preview(context, reviewer, job, token).job


def run_demo(data_dir: Path | None, console: Console | None = None) -> bool:
    """Run the scripted walk; True when every resource ends exactly as it started."""
    console = console or Console()
    with _workspace(data_dir) as work, ContractServer(work / "contract") as server:
        config = demo_config(server, work)
        paths = {r.id: urlsplit(r.url).path for r in config.resources}
        record_path, notes_path, contacts_path = (
            paths["customer"],
            paths["account-notes"],
            paths["contacts"],
        )
        start = server.raw_bytes(record_path)
        notes_start = server.raw_bytes(notes_path)
        contacts_start = server.collection_records(contacts_path)
        console.print(f"[bold]contract server[/] {server.base_url}  ledger {work / 'ledger'}")
        console.print(f"start:  {start.decode()}", soft_wrap=True)
        with open_service(config, environ={}) as service:
            context, keyring = service.context, service.keyring
            service.recover()
            operator = keyring.create_operator(label="demo reviewer", actor="demo")
            agent_token = keyring.create_agent_token(
                owner_id=operator.credential.id,
                agent_id="account-assistant",
                label="demo agent",
                actor="demo",
            ).key
            reviewer = Actor(
                id=operator.credential.id,
                owner_id=operator.credential.id,
                kind="operator",
                access_path="demo",
            )
            with _served(build_app(service)) as gateway_url:
                console.print(f"[bold]gateway[/] {gateway_url} (API, review UI, /mcp)")
                receipt = anyio.run(
                    _agent_prepares, f"{gateway_url}/mcp", agent_token, notes_start.decode()
                )
            console.print("[bold]the agent's receipt (all an agent ever sees):[/]")
            console.print_json(json.dumps(receipt))
            job_id = str(receipt["job_id"])
            console.print(f"[bold]prepared[/] {job_id} (nothing written yet)")
            _verify_create_undo(console, context, reviewer)
            preview = _preview(context, reviewer, job_id, Operation.APPLY)
            _show_preview(console, preview)
            assert preview.token is not None, preview.blockers
            applied = _confirm(context, reviewer, job_id, preview.token)
            _show_receipt(console, applied)
            console.print(f"after:  {server.raw_bytes(record_path).decode()}", soft_wrap=True)
            console.print(f"notes:  {server.raw_bytes(notes_path).decode()!r}")
            created = server.collection_records(contacts_path)
            console.print(f"contacts: {sorted(created)} (one new record)")
            undo = _preview(context, reviewer, job_id, Operation.UNDO)
            _show_preview(console, undo)
            assert undo.token is not None, undo.blockers
            undone = _confirm(context, reviewer, job_id, undo.token)
            _show_receipt(console, undone)
        end = server.raw_bytes(record_path)
        console.print(f"end:    {end.decode()}", soft_wrap=True)
        restored = (
            end == start
            and server.raw_bytes(notes_path) == notes_start
            and server.collection_records(contacts_path) == contacts_start
        )
        console.print(f"contacts: {sorted(server.collection_records(contacts_path))}")
        if restored:
            console.print(
                "[green bold]record and notes restored byte-for-byte; the created contact "
                "is gone[/]"
            )
        else:
            console.print("[red bold]a resource does not match its start[/]")
        return restored
