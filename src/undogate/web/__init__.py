"""The review web UI: server-rendered pages for reviewers, signed in with an
operator key. Mount it with ``create_app(service, routes=WebUI(service, ...).routes())``
(``app.build_app`` does)."""

from .views import CSP, SESSION_COOKIE, WebSettings, WebUI

__all__ = ["CSP", "SESSION_COOKIE", "WebSettings", "WebUI"]
