"""``undogate demo``: the whole promise in one run, on the embedded default.

A contract server with sample data on 127.0.0.1, a fresh ledger, and a scripted walk
through prepare → preview → confirm → undo. It exits 0 only when every resource ends
byte-for-byte as it started.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .config import Config, parse_config
from .contract_server import ContractServer
from .engine import Actor, Gateway, PrepareRequest, Preview
from .jobs import ChangeRequest, Job, Operation
from .jsonvalue import JsonNumber, dumps
from .ledger import Ledger
from .net import RemoteHTTP

REVIEWER = Actor(id="demo-reviewer", owner_id="demo-owner", kind="operator", access_path="demo")
AGENT = Actor(id="account-assistant", owner_id="demo-owner", kind="agent", access_path="demo")
RECORD_PATH = "/records/customer-123"
NOTES_PATH = "/docs/notes.md"


def demo_config(server: ContractServer, data_dir: Path) -> Config:
    return parse_config(
        {
            "server": {"data_dir": str(data_dir / "ledger")},
            "resources": [
                {
                    "id": "customer",
                    "agent_id": "account-assistant",
                    "name": "Customer record",
                    "kind": "json_record",
                    "url": server.url(RECORD_PATH),
                    "fields": ["status", "owner", "tier", "balance"],
                    "conditional_writes": True,
                    "allow_loopback_http": True,
                },
                {
                    "id": "account-notes",
                    "agent_id": "account-assistant",
                    "name": "Account notes",
                    "kind": "webdav_text",
                    "url": server.url(NOTES_PATH),
                    "conditional_writes": True,
                    "allow_loopback_http": True,
                },
            ],
            "agents": [{"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}],
        }
    )


@contextmanager
def _workspace(data_dir: Path | None) -> Iterator[Path]:
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        yield data_dir
        return
    with tempfile.TemporaryDirectory(prefix="undogate-demo-") as tmp:
        yield Path(tmp)


def _show_preview(console: Console, preview: Preview) -> None:
    table = Table(title=f"Preview: {preview.operation.value}", show_lines=True)
    table.add_column("resource")
    table.add_column("field")
    table.add_column("current (exact JSON)", overflow="fold")
    table.add_column("planned (exact JSON)", overflow="fold")
    for view in preview.changes:
        if view.diff is not None:
            console.print(f"[bold]{view.resource_id}[/] (line diff, current → planned):")
            console.print(view.diff, markup=False, highlight=False)
            continue
        current = view.current or {}
        planned = view.planned or {}
        for name in sorted(set(current) | set(planned)):
            table.add_row(
                view.resource_id,
                name,
                dumps(current[name]) if name in current else "(absent)",
                dumps(planned[name]) if name in planned else "(absent)",
            )
    console.print(table)


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


def run_demo(data_dir: Path | None, console: Console | None = None) -> bool:
    """Run the scripted walk; True when every resource ends exactly as it started."""
    console = console or Console()
    with _workspace(data_dir) as work, ContractServer(work / "contract") as server:
        start = server.raw_bytes(RECORD_PATH)
        notes_start = server.raw_bytes(NOTES_PATH)
        console.print(f"[bold]contract server[/] {server.base_url}  ledger {work / 'ledger'}")
        console.print(f"start:  {start.decode()}")
        config = demo_config(server, work)
        ledger = Ledger.open(config.server.data_dir)
        http = RemoteHTTP(request_timeout_s=config.server.request_timeout_s)
        try:
            gateway = Gateway(config=config, ledger=ledger, http=http)
            gateway.recover()
            prepared = gateway.prepare(
                AGENT,
                "account-assistant",
                PrepareRequest(
                    summary="Convert Ada to a customer owned by Grace, with her exact balance",
                    changes=(
                        ChangeRequest(
                            resource_id="customer",
                            set={
                                "status": "customer",
                                "owner": "grace",
                                "balance": JsonNumber("123456789012345678901234567891"),
                            },
                        ),
                        ChangeRequest(
                            resource_id="account-notes",
                            text=notes_start.decode() + "- Converted to customer; owner Grace.\n",
                        ),
                    ),
                    idempotency_key="demo-1",
                    attribution_label="demo script",
                ),
            )
            job_id = prepared.job.id
            console.print(f"[bold]prepared[/] {job_id} (nothing written yet)")
            preview = gateway.preview(REVIEWER, job_id, Operation.APPLY)
            _show_preview(console, preview)
            assert preview.token is not None, preview.blockers
            applied = gateway.confirm(REVIEWER, job_id, preview.token).job
            _show_receipt(console, applied)
            console.print(f"after:  {server.raw_bytes(RECORD_PATH).decode()}")
            console.print(f"notes:  {server.raw_bytes(NOTES_PATH).decode()!r}")
            undo = gateway.preview(REVIEWER, job_id, Operation.UNDO)
            _show_preview(console, undo)
            assert undo.token is not None, undo.blockers
            undone = gateway.confirm(REVIEWER, job_id, undo.token).job
            _show_receipt(console, undone)
        finally:
            http.close()
            ledger.close()
        end = server.raw_bytes(RECORD_PATH)
        console.print(f"end:    {end.decode()}")
        restored = end == start and server.raw_bytes(NOTES_PATH) == notes_start
        if restored:
            console.print("[green bold]record and notes restored byte-for-byte[/]")
        else:
            console.print("[red bold]a resource does not match its start[/]")
        return restored
