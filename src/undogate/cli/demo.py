"""``undogate demo``: the whole promise in one run, on the embedded default.

A contract server with sample data on 127.0.0.1, a fresh ledger, the served gateway,
and a scripted walk: an agent prepares through the MCP tools (streamable HTTP at
``/mcp``, with its own agent token), then a reviewer previews, confirms and undoes.
It exits 0 only when every resource ends byte-for-byte as it started.
"""

from __future__ import annotations

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
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from .. import views
from ..app import build_app
from ..config import Config, parse_config
from ..contract_server import ContractServer
from ..diffs import unified_diff
from ..jobs import Actor, Job, Operation, Preview
from ..jsonvalue import dumps, loads_object
from ..operations.confirm import confirm_preview
from ..operations.context import Context
from ..operations.endpoint_check import check_endpoint
from ..operations.preview import preview_job
from ..operations.undo_offer import accept_verified_undo
from ..service import open_service
from .terminal_values import inert, render_rows

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
        print(f"the agent sees tools: {', '.join(tools)}")
        print(f"the agent sees resources: {', '.join(names)}")
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
        record = change.get("record_id") or "(the id the server gives it)"
        if change.get("operation") == "create" and change.get("planned_absent"):
            console.print(f"[bold]{resource}[/]: deletes record {record}, which this job created")
        elif change.get("operation") == "create":
            console.print(f"[bold]{resource}[/]: creates a new record {record}")
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
    """The job's writes, numbered within the job; changes counted from 1, as everywhere."""
    table = Table(title=f"Receipt {job.id}: {job.state.value}")
    for col in ("write", "change", "operation", "status", "HTTP", "new ETag"):
        table.add_column(col, no_wrap=True)
    for number, action in enumerate(job.actions, start=1):
        table.add_row(
            str(number),
            str(action.change_index + 1),
            action.operation.value,
            action.status.value,
            str(action.response_status or ""),
            action.result_etag or "",
        )
    console.print(table)


def _verify_create_undo(console: Console, context: Context, reviewer: Actor) -> None:
    """Undo of a create is offered only once a test copy verified it and a reviewer
    accepted it (docs/collections.md): the demo runs the check on its copy, then accepts."""
    result = check_endpoint(context, "contacts-copy")
    console.print(
        f"[bold]check-endpoint contacts-copy[/]: {'passed' if result.passed else 'FAILED'}; "
        f"verified undos: {', '.join(result.undos) or 'none'}"
    )
    offer = accept_verified_undo(context, reviewer, "contacts")
    console.print(
        f"[bold]accepted[/] the verified undos of contacts: {', '.join(sorted(offer.accepted))}"
    )


def _show_record(console: Console, label: str, raw: bytes) -> None:
    """A record's exact JSON, one top-level field a line (a whole record on one line is
    wider than a terminal)."""
    console.print(f"[bold]{label}[/]")
    for name, value in loads_object(raw.decode()).items():
        console.print(Text(f"  {name}: ").append_text(inert(dumps(value))), soft_wrap=True)


def _show_text(console: Console, label: str, raw: bytes) -> None:
    """A document's text, line by line, each line as it is."""
    console.print(f"[bold]{label}[/]")
    for line in raw.decode().split("\n")[:-1] if raw.endswith(b"\n") else raw.decode().split("\n"):
        console.print(Text("  | ", style="dim").append_text(inert(line)), soft_wrap=True)


def _show_agent_receipt(console: Console, receipt: dict[str, Any]) -> None:
    """What an agent got back, field by field (no values, no URLs, by design)."""
    console.print("[bold]the agent's receipt (all an agent ever sees):[/]")
    console.print(f"  job {receipt['job_id']}, {receipt['state']}")
    for number, change in enumerate(receipt.get("changes", []), start=1):
        fields = ", ".join(change.get("fields") or []) or "the whole document"
        console.print(
            f"  change {number}: {change['resource']} ({change['kind']}): {fields}", markup=False
        )
        if change.get("record_id"):
            console.print(f"    record {change['record_id']}", markup=False)
    console.print(Padding(Text(str(receipt["review"])), (0, 0, 0, 2)))


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
        _show_record(console, "the record at the start:", start)
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
            _show_agent_receipt(console, receipt)
            job_id = str(receipt["job_id"])
            console.print(f"[bold]prepared[/] {job_id} (nothing written yet)")
            _verify_create_undo(console, context, reviewer)
            preview = _preview(context, reviewer, job_id, Operation.APPLY)
            _show_preview(console, preview)
            assert preview.token is not None, preview.blockers
            applied = _confirm(context, reviewer, job_id, preview.token)
            _show_receipt(console, applied)
            _show_record(console, "the record after the apply:", server.raw_bytes(record_path))
            _show_text(console, "the notes after the apply:", server.raw_bytes(notes_path))
            created = server.collection_records(contacts_path)
            console.print(f"contacts: {len(created)} new record, id {', '.join(sorted(created))}")
            undo = _preview(context, reviewer, job_id, Operation.UNDO)
            _show_preview(console, undo)
            assert undo.token is not None, undo.blockers
            undone = _confirm(context, reviewer, job_id, undo.token)
            _show_receipt(console, undone)
        end = server.raw_bytes(record_path)
        _show_record(console, "the record at the end:", end)
        restored = (
            end == start
            and server.raw_bytes(notes_path) == notes_start
            and server.collection_records(contacts_path) == contacts_start
        )
        left = server.collection_records(contacts_path)
        console.print(
            f"contacts: {len(left)} records" + (f" ({', '.join(sorted(left))})" if left else "")
        )
        if restored:
            console.print(
                "[green bold]record and notes restored byte-for-byte; the created contact "
                "is gone[/]"
            )
        else:
            console.print("[red bold]a resource does not match its start[/]")
        return restored
