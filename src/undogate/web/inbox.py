"""The review inbox page (docs/operating.md): every job the key may see across agents, with the
views (waiting, needs review, quarantined, recent), the filters, search by id and keyset
pages; and bulk reject of the waiting jobs a filter selects, after one confirmation page.

Thin like the other views: it parses with ``operations.inbox.parse_filter`` (the API's
own reading), asks the ``Service`` (which decides visibility) and renders a template.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..auth import WRITE, Principal
from ..errors import InvalidRequest
from ..jobs import JobState
from ..operations.inbox import VIEW_WORDS, VIEWS, parse_filter
from ..service import Reader, Reviewer, Service
from .pages import Form, Pages
from .sessions import Session

#: The navigation's counts for the page being rendered (one request, one task).
NAV_COUNTS: ContextVar[Mapping[str, int] | None] = ContextVar("nav_counts", default=None)


async def nav_counts(service: Service, principal: Principal) -> None:
    """Fetch the counts the navigation shows, for this request's page (a key without
    agents:read sees none)."""
    reader = Reader.may(principal, "web")
    if reader is not None:
        NAV_COUNTS.set(await service.reviewers.inbox_counts(reader))


def _params(request: Request) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        out.setdefault(name, []).append(value)
    return out


def _link(params: Mapping[str, list[str]], **changed: str | None) -> str:
    """``/inbox`` with ``params``, ``changed`` replacing (None: dropping) some."""
    pairs = [(k, v) for k, vs in params.items() if k not in changed for v in vs if v]
    pairs += [(k, v) for k, v in changed.items() if v]
    return "/inbox" + ("?" + urlencode(pairs) if pairs else "")


class InboxPages:
    def __init__(self, ui: Pages) -> None:
        self.ui = ui

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/inbox", self.ui._get(self.inbox, Reader), methods=["GET"]),
            Route("/inbox/reject", self.ui._get(self.confirm_reject, Reviewer), methods=["GET"]),
            Route("/inbox/reject", self.ui._post(self.reject, Reviewer), methods=["POST"]),
        ]

    def _choices(self, reader: Reader) -> tuple[list[str], list[str]]:
        """The agents and the resources the filters offer."""
        agents = self.ui.service.reviewers.visible_agents(reader)
        resources = [r.id for r in self.ui.service.config.resources if r.agent_id in agents]
        return agents, resources

    async def inbox(
        self, request: Request, session: Session, form: Form, reader: Reader
    ) -> Response:
        params = _params(request)
        wanted = parse_filter(params, self.ui.service.clock())
        page = await self.ui.service.reviewers.inbox(reader, wanted)
        NAV_COUNTS.set(page.counts)
        agents, resources = self._choices(reader)
        return self.ui.render(
            "inbox.html",
            session,
            page=page,
            wanted=wanted,
            raw={k: (v[0] if v else "") for k, v in params.items()},
            views=[(v, VIEW_WORDS[v], _link(params, view=v, after=None)) for v in VIEWS],
            states=[s.value for s in JobState],
            next_link=_link(params, after=page.next_after) if page.next_after else None,
            first_link=_link(params, after=None) if wanted.after else None,
            reject_link=_link(params, view=None, after=None).replace("/inbox", "/inbox/reject", 1)
            if WRITE in reader.principal.scopes and wanted.view == "waiting" and page.rows
            else None,
            agents=agents,
            resources=resources,
        )

    async def confirm_reject(
        self, request: Request, session: Session, form: Form, reviewer: Reviewer
    ) -> Response:
        """The one confirmation: exactly which waiting jobs, and a reason for them all."""
        params = _params(request)
        wanted = parse_filter(params, self.ui.service.clock()).to_reject()
        page = await self.ui.service.reviewers.inbox(reviewer, wanted)
        return self.ui.render(
            "inbox_reject.html",
            session,
            page=page,
            job_ids=" ".join(r.id for r in page.rows),
            more=page.next_after is not None,
            back=_link(params, view="waiting"),
        )

    async def reject(
        self, request: Request, session: Session, form: Form, reviewer: Reviewer
    ) -> Response:
        job_ids = tuple(form.get("jobs", "").split())
        if not job_ids:
            raise InvalidRequest("the form names no job; open the inbox and try again")
        outcomes = await self.ui.service.reviewers.reject_many(
            reviewer, job_ids, form.get("reason") or None
        )
        done = sum(1 for o in outcomes if o.rejected)
        left = len(outcomes) - done
        await self.ui.notify(
            session,
            f"Rejected {done} of {len(outcomes)} jobs."
            + (f" {left} had moved on and were left as they are." if left else ""),
        )
        return self.ui._redirect("/inbox?view=waiting")


__all__ = ["NAV_COUNTS", "InboxPages", "nav_counts"]
