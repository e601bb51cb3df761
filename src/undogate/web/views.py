"""The review pages (docs/operating.md): sign-in, agents, jobs, a job, its preview and receipt.

Views are thin: the route table says, once per page, which caller it needs (``Reader``,
``Reviewer``, ...); the gates establish the session, check the form came from this site
with this session's CSRF token and hand the view that caller, which it passes to the
``Service``; the view renders a template. Domain errors become pages through ``refusals``
(words) and the API's ``status_for`` (statuses, by error class), in ``_refused``.

Safety, on every response: Jinja2 autoescaping (values are always inert text), a
Content-Security-Policy with ``default-src 'none'`` and same-origin scripts only (the
preview countdown, the passkey step), ``Cache-Control: no-store`` and no framing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .. import views
from ..adapters.base import ABSENT_VERSION
from ..api import STATUS_BY_CODE, status_for
from ..auth import WRITE
from ..errors import Forbidden, InvalidRequest, NotFound, UndogateError, log_refusal
from ..jobs import JobState, Operation
from ..ledger import Store
from ..service import MAX_KEY_CHARS, Caller, Reader, Reviewer, Service
from ..service.access import in_thread
from . import exact, present
from .blocked import blocked_changes
from .forms import cross_site, read_form
from .history import history
from .inbox import NAV_COUNTS, InboxPages, nav_counts
from .pages import Form, View
from .passkey_pages import PasskeyPages
from .refusals import Refusal, refusal_for, refusal_for_code
from .reject import reject_routes
from .rewind import held_since, rewind_routes
from .sessions import Session, SessionStore, SigninTokens
from .undo_offer import undo_offer_routes

log = logging.getLogger(__name__)
T = TypeVar("T")
C = TypeVar("C", bound=Caller)
VIA = "web"  # the access path the ledger records for what arrives here
#: The label of the key signed in, for the page being rendered (one request, one task).
SIGNED_IN_AS: ContextVar[str | None] = ContextVar("signed_in_as", default=None)

HERE = Path(__file__).parent
SESSION_COOKIE = "undogate_session"
SIGNIN_COOKIE = "undogate_signin"
CSP = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


@dataclass(frozen=True)
class WebSettings:
    """The review UI's settings (defaults are the product's defaults)."""

    session_idle_s: float = 12 * 3600.0
    session_absolute_s: float = 7 * 24 * 3600.0
    # None: Secure cookies when the request (or ``server.public_url``) is https.
    secure_cookies: bool | None = None
    clock: Callable[[], float] = field(default=time.time)


Endpoint = Callable[[Request], Awaitable[Response]]


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=present.shown,
    )
    env.filters["json"] = exact.json_text
    env.filters["breakable"] = exact.breakable
    env.filters["is_long"] = exact.is_long
    env.filters["glimpse"] = exact.glimpse
    env.filters["when"] = present.when
    env.filters["state_words"] = present.state_words
    env.filters["job_verb"] = present.job_verb
    env.globals["not_reversible"] = present.NOT_REVERSIBLE
    env.globals["absent_version"] = ABSENT_VERSION
    env.globals["nav_counts_shown"] = present.NAV_COUNTS_SHOWN
    env.globals["refusal_words"] = refusal_for_code
    return env


def _text_param(request: Request, name: str) -> str | None:
    found = request.path_params.get(name)
    return found if isinstance(found, str) else None


def _job_path(job_id: str, *rest: str) -> str:
    return "/".join(["/jobs", quote(job_id, safe=""), *rest])


class WebUI:
    """The review pages over the service."""

    def __init__(self, service: Service, settings: WebSettings, ledger: Store) -> None:
        """``ledger`` keeps the pages' own state (sessions), shared by every process."""
        self.service = service
        self.settings = settings
        self.sessions = SessionStore(
            ledger,
            idle_s=settings.session_idle_s,
            absolute_s=settings.session_absolute_s,
            clock=settings.clock,
        )
        self.signin_tokens = SigninTokens(
            ledger.write(lambda tx: tx.web_secret()), clock=settings.clock
        )
        self.templates = _environment()
        self.passkey_pages = PasskeyPages(service, self.render, self._redirect, self.notify)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/", self._answering(self.home), methods=["GET"]),
            Route("/signin", self._answering(self.signin_form), methods=["GET"]),
            Route("/signin", self._answering(self.signin), methods=["POST"]),
            Route("/signout", self._post(self.signout, Caller), methods=["POST"]),
            Route("/agents", self._get(self.agents, Reader), methods=["GET"]),
            Route("/agents/{agent_id}", self._get(self.agent_jobs, Reader), methods=["GET"]),
            Route("/jobs", self._get(self.open_job, Reader), methods=["GET"]),
            Route("/jobs/{job_id}", self._get(self.job, Reader), methods=["GET"]),
            Route(
                "/jobs/{job_id}/previews",
                self._post(self.make_preview, Reviewer),
                methods=["POST"],
            ),
            Route(
                "/jobs/{job_id}/previews/{handle}",
                self._get(self.show_preview, Reader),
                methods=["GET"],
            ),
            Route("/jobs/{job_id}/confirm", self._post(self.confirm, Reviewer), methods=["POST"]),
            Route("/jobs/{job_id}/receipt", self._get(self.receipt, Reader), methods=["GET"]),
            *reject_routes(self),
            *undo_offer_routes(self),
            *rewind_routes(self),
            *InboxPages(self).routes(),
            Route("/webhooks", self._get(self.webhooks, Reader), methods=["GET"]),
            Route("/favicon.ico", self.favicon, methods=["GET"]),
            *self.passkey_pages.routes(self._get, self._post),
            Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        ]

    async def favicon(self, request: Request) -> Response:
        """Where browsers look for an icon unasked: the one the pages link to."""
        return RedirectResponse("/static/favicon.svg", status_code=301)

    # -- rendering -------------------------------------------------------------------

    def render(
        self,
        template: str,
        session: Session | None,
        *,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        page = self.templates.get_template(template).render(
            session=session,
            principal=session.principal if session else None,
            notice=session.take_notice() if session else context.pop("notice", None),
            nav_counts=NAV_COUNTS.get() if session else None,
            signed_in_as=SIGNED_IN_AS.get() if session else None,
            **context,
        )
        return HTMLResponse(exact.markers_as_html(page), status_code=status, headers=PAGE_HEADERS)

    def _refused(
        self,
        session: Session | None,
        refusal: Refusal,
        *,
        status: int,
        job_id: str | None = None,
        operation: str | None = None,
        blocked: Mapping[str, Any] | None = None,
        rewind_id: str | None = None,
    ) -> HTMLResponse:
        return self.render(
            "refusal.html",
            session,
            status=status,
            refusal=refusal,
            job_id=job_id,
            operation=operation,
            blocked=blocked,
            rewind_id=rewind_id,
        )

    async def _blocked(
        self, session: Session, job_id: str | None, exc: UndogateError, operation: str | None
    ) -> dict[str, Any] | None:
        """For a step another job blocks (an ordering refusal, a quarantine): that job, what
        each blocked change would have written, and whether the job can still be rejected."""
        in_the_way = present.blocking_job(exc.details)
        if job_id is None or in_the_way is None:
            return None
        try:
            job = await self.service.reviewers.job(Reader.of(session.principal, VIA), job_id)
            op = Operation(operation) if operation else None
        except (UndogateError, ValueError):
            return {"job": in_the_way, "changes": [], "can_reject": False}
        return {
            "job": in_the_way,
            "changes": present.blocked_changes(job, exc.details.get("blockers"), op),
            "can_reject": WRITE in session.principal.scopes and job.state is JobState.PREPARED,
        }

    async def notify(self, session: Session, notice: str) -> None:
        """Leave ``notice`` for the session's next page (kept in the ledger, so the page
        after a redirect shows it whichever process answers)."""
        await in_thread(self.sessions.notify, session, notice)

    @staticmethod
    def _redirect(path: str, headers: Mapping[str, str] | None = None) -> RedirectResponse:
        response = RedirectResponse(path, status_code=303, headers=dict(headers or {}))
        response.headers["Cache-Control"] = "no-store"
        return response

    # -- the request gates -----------------------------------------------------------

    def _answering(
        self, endpoint: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A page whose session could not be read or written (the ledger went away)
        answers with a refusal page, like any other refusal, never a bare 500."""

        async def answered(request: Request) -> Response:
            try:
                return await endpoint(request)
            except UndogateError as exc:
                log_refusal(exc, f"{request.method} {request.url.path}")
                return self._refused(None, refusal_for(exc), status=status_for(exc))

        return answered

    def _secure(self, request: Request) -> bool:
        if self.settings.secure_cookies is not None:
            return self.settings.secure_cookies
        public = self.service.config.server.public_url or ""
        return request.url.scheme == "https" or public.startswith("https://")

    def _cross_site(self, request: Request) -> bool:
        """True when a state-changing request did not come from one of our own pages."""
        return cross_site(request, self.service.config.server.public_url)

    async def _session(self, request: Request) -> Session | None:
        """The live session, with its credential re-checked now (revoked keys end it)."""
        session = await in_thread(self.sessions.get, request.cookies.get(SESSION_COOKIE))
        if session is None:
            return None
        try:
            principal = await self.service.access.recheck(session.principal)
        except UndogateError:
            await in_thread(self.sessions.end_for_credential, session.credential_id)
            return None
        session.principal = principal
        return session

    def _get(self, view: View[C], needs: type[C]) -> Endpoint:
        """A page for a signed-in ``needs`` (declared once, in the route table)."""

        async def endpoint(request: Request) -> Response:
            session = await self._session(request)
            if session is None:
                return self._redirect("/signin")
            return await self._run(view, needs, request, session, {})

        return self._answering(endpoint)

    def _post(self, view: View[C], needs: type[C]) -> Endpoint:
        """A form a signed-in ``needs`` sends from one of our pages, with its CSRF token."""

        async def endpoint(request: Request) -> Response:
            if self._cross_site(request):
                return self._refused(None, refusal_for_code("cross_site"), status=403)
            session = await self._session(request)
            if session is None:
                return self._redirect("/signin")
            try:
                form = await read_form(request)
            except InvalidRequest as exc:
                return self._refused(session, refusal_for(exc), status=status_for(exc))
            if not session.csrf_ok(form.get("csrf")):
                return self._refused(session, refusal_for_code("csrf"), status=403)
            return await self._run(view, needs, request, session, form)

        return self._answering(endpoint)

    async def _run(
        self, view: View[C], needs: type[C], request: Request, session: Session, form: Form
    ) -> Response:
        try:
            await nav_counts(self.service, session.principal)
            SIGNED_IN_AS.set(session.principal.label)
            return await view(request, session, form, needs.of(session.principal, VIA))
        except UndogateError as exc:
            log_refusal(exc, f"{request.method} {request.url.path}")
            job_id = _text_param(request, "job_id")
            return self._refused(
                session,
                refusal_for(exc),
                status=status_for(exc),
                job_id=job_id,
                operation=form.get("operation"),
                blocked=await self._blocked(session, job_id, exc, form.get("operation")),
                rewind_id=_text_param(request, "rewind_id"),
            )
        except Exception:
            log.exception("unhandled error in %s %s", request.method, request.url.path)
            return self._refused(
                session,
                refusal_for_code("internal_error"),
                status=STATUS_BY_CODE["internal_error"],
            )

    @staticmethod
    def _job_id(job_id: str) -> str:
        """A job id as asked for; one no job can have is ``NotFound`` at once.

        Raises: NotFound.
        """
        if len(job_id) > 200:
            raise NotFound("no such job")
        return job_id

    # -- sign-in ---------------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        session = await self._session(request)
        return self._redirect("/inbox" if session else "/signin")

    async def signin_form(self, request: Request) -> Response:
        if await self._session(request) is not None:
            return self._redirect("/inbox")
        notice = "You are signed out." if "signed_out" in request.query_params else None
        return self._signin_page(request, notice=notice)

    def _signin_page(
        self, request: Request, *, error: str | None = None, notice: str | None = None
    ) -> Response:
        token, nonce = self.signin_tokens.issue()
        response = self.render(
            "signin.html",
            None,
            status=200 if error is None else 401,
            signin_token=token,
            error=error,
            notice=notice,
        )
        response.set_cookie(
            SIGNIN_COOKIE,
            nonce,
            max_age=1800,
            path="/signin",
            secure=self._secure(request),
            httponly=True,
            samesite="strict",
        )
        return response

    async def signin(self, request: Request) -> Response:
        if self._cross_site(request):
            return self._refused(None, refusal_for_code("cross_site"), status=403)
        try:
            form = await read_form(request)
        except InvalidRequest as exc:
            return self._refused(None, refusal_for(exc), status=status_for(exc))
        if not self.signin_tokens.check(form.get("csrf"), request.cookies.get(SIGNIN_COOKIE)):
            return self._signin_page(
                request, error="The sign-in form was out of date. Please try again."
            )
        key = form.get("key", "").strip()
        if not key or len(key) > MAX_KEY_CHARS:
            return self._signin_page(request, error="Enter your operator key.")
        try:
            principal = await self.service.access.sign_in(key)
        except Forbidden:
            return self._signin_page(
                request,
                error="Only operator keys can sign in here; agent tokens and the master key "
                "cannot review jobs.",
            )
        except UndogateError:
            return self._signin_page(request, error="That key is unknown or has been revoked.")
        await in_thread(self.sessions.end, request.cookies.get(SESSION_COOKIE))
        sid, _session = await in_thread(self.sessions.create, principal)
        response = self._redirect("/inbox")
        response.set_cookie(
            SESSION_COOKIE,
            sid,
            path="/",
            secure=self._secure(request),
            httponly=True,
            samesite="strict",
        )
        response.delete_cookie(SIGNIN_COOKIE, path="/signin")
        return response

    async def signout(
        self, request: Request, session: Session, form: Form, caller: Caller
    ) -> Response:
        await in_thread(self.sessions.end, request.cookies.get(SESSION_COOKIE))
        response = self._redirect("/signin?signed_out=1")
        response.delete_cookie(
            SESSION_COOKIE,
            path="/",
            secure=self._secure(request),
            httponly=True,
            samesite="strict",
        )
        return response

    # -- pages -----------------------------------------------------------------------

    async def agents(
        self, request: Request, session: Session, form: Form, reader: Reader
    ) -> Response:
        rows = []
        for agent_id in self.service.reviewers.visible_agents(reader):
            jobs = await self.service.reviewers.list_jobs(reader, agent_id)
            rows.append(
                {
                    "id": agent_id,
                    "jobs": len(jobs),
                    "needs_review": sum(1 for j in jobs if j.state == JobState.NEEDS_REVIEW),
                    "prepared": sum(1 for j in jobs if j.state == JobState.PREPARED),
                    "stopped_at": await self.service.rewinds.stopped_at(reader, agent_id),
                }
            )
        return self.render("agents.html", session, agents=rows)

    async def agent_jobs(
        self, request: Request, session: Session, form: Form, reader: Reader
    ) -> Response:
        agent_id = str(request.path_params["agent_id"])
        if agent_id not in self.service.reviewers.visible_agents(reader):
            raise NotFound(f"no agent {agent_id!r}")
        rows = await self.service.reviewers.list_jobs(reader, agent_id)
        listing = present.job_rows(agent_id, rows)
        stopped_at = await self.service.rewinds.stopped_at(reader, agent_id)
        return self.render(
            "jobs.html", session, agent_id=agent_id, jobs=listing, stopped_at=stopped_at
        )

    async def webhooks(
        self, request: Request, session: Session, form: Form, reader: Reader
    ) -> Response:
        status = request.query_params.get("status") or None
        messages = await self.service.reviewers.webhook_messages(reader, status)
        return self.render(
            "webhooks.html", session, messages=present.webhook_rows(messages), shown=status
        )

    async def open_job(
        self, request: Request, session: Session, form: Form, reader: Reader
    ) -> Response:
        job_id = request.query_params.get("id", "").strip()
        if not job_id:
            return self._redirect("/inbox")
        job = await self.service.reviewers.job(reader, self._job_id(job_id))
        return self._redirect(_job_path(job.id))

    async def job(self, request: Request, session: Session, form: Form, reader: Reader) -> Response:
        job, events = await self.service.reviewers.events(
            reader, self._job_id(str(request.path_params["job_id"]))
        )
        buttons = present.buttons(job, WRITE in reader.principal.scopes)
        return self.render(
            "job.html",
            session,
            job=job,
            held_since=await held_since(self.service, reader, job) if buttons.apply else None,
            page=present.job_page(job, self.service.reviewers.verified(job), events),
            events=history(job.id, events),
            buttons=buttons,
        )

    async def make_preview(
        self, request: Request, session: Session, form: Form, reviewer: Reviewer
    ) -> Response:
        try:
            operation = Operation(form.get("operation", ""))
        except ValueError:
            raise InvalidRequest("unknown operation") from None
        job, preview = await self.service.reviewers.preview(
            reviewer, self._job_id(str(request.path_params["job_id"])), operation
        )
        handle = await in_thread(self.sessions.hold_preview, session, job.id, preview)
        return self._redirect(_job_path(job.id, "previews", handle))

    async def show_preview(
        self, request: Request, session: Session, form: Form, reader: Reader
    ) -> Response:
        reviewers = self.service.reviewers
        job = await reviewers.job(reader, self._job_id(str(request.path_params["job_id"])))
        handle = str(request.path_params["handle"])
        held = await in_thread(self.sessions.held_preview, session, handle)
        if held is None or held.job_id != job.id:
            return self._refused(
                session, refusal_for_code("preview_expired"), job_id=job.id, status=404
            )
        token = held.preview.token
        record = await reviewers.preview_record(reader, job.id, token) if token else None
        if record is not None and record.consumed_at is not None:
            return self.render(
                "preview_used.html",
                session,
                job=job,
                title=present.OPERATION_WORDS[record.operation][0],
                confirmed_at=record.consumed_at,
            )
        now = self.service.clock()
        page = present.preview_page(held.preview, job, now, reviewers.verified(job))
        # The exact writes the preview planned, as the CLI shows a dry run's.
        planned = [views.request_view(r) for r in held.preview.requests]
        page["requests"] = exact.request_blocks(planned)
        return self.render(
            "preview.html",
            session,
            job=job,
            handle=handle,
            page=page,
            blocked=await blocked_changes(self.service, reader, job, page),
            operation=held.preview.operation.value,
            can_write=WRITE in reader.principal.scopes,
            # Held: said instead of a confirm that would be refused (an undo is never held).
            held_since=await held_since(self.service, reader, job)
            if held.preview.operation is Operation.APPLY
            else None,
            passkey=await self.passkey_pages.confirm_step(
                request, reader.principal, held.preview.passkey_challenge
            ),
        )

    async def confirm(
        self, request: Request, session: Session, form: Form, reviewer: Reviewer
    ) -> Response:
        token = form.get("preview_token", "")
        if not token or len(token) > 200:
            raise InvalidRequest("the form carries no preview token; preview again")
        done = await self.service.reviewers.confirm(
            reviewer,
            self._job_id(str(request.path_params["job_id"])),
            token,
            acknowledge_irreversible=form.get("acknowledge_irreversible") == "yes",
            passkey_assertion=form.get("passkey_assertion") or None,
        )
        job = done.job
        # The handle stays held: reopening it (the back button) finds its token consumed
        # in the ledger and says so, with the receipt, instead of "expired".
        if done.repeated:
            notice = "This preview was already confirmed; nothing was sent again."
        else:
            notice = "Confirmed. This is the receipt of what ran."
        await self.notify(session, notice)
        return self._redirect(_job_path(job.id, "receipt"))

    async def receipt(
        self, request: Request, session: Session, form: Form, reader: Reader
    ) -> Response:
        reviewers = self.service.reviewers
        job = await reviewers.job(reader, self._job_id(str(request.path_params["job_id"])))
        return self.render(
            "receipt.html", session, job=job, page=present.job_page(job, reviewers.verified(job))
        )


__all__ = ["CSP", "SESSION_COOKIE", "WebSettings", "WebUI"]
