"""The review pages of a rewind (docs/rewind.md): from an agent's page, stop or resume
the agent and ask for "Undo this agent's work since…"; the plan as one table with its
verdicts and what blocks each blocked row; one preview (every exact request in order)
and one confirmation, approved by the reviewer's passkey where a resource of the plan
requires one (the job's preview page's own passkey step: one challenge over the whole
plan); then the plan's report."""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import quote

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..auth import WRITE
from ..errors import InvalidRequest
from ..jobs import Job
from ..jsonvalue import JsonNumber, JsonObject, JsonValue
from ..operations.inbox import parse_time
from ..operations.rewind_plan import Selection
from ..operations.rewind_view import plan_view, preview_view
from ..service import Reader, Reviewer, Service
from ..views import agent_rewind_path
from . import exact, present
from .pages import Form, Pages
from .passkey_pages import PasskeyPages
from .sessions import Session


class RewindPages(Pages, Protocol):
    """The review UI as these pages use it: the passkey step of the job's preview too."""

    passkey_pages: PasskeyPages


#: Each verdict as the plan's opening sentence counts it ("2 to undo, 1 blocked").
COUNT_WORDS = {
    "undo": "to undo",
    "blocked": "blocked",
    "irreversible": "irreversible",
    "already_undone": "already undone",
    "quarantined": "quarantined",
}


def shown_plan(view: JsonObject) -> dict[str, Any]:
    """The plan's view with what its page adds: the verdicts counted in words, each
    step's message as a sentence, and for a step blocked by what its resource will show,
    that against what its job wrote (a document's texts, else the changed parts)."""
    steps: list[dict[str, Any]] = []
    for step in present.objects(view["steps"]):
        message = step.get("message")
        resource = str(step["resource"])
        step["why"] = _sentence(message, resource) if isinstance(message, str) and message else ""
        if "current" in step:
            step["now"], step["wrote"] = _blocked_sides(step["current"], step.get("values"))
        values = step.get("values")
        whole_text = isinstance(values, dict) and "after_text" in values
        named = ", ".join(str(f) for f in step.get("fields") or [])
        step["parts"] = named or ("the whole text" if whole_text else "")
        steps.append(step)
    counts = view["counts"]
    assert isinstance(counts, dict)  # plan_view counts every verdict
    counted = [
        f"{n.text} {COUNT_WORDS.get(v, v)}"
        for v, n in counts.items()
        if isinstance(n, JsonNumber) and n.text != "0"
    ]
    return {**view, "steps": steps, "counted": ", ".join(counted)}


def _sentence(message: str, resource: str) -> str | Markup:
    """A step's message as a sentence: one that opens with the resource's id keeps the
    id as written (set as code), any other starts with a capital."""
    text = message if message.endswith((".", "!", "?")) else message + "."
    rest = text.removeprefix(resource)
    if resource and rest != text and rest[:1] in (" ", "'"):
        return Markup("<code>{}</code>{}").format(resource, rest)
    return present.capitalized(text)


def _blocked_sides(current: JsonValue, values: JsonValue) -> tuple[JsonValue, JsonValue]:
    """What a blocked step's resource will show and what its job wrote, in one shape: a
    document's two texts, or the changed parts of anything else (``None``: absent)."""
    if not isinstance(values, dict):
        return current, None
    if "after_text" in values:
        now = current.get("text") if isinstance(current, dict) else current
        return now, values["after_text"]
    return current, values.get("after")


async def held_since(service: Service, reader: Reader, job: Job) -> float | None:
    """When the job's agent was stopped, which holds the job's apply from confirmation
    (None: it runs, or this key does not see it)."""
    if job.agent_id not in service.reviewers.visible_agents(reader):
        return None
    return await service.rewinds.stopped_at(reader, job.agent_id)


def _selection(agent_id: str, form: Form, now: float) -> Selection:
    """Raises: InvalidRequest (a time neither a duration nor a date)."""
    since = (form.get("since") or "").strip()
    if not since:
        raise InvalidRequest("say since when: a duration ago (2h) or a date and time")
    until = (form.get("until") or "").strip()
    return Selection(
        agent_id=agent_id,
        since=parse_time(since, now, name="since"),
        until=parse_time(until, now, name="until") if until else None,
        label=(form.get("label") or "").strip() or None,
        session=(form.get("session") or "").strip() or None,
    )


def rewind_routes(ui: RewindPages) -> list[BaseRoute]:
    """The agent's rewind page, stop and resume, a plan, its preview and its confirm,
    through the UI's session and cross-site checks (its ``_get``/``_post``)."""
    rewinds = ui.service.rewinds

    def plan_page(rewind_id: str) -> str:
        return f"/rewinds/{quote(rewind_id, safe='')}"

    async def agent(request: Request, session: Session, form: Form, reader: Reader) -> Response:
        agent_id = str(request.path_params["agent_id"])
        stopped_at = await rewinds.stopped_at(reader, agent_id)
        return ui.render(
            "rewind_agent.html",
            session,
            agent_id=agent_id,
            stopped_at=stopped_at,
            can_write=WRITE in session.principal.scopes,
        )

    async def stop(request: Request, session: Session, form: Form, reviewer: Reviewer) -> Response:
        agent_id = str(request.path_params["agent_id"])
        if request.url.path.endswith("/stop"):
            await rewinds.stop(reviewer, agent_id)
            notice = "Stopped: its new prepares are refused and its waiting jobs held."
        else:
            await rewinds.resume(reviewer, agent_id)
            notice = "Resumed: its prepares and confirmations are accepted again."
        await ui.notify(session, notice)
        return ui._redirect(agent_rewind_path(agent_id))

    async def plan(request: Request, session: Session, form: Form, reviewer: Reviewer) -> Response:
        agent_id = str(request.path_params["agent_id"])
        made = await rewinds.create(reviewer, _selection(agent_id, form, ui.service.clock()))
        return ui._redirect(plan_page(made.id))

    async def show(request: Request, session: Session, form: Form, reader: Reader) -> Response:
        found = await rewinds.plan(reader, str(request.path_params["rewind_id"]))
        return ui.render(
            "rewind.html",
            session,
            plan=shown_plan(plan_view(found)),
            preview=None,
            can_write=WRITE in session.principal.scopes,
        )

    async def preview(
        request: Request, session: Session, form: Form, reviewer: Reviewer
    ) -> Response:
        made = await rewinds.preview(reviewer, str(request.path_params["rewind_id"]))
        view = preview_view(made, ui.service.clock())
        listed = view["requests"]
        assert isinstance(listed, list)  # preview_view always lists them
        requests = exact.request_blocks([r for r in listed if isinstance(r, dict)])
        return ui.render(
            "rewind.html",
            session,
            plan=shown_plan(view),
            preview=view,
            page={"requests": requests},
            can_write=True,
            passkey=await ui.passkey_pages.confirm_step(
                request, reviewer.principal, made.passkey_challenge
            ),
            passkey_signs="this exact plan (every request above in its order, its expiry and "
            "its token)",
            passkey_retry="Try again, or preview the plan again.",
            passkey_retry_after="preview the plan again",
        )

    async def confirm(
        request: Request, session: Session, form: Form, reviewer: Reviewer
    ) -> Response:
        rewind_id = str(request.path_params["rewind_id"])
        await rewinds.confirm(
            reviewer,
            rewind_id,
            form.get("preview_token") or "",
            skip_blocked=form.get("skip_blocked") == "yes",
            passkey_assertion=form.get("passkey_assertion") or None,
        )
        await ui.notify(session, "The plan ran: its report is below.")
        return ui._redirect(plan_page(rewind_id))

    return [
        Route("/agents/{agent_id}/rewind", ui._get(agent, Reader), methods=["GET"]),
        Route("/agents/{agent_id}/rewind", ui._post(plan, Reviewer), methods=["POST"]),
        Route("/agents/{agent_id}/stop", ui._post(stop, Reviewer), methods=["POST"]),
        Route("/agents/{agent_id}/resume", ui._post(stop, Reviewer), methods=["POST"]),
        Route("/rewinds/{rewind_id}", ui._get(show, Reader), methods=["GET"]),
        Route("/rewinds/{rewind_id}/preview", ui._post(preview, Reviewer), methods=["POST"]),
        Route("/rewinds/{rewind_id}/confirm", ui._post(confirm, Reviewer), methods=["POST"]),
    ]


__all__ = ["held_since", "rewind_routes"]
