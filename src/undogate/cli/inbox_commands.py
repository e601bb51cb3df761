"""``undogate jobs list`` (the review inbox) and ``undogate jobs reject-stale``: the
options and the calls; ``cli/inbox.py`` renders them."""

from __future__ import annotations

import sys
from collections.abc import Callable

import click

from ..operations.inbox import VIEWS
from .common import _KEY, _URL, _ask, _review


def _inbox_options(fn: Callable[..., None]) -> Callable[..., None]:
    """The inbox's filters, shared by ``jobs list`` and ``jobs reject-stale``."""
    for option in reversed(
        (
            click.option("--agent", default=None, help="Only this agent's jobs."),
            click.option("--resource", default=None, help="Only jobs changing this resource."),
            click.option(
                "--since", default=None, help="Prepared at or after: 30m, 12h, 7d ago or ISO 8601."
            ),
        )
    ):
        fn = option(fn)
    return fn


@click.command("list")
@_URL
@_KEY
@click.option(
    "--view",
    type=click.Choice(list(VIEWS)),
    default="recent",
    show_default=True,
)
@click.option("--state", "states", multiple=True, help="Only these states (repeatable).")
@_inbox_options
@click.option("--until", default=None, help="Prepared before: as --since.")
@click.option("--id", "search", default=None, help="Job ids starting with this.")
@click.option("--after", default=None, help="The next page: the job id the last page named.")
@click.option("--limit", type=click.IntRange(1, 100), default=100, show_default=True)
def jobs_list(
    url: str,
    key: str,
    view: str,
    states: tuple[str, ...],
    agent: str | None,
    resource: str | None,
    since: str | None,
    until: str | None,
    search: str | None,
    after: str | None,
    limit: int,
) -> None:
    """The review inbox: every agent's jobs this key may see, newest first, 100 a page,
    with the counts of waiting work; no values."""
    from .inbox import list_inbox

    params = [("view", view), ("limit", str(limit)), *(("state", st) for st in states)]
    for name, value in (
        ("agent", agent),
        ("resource", resource),
        ("since", since),
        ("until", until),
        ("id", search),
        ("after", after),
    ):
        if value is not None:
            params.append((name, value))
    _review(url, key, lambda c, con: list_inbox(c, con, params, view))


@click.command("reject-stale")
@_URL
@_KEY
@click.option(
    "--older-than",
    required=True,
    help="Waiting jobs prepared before this: 7d, 12h, 30m ago, or an ISO 8601 time.",
)
@_inbox_options
@click.option("--reason", default=None, help="Why, for the history (and job_status).")
def jobs_reject_stale(
    url: str,
    key: str,
    older_than: str,
    agent: str | None,
    resource: str | None,
    since: str | None,
    reason: str | None,
) -> None:
    """List the waiting jobs prepared before --older-than and reject them all after one
    typed confirmation (needs a terminal; up to 100 at a time)."""
    from .inbox import reject_stale

    params = [("until", older_than)]
    for name, value in (("agent", agent), ("resource", resource), ("since", since)):
        if value is not None:
            params.append((name, value))
    _review(
        url,
        key,
        lambda c, con: reject_stale(
            c, con, params, reason, interactive=sys.stdin.isatty(), ask=_ask
        ),
    )


__all__ = ["jobs_list", "jobs_reject_stale"]
