"""The review inbox in the terminal (docs/operating.md): ``undogate jobs list`` across agents with
its filters and keyset pages, and ``undogate jobs reject-stale``, which lists the waiting
jobs prepared before a time and rejects them all after one typed confirmation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from rich.console import Console
from rich.text import Text

from ..api.gateway_client import ApiClient
from ..jobs import STATES
from ..jsonvalue import JsonNumber, JsonValue
from ..operations.inbox import MAX_BULK, VIEW_WORDS
from .review import s
from .terminal_values import inert

Ask = Callable[[str], str]
#: The counts of work waiting for a person: (state, words), then the quarantined jobs.
COUNT_WORDS = (
    *((s.value, f.waiting_words[0]) for s, f in STATES.items() if f.waiting_words),
    ("quarantined", "quarantined"),
)


def _when(value: JsonValue) -> str:
    seconds = float(value.text) if isinstance(value, JsonNumber) else 0.0
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")


def _page(client: ApiClient, params: Sequence[tuple[str, str]]) -> dict[str, Any]:
    value = client.request("GET", "/api/v1/inbox?" + urlencode(list(params)))
    assert isinstance(value, dict)
    return value


def _table(console: Console, title: str, jobs: list[Any]) -> None:
    """The jobs as a plain table whose cells are never wrapped or cut, whatever the
    terminal's width (ids must stay whole to be copied); the agent's summary last."""
    header = ("job", "agent", "state", "changes", "resources", "prepared (UTC)", "summary")
    rows: list[tuple[str, ...]] = [header]
    for j in jobs:
        state = str(j["state"]) + (" (quarantined)" if j.get("quarantined") else "")
        rows.append(
            (
                str(j["id"]),
                str(j["agent"]),
                state,
                s(j["changes"]),
                ",".join(str(r) for r in j.get("resources", [])),
                _when(j.get("created_at")),
                str(j["summary"]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    console.print(Text(title, style="bold"))
    for row in rows:
        cells = [v.ljust(w) for v, w in zip(row, widths, strict=False)]
        line = inert("  ".join([*cells, row[-1]]).rstrip())
        line.no_wrap = True
        line.overflow = "ignore"
        console.print(line, soft_wrap=True)


def counts_line(counts: Any) -> str:
    """``waiting 3 · needs review 1 · quarantined 0``: the work this key may see."""
    counts = counts if isinstance(counts, dict) else {}
    return " · ".join(f"{words} {s(counts.get(state, 0))}" for state, words in COUNT_WORDS)


def list_inbox(
    client: ApiClient, console: Console, params: Sequence[tuple[str, str]], view: str
) -> int:
    """One page of the inbox, the counts, and the command for the next page."""
    page = _page(client, params)
    jobs = page.get("jobs") if isinstance(page.get("jobs"), list) else []
    assert isinstance(jobs, list)
    _table(console, f"{VIEW_WORDS[view]} (newest first)", jobs)
    if not jobs:
        console.print("no jobs match", style="dim")
    console.print(counts_line(page.get("counts")))
    after = page.get("next_after")
    if isinstance(after, str):
        console.print(Text(f"more: add --after {after}", style="dim"))
    return 0


def reject_stale(
    client: ApiClient,
    console: Console,
    params: Sequence[tuple[str, str]],
    reason: str | None,
    *,
    interactive: bool,
    ask: Ask,
) -> int:
    """List the waiting jobs ``params`` select (up to ``MAX_BULK``), confirm once, reject
    them all with ``reason``; a job that moved on meanwhile is left, with why."""
    if not interactive:
        console.print("refusing to reject without an interactive terminal", style="red")
        return 2
    page = _page(client, [*params, ("view", "waiting"), ("limit", str(MAX_BULK))])
    jobs = page.get("jobs") if isinstance(page.get("jobs"), list) else []
    assert isinstance(jobs, list)
    if not jobs:
        console.print("no waiting job matches: nothing to reject")
        return 0
    _table(console, "waiting jobs to reject", jobs)
    if page.get("next_after") is not None:
        console.print(f"(the newest {MAX_BULK}; run it again for the rest)", style="yellow")
    n = len(jobs)
    answer = ask(f'Type "reject {n}" to reject these {n} jobs; none can be applied after').strip()
    if answer != f"reject {n}":
        console.print("cancelled: nothing changed", style="yellow")
        return 1
    body: dict[str, Any] = {"jobs": [str(j["id"]) for j in jobs]}
    if reason:
        body["reason"] = reason
    done = client.request("POST", "/api/v1/inbox/reject", body)
    outcomes = done.get("outcomes") if isinstance(done, dict) else None
    failed = 0
    rows: list[Any] = outcomes if isinstance(outcomes, list) else []
    for o in rows:
        if o.get("rejected"):
            console.print(f"{o['job']}: rejected")
        else:
            failed += 1
            console.print(inert(f"{o['job']}: left as it is [{o.get('code')}] {o.get('message')}"))
    console.print(Text(f"{n - failed} of {n} rejected", style="bold"))
    return 0 if failed == 0 else 1


__all__ = ["counts_line", "list_inbox", "reject_stale"]
