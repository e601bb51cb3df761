"""``undogate webhooks list``: the webhook outbox as an operator sees it, over the API."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.table import Table

from ..api.gateway_client import ApiClient
from .review import s
from .terminal_values import inert


def _when(value: Any) -> str:
    if value is None:
        return ""
    at = datetime.fromtimestamp(float(s(value)), UTC)
    return at.strftime("%Y-%m-%d %H:%M:%SZ")


def list_messages(client: ApiClient, console: Console, status: str | None) -> int:
    """The newest 100 messages (only ``status`` ones when given); exits 1 when any shown
    message failed for good, so a cron job can tell."""
    query = f"?status={quote(status, safe='')}" if status else ""
    listing = client.request("GET", f"/api/v1/webhooks/messages{query}")
    found = listing.get("messages") if isinstance(listing, dict) else None
    messages: list[Any] = found if isinstance(found, list) else []
    title = f"webhook messages{f' ({status})' if status else ''}, newest first"
    table = Table(title=title, header_style="bold")
    for col in ("message", "endpoint", "event", "about", "status", "attempts", "last outcome"):
        table.add_column(col, overflow="fold")
    for m in messages:
        outcome = m.get("last_error") or (
            f"HTTP {s(m['last_response_status'])}" if m.get("last_response_status") else ""
        )
        if m["status"] == "pending" and m.get("next_attempt_at") is not None:
            outcome = f"{outcome}; next attempt {_when(m['next_attempt_at'])}".lstrip("; ")
        table.add_row(
            str(m["id"]),
            str(m["endpoint"]),
            str(m["event"]),
            inert(str(m["job_id"] or f"agent {m['agent']}")),
            str(m["status"]),
            s(m["attempts"]),
            inert(outcome),
        )
    if messages:
        console.print(table)
    else:
        console.print(f"no webhook messages{f' with status {status}' if status else ''}")
    return 1 if any(m["status"] == "failed" for m in messages) else 0
