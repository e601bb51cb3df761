"""The review web UI (SPEC §9): server-rendered pages for reviewers, signed in with an
operator key. Mount it with ``create_app(gateway, keyring, routes=web_routes(...))``."""

from .views import CSP, SESSION_COOKIE, WebSettings, WebUI, web_routes

__all__ = ["CSP", "SESSION_COOKIE", "WebSettings", "WebUI", "web_routes"]
