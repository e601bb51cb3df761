"""The reviewer's terminal: list, show, apply, undo, reconcile and reject over the API.

Every value is rendered as inert text: JSON values as their exact JSON text, documents
line by line, each with every invisible, blank-looking or control character shown as
``⟨U+XXXX⟩`` in reverse video (the rule of ``invisibles``, as in the web UI; text an agent
typed cannot carry the style), and nothing goes through
Rich markup. Confirming verbs preview first, show exactly
what will be sent and what is not reversible, and need an interactive terminal and a
typed answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..api.gateway_client import ApiClient, ApiError
from ..jobs import STATES
from ..jsonvalue import JsonNumber, JsonValue
from .terminal_values import inert, render_rows

Ask = Callable[[str], str]
#: The agent's ``assertion_kind``, in the words the review pages use.
SOURCE = "source of the values (the agent's claim)"
SETTLED_OK = {s.value for s, f in STATES.items() if f.ends_well}
_VERB = {"apply": "apply", "undo": "undo", "accept_observed": "reconcile"}


def s(value: Any) -> str:
    """A scalar from a lossless JSON answer as plain text (numbers as their exact text)."""
    return value.text if isinstance(value, JsonNumber) else str(value)


def number(index: Any) -> str:
    """A change's index as people count changes, from 1 (the web pages count so too)."""
    text = s(index)
    return str(int(text) + 1) if text.isdigit() else text


def _obj(value: JsonValue) -> dict[str, Any]:
    assert isinstance(value, dict)
    return value


def _list(value: JsonValue) -> list[Any]:
    return value if isinstance(value, list) else []


def _caller_supplied(label: str, value: JsonValue) -> Text | None:
    if not isinstance(value, dict):
        return None
    out = Text(f"{label}: ")
    out.append_text(inert(str(value.get("value"))))
    out.append("  (caller-supplied, not verified)", style="yellow")
    return out


def render_diff(console: Console, lines: list[Any]) -> None:
    for line in lines:
        op = str(line.get("op"))
        style = {"-": "red", "+": "green", "@": "cyan"}.get(op, "dim")
        text = Text("" if op == "@" else f"{op} ", style=style)
        body = inert(str(line.get("line")))
        body.stylize(style)
        text.append_text(body)
        console.print(text, soft_wrap=True)


def render_job(console: Console, job: dict[str, Any]) -> None:
    console.print(Text(f"job {job['id']}  agent {job['agent']}  state ", style="bold"), end="")
    console.print(Text(str(job["state"]), style="bold cyan"))
    summary = Text("summary (agent-supplied text): ")
    summary.append_text(inert(str(_obj(job["summary"])["text"])))
    console.print(summary)
    label = _caller_supplied("attribution label", job.get("attribution_label"))
    if label:
        console.print(label)
    if job.get("invalidated_reason"):
        console.print(inert(f"invalidated: {job['invalidated_reason']}"), style="red")
    for change in _list(job.get("changes")):
        head = Text(f"\nchange {number(change['index'])}: {change['resource']} ({change['kind']}) ")
        head.append(str(change["state"]), style="cyan")
        console.print(head)
        kind = _caller_supplied(SOURCE, change.get("assertion_kind"))
        if kind:
            console.print(kind)
        _render_record_operation(console, change)
        if "diff" in change:
            render_diff(console, _list(change["diff"]))
        else:
            render_rows(console, _list(change.get("rows")), "before", "after")
    actions = _list(job.get("actions"))
    if actions:
        table = Table(title="writes", show_header=True, header_style="bold")
        for col in ("write", "change", "operation", "status", "HTTP", "detail", "ledger id"):
            table.add_column(col)
        for n, a in enumerate(actions, start=1):
            table.add_row(
                str(n),
                number(a["change"]),
                str(a["operation"]),
                str(a["status"]),
                s(a.get("response_status") or ""),
                inert(str(a.get("detail") or "")),
                s(a["id"]),
            )
        console.print(table)


def show_job(client: ApiClient, console: Console, job_id: str) -> int:
    job = _obj(client.request("GET", f"/api/v1/jobs/{job_id}"))
    render_job(console, job)
    if job.get("state") == "rejected":  # who rejected it, and why, from its history
        history = _obj(client.request("GET", f"/api/v1/jobs/{job_id}/events"))
        for event in reversed(_list(history.get("events"))):
            if event.get("operation") == "reject":
                detail = event.get("detail")
                reason = detail.get("reason") if isinstance(detail, dict) else None
                said = f": {reason}" if isinstance(reason, str) else " (no reason given)"
                console.print(inert(f"rejected by {event.get('actor')}{said}"), style="bold")
                break
    return 0


def _render_preview(console: Console, preview: dict[str, Any]) -> None:
    operation = str(preview["operation"])
    for change in _list(preview.get("changes")):
        head = Text(f"\nchange {number(change['index'])}: {change['resource']} ({change['kind']})")
        console.print(head, style="bold")
        if operation == "accept_observed":
            console.print(inert(f"observed: {change.get('observation')}"), style="cyan")
        if "diff" in change:
            render_diff(console, _list(change["diff"]))
        elif "rows" in change:
            render_rows(console, _list(change["rows"]), "current", "planned")
        kind = _caller_supplied(SOURCE, change.get("assertion_kind"))
        if kind:
            console.print(kind)
        _render_record_operation(console, change)
        if change.get("note"):
            console.print(inert(str(change["note"])), style="yellow")
        if change.get("irreversible"):
            console.print(
                "IRREVERSIBLE: undogate will not offer to undo this change", style="bold red"
            )
        elif not change.get("reversible", True):
            console.print("NOT REVERSIBLE: undogate could not undo this change", style="bold red")
    for blocker in _list(preview.get("blockers")):
        console.print(inert(f"blocked: {blocker.get('message')}"), style="bold red")
    if not preview.get("writes_externally", True):
        console.print(
            "\nThis writes nothing externally: it records that you accept the observed state "
            "(not proof that the request ran) and lifts the quarantine.",
            style="yellow",
        )


def _render_record_operation(console: Console, change: dict[str, Any]) -> None:
    """What a collection change does to its record as a whole (docs/collections.md), read
    off its sides: a preview of the undo of a create deletes the record it created."""
    operation, record = change.get("operation"), change.get("record_id")
    if operation not in ("create", "delete"):
        return
    named = inert(str(record)) if record is not None else Text("(the id the server gives it)")
    if "planned_absent" in change:  # a preview: what this step does now
        deletes = bool(change.get("planned_absent"))
    else:  # a receipt: what the job did
        deletes = operation == "delete"
    if deletes and operation == "create":
        line = Text("deletes record ").append_text(named)
        line.append(", which this job created: it exists now, and the fields above are removed")
    elif deletes:
        line = Text("deletes record ").append_text(named)
        line.append(" whole (every field above is its kept pre-image)")
    elif operation == "delete":
        line = Text("re-creates record ").append_text(named).append(" from its kept pre-image")
    else:
        line = Text("creates a new record ").append_text(named)
    console.print(line, style="bold")


def render_body(console: Console, request: dict[str, Any]) -> None:
    """A request body (``views.request_view``) as the lines it is made of (a PUT of a
    document is text, not one line of escapes), each line exact and never re-wrapped;
    invisible characters marked."""
    lines = [str(line) for line in _list(request.get("body_lines"))]
    if not lines:
        console.print("  (no body)", style="dim")
        return
    noun = "line" if len(lines) == 1 else "lines"
    size = f"{s(request['body_bytes'])} bytes, {len(lines)} {noun}"
    if request.get("crlf"):
        size += ", each ending CRLF"
    console.print(f"  body: {size}", style="dim")
    for line in lines:
        console.print(Text("  | ", style="dim").append_text(inert(line)), soft_wrap=True)
    if request.get("missing_final_newline"):
        console.print("  (no newline at the end)", style="dim")


def _render_requests(console: Console, requests: list[Any]) -> None:
    console.print("\nexactly these requests will be sent, in this order:", style="bold")
    for r in requests:
        console.print(inert(f"{r['method']} {r['url']}"), style="bold", soft_wrap=True)
        for name, value in _obj(r.get("headers") or {}).items():
            console.print(inert(f"  {name}: {value}"), soft_wrap=True)
        console.print(inert(f"  {authentication_line(r)}"), style="dim", soft_wrap=True)
        if r.get("body_diff"):
            console.print("  body against the document as read:", style="dim")
            render_diff(console, _list(r["body_diff"]))
        render_body(console, r)


def authentication_line(request: dict[str, Any]) -> str:
    """How a request (``views.request_view``) is authenticated, never with what."""
    described = request.get("authentication")
    if not isinstance(described, dict):
        return "(no credential is added)"
    adds = ", ".join(str(name) for name in _list(described.get("adds")))
    return f"({described.get('summary')}: adds {adds})"


def confirm_operation(
    client: ApiClient,
    console: Console,
    job_id: str,
    operation: str,
    *,
    dry_run: bool,
    interactive: bool,
    ask: Ask,
) -> int:
    """Preview, show, ask, confirm. Returns the exit status."""
    verb = _VERB[operation]
    if not dry_run and not interactive:
        console.print(
            f"refusing to {verb} without an interactive terminal: a person must read the "
            "preview and type the answer (use --dry-run to see the requests)",
            style="red",
        )
        return 2
    base = f"/api/v1/jobs/{job_id}"
    console.print(Text(f"{verb} preview of {job_id}", style="bold"))
    try:
        preview = _obj(client.request("POST", f"{base}/previews", {"operation": operation}))
    except ApiError as exc:
        if "blockers" not in exc.details:
            raise
        # A blocked preview (409): what the reviewer would have seen, then what blocks it.
        shown = _obj(exc.details.get("preview") or {"operation": operation})
        _render_preview(console, {**shown, "blockers": exc.details["blockers"]})
        console.print(f"\nnothing can be confirmed: {verb} is blocked", style="bold red")
        return 1
    _render_preview(console, preview)
    token = preview.get("preview_token")
    assert isinstance(token, str)  # an unblocked preview always carries its token
    requests: list[Any] = []
    if operation != "accept_observed":
        dry = _obj(
            client.request("POST", f"{base}/confirm", {"preview_token": token, "dry_run": True})
        )
        requests = _list(dry.get("requests"))
        _render_requests(console, requests)
    if dry_run:
        console.print("\ndry run: nothing was sent", style="yellow")
        return 0
    if preview.get("passkey_challenge") is not None:
        # A terminal cannot sign; the requirement is never downgraded to a typed answer.
        console.print(
            Text(
                f"\n{verb} of {job_id} needs your passkey, which this terminal cannot give. "
                f"Open {client.url}/jobs/{job_id} in a browser, preview it there and confirm "
                f"with your passkey; then check the receipt: undogate jobs show {job_id}",
                style="bold yellow",
            )
        )
        return 1
    console.print(f"\nthe preview expires in {s(preview.get('expires_in_s'))} s")
    acknowledged = preview.get("acknowledgement_required") is True
    if acknowledged:
        word = ask('This cannot be undone by undogate. Type "irreversible" to go on').strip()
        if word != "irreversible":
            console.print("cancelled: nothing was written", style="yellow")
            return 1
    answer = ask(f'Type "{verb}" to {verb} {job_id} (anything else cancels)').strip()
    if answer != verb:
        console.print("cancelled: nothing was written", style="yellow")
        return 1
    before = _obj(client.request("GET", base))
    seen = {a["id"] for a in _list(before.get("actions"))}
    with console.status(f"{verb}: {len(requests) or 1} step(s)..."):
        body: dict[str, Any] = {"preview_token": token}
        if acknowledged:
            body["acknowledge_irreversible"] = True
        result = _obj(client.request("POST", f"{base}/confirm", body))
    job = _obj(result["job"])
    for action in _list(job.get("actions")):
        if action["id"] in seen:
            continue
        status = str(action["status"])
        style = {"done": "green", "refused": "red", "uncertain": "bold red"}.get(status, "")
        line = Text(
            f"step: change {number(action['change'])} {action['method']} -> {status}", style=style
        )
        if action.get("detail"):
            line.append_text(inert(f" ({action['detail']})"))
        console.print(line)
    console.print(Text(f"job {job['id']} is now {job['state']}", style="bold"))
    return 0 if job["state"] in SETTLED_OK else 1


def reject_job(
    client: ApiClient,
    console: Console,
    job_id: str,
    reason: str | None,
    *,
    interactive: bool,
    ask: Ask,
) -> int:
    if not interactive:
        console.print("refusing to reject without an interactive terminal", style="red")
        return 2
    render_job(console, _obj(client.request("GET", f"/api/v1/jobs/{job_id}")))
    answer = ask(f'Type "reject" to reject {job_id}; it can never be applied after').strip()
    if answer != "reject":
        console.print("cancelled: nothing changed", style="yellow")
        return 1
    body = {"reason": reason} if reason else None
    job = _obj(client.request("POST", f"/api/v1/jobs/{job_id}/reject", body))
    console.print(Text(f"job {job['id']} is now {job['state']}", style="bold"))
    return 0
