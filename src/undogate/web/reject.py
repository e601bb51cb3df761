"""Rejecting one job: ``GET /jobs/{id}/reject`` asks for the reason and the confirmation
(a rejected job can never be applied, so it is never one click), ``POST`` rejects it."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..service import Reviewer
from .pages import Form, Pages
from .sessions import Session


def reject_routes(ui: Pages) -> list[BaseRoute]:
    """The confirmation page and the rejection, through the UI's session and cross-site
    checks (its ``_get``/``_post``)."""

    async def ask(request: Request, session: Session, form: Form, reviewer: Reviewer) -> Response:
        job = await ui.service.reviewers.job(reviewer, str(request.path_params["job_id"]))
        return ui.render("job_reject.html", session, job=job)

    async def reject(
        request: Request, session: Session, form: Form, reviewer: Reviewer
    ) -> Response:
        job = await ui.service.reviewers.reject(
            reviewer,
            str(request.path_params["job_id"]),
            form.get("reason") or None,
        )
        await ui.notify(session, "Rejected. This job can never be applied.")
        return ui._redirect(f"/jobs/{quote(job.id, safe='')}")

    path = "/jobs/{job_id}/reject"
    return [
        Route(path, ui._get(ask, Reviewer), methods=["GET"]),
        Route(path, ui._post(reject, Reviewer), methods=["POST"]),
    ]


__all__ = ["reject_routes"]
