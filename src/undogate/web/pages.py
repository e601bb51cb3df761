"""What a page module of the review UI uses of it (``views.WebUI``), named once: a view
takes the request, its session, its form and the caller the route needs (``View``), and
the UI wraps it in its session and cross-site checks (``Pages._get``/``_post``). A module
whose pages need more of the UI extends ``Pages``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ..service import Caller, Service
from .sessions import Session

C = TypeVar("C", bound=Caller)
Form = Mapping[str, str]
View = Callable[[Request, Session, Form, C], Awaitable[Response]]


class Pages(Protocol):
    service: Service

    def render(
        self, template: str, session: Session | None, *, status: int = ..., **context: Any
    ) -> HTMLResponse: ...

    async def notify(self, session: Session, notice: str) -> None: ...

    def _get(self, view: View[C], needs: type[C]) -> Callable[[Request], Awaitable[Response]]: ...

    def _post(self, view: View[C], needs: type[C]) -> Callable[[Request], Awaitable[Response]]: ...

    @staticmethod
    def _redirect(path: str, headers: Mapping[str, str] | None = None) -> RedirectResponse: ...


__all__ = ["Form", "Pages", "View"]
