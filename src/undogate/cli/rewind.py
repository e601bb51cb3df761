"""``undogate rewind`` and ``undogate agents stop|resume`` over the API (docs/rewind.md).

``rewind`` plans, previews and shows the whole plan (one row per step, its verdict and
what blocks it, then every exact request in order), and confirms only after the
reviewer types ``rewind`` at an interactive terminal, as ``apply`` does.
"""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..api.gateway_client import ApiClient
from ..jsonvalue import dumps
from .common import _KEY, _URL, _ask, _review
from .review import Ask, _list, _obj, _render_requests, s
from .terminal_values import inert

VERB = "rewind"


def _shown(value: Any) -> Text:
    return inert("absent" if value is None else dumps(value))


def render_plan(console: Console, plan: dict[str, Any]) -> None:
    """The plan as one table: step, job, resource, fields, verdict, what is in the way."""
    console.print(
        Text(f"rewind plan {plan['rewind_id']}  agent {plan['agent']}  ", style="bold"),
        Text(str(plan["state"]), style="bold cyan"),
    )
    table = Table(show_lines=False)
    for column in ("step", "job", "resource", "fields", "verdict", "outcome", "why"):
        table.add_column(column)
    for step in _list(plan.get("steps")):
        why = Text()
        if step.get("verdict") == "blocked":
            if step.get("in_the_way"):
                why.append(f"job {step['in_the_way']} is in the way. ")
            if "current" in step:
                why.append("now: ")
                why.append_text(_shown(step["current"]))
                why.append(" ")
        if step.get("message"):
            why.append_text(inert(str(step["message"])))
        table.add_row(
            s(step["step"]),
            str(step["job"]),
            str(step["resource"]),
            ", ".join(str(f) for f in _list(step.get("fields"))),
            str(step["verdict"]),
            str(step.get("outcome") or ""),
            why,
        )
    console.print(table)


def run_rewind(
    client: ApiClient,
    console: Console,
    selection: dict[str, Any],
    *,
    skip_blocked: bool,
    interactive: bool,
    ask: Ask,
) -> int:
    """Plan, preview, show, ask, confirm. Returns the exit status."""
    if not interactive:
        console.print(
            "refusing to rewind without an interactive terminal: a person must read the "
            "plan and type the answer",
            style="red",
        )
        return 2
    plan = _obj(client.request("POST", "/api/v1/rewinds", selection))
    base = f"/api/v1/rewinds/{plan['rewind_id']}"
    preview = _obj(client.request("POST", f"{base}/preview"))
    render_plan(console, preview)
    _render_requests(console, _list(preview.get("requests")))
    blocked = _list(preview.get("skip_blocked_leaves"))
    if blocked and not skip_blocked:
        console.print(
            f"\n{len(blocked)} step(s) are blocked: nothing can be confirmed. Run again with "
            "--skip-blocked to undo everything else and leave them as they are",
            style="bold red",
        )
        return 1
    if preview.get("passkey_challenge") is not None:
        console.print(
            Text(
                f"\nthis plan needs your passkey, which this terminal cannot give. Open "
                f"{client.url}/rewinds/{plan['rewind_id']} in a browser and confirm "
                "it there",
                style="bold yellow",
            )
        )
        return 1
    console.print(f"\nthe preview expires in {s(preview.get('expires_in_s'))} s")
    answer = ask(f'Type "{VERB}" to run plan {plan["rewind_id"]} (anything else cancels)').strip()
    if answer != VERB:
        console.print("cancelled: nothing was written", style="yellow")
        return 1
    body: dict[str, Any] = {"preview_token": preview["preview_token"], "skip_blocked": skip_blocked}
    with console.status("rewinding..."):
        done = _obj(client.request("POST", f"{base}/confirm", body))
    render_plan(console, done)
    jobs = _obj(done.get("jobs") or {})
    if done.get("stopped"):
        stopped = _obj(done["stopped"])
        console.print(
            Text("the plan stopped at step ", style="bold red")
            + Text(str(stopped.get("step")))
            + Text(": ")
            + inert(str(stopped.get("message")))
        )
        return 1
    console.print(f"rewound: {sum(1 for v in jobs.values() if v == 'done')} job(s) undone")
    return 0


@click.command(VERB)
@_URL
@_KEY
@click.option("--agent", required=True, help="The agent whose work to undo.")
@click.option("--since", required=True, help="30m, 2h, 7d ago, or an ISO 8601 time.")
@click.option("--until", default=None, help="The end of the window (default: now).")
@click.option("--label", default=None, help="Only jobs with this attribution label.")
@click.option("--session", default=None, help="Only jobs of this agent session.")
@click.option("--skip-blocked", is_flag=True, help="Undo everything else; leave blocked steps.")
def rewind_command(
    url: str,
    key: str,
    agent: str,
    since: str,
    until: str | None,
    label: str | None,
    session: str | None,
    skip_blocked: bool,
) -> None:
    """Undo an agent's work since a moment as one reviewed plan (needs a terminal)."""
    selection: dict[str, Any] = {"agent": agent, "since": since}
    for name, value in (("until", until), ("label", label), ("session", session)):
        if value is not None:
            selection[name] = value
    _review(
        url,
        key,
        lambda c, con: run_rewind(
            c,
            con,
            selection,
            skip_blocked=skip_blocked,
            interactive=sys.stdin.isatty(),
            ask=_ask,
        ),
    )


@click.group("agents")
def agents_group() -> None:
    """Stop or resume an agent (UNDOGATE_URL, UNDOGATE_KEY)."""


def _stop_verb(verb: str) -> None:
    @agents_group.command(
        verb,
        help="Stop AGENT: refuse its prepares, hold its waiting jobs."
        if verb == "stop"
        else "Resume AGENT after a stop.",
    )
    @_URL
    @_KEY
    @click.argument("agent")
    def command(url: str, key: str, agent: str) -> None:
        def act(client: ApiClient, console: Console) -> int:
            state = _obj(client.request("POST", f"/api/v1/agents/{agent}/{verb}"))
            if state.get("stopped"):
                console.print(
                    f"{agent} is stopped: its new prepares are refused (agent_stopped) and its "
                    "waiting jobs are held from confirmation until you resume it"
                )
            else:
                console.print(f"{agent} runs: its prepares and confirmations are accepted")
            return 0

        _review(url, key, act)


_stop_verb("stop")
_stop_verb("resume")

__all__ = ["agents_group", "render_plan", "rewind_command", "run_rewind"]
