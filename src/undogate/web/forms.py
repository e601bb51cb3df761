"""What a review page's POST carries: a small url-encoded form, and whether it came
from one of our own pages."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request

from ..errors import InvalidRequest

MAX_FORM_BYTES = 16 * 1024


async def read_form(request: Request) -> dict[str, str]:
    """A small url-encoded form; the first value of each name.

    Raises:
        InvalidRequest: another media type, or too large.
    """
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise InvalidRequest("the form is too large")
    if not body:
        return {}
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        raise InvalidRequest("send the form as application/x-www-form-urlencoded")
    try:
        parsed = parse_qs(body.decode("utf-8"), max_num_fields=16, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("the form is not readable") from None
    return {name: values[0] for name, values in parsed.items()}


def cross_site(request: Request, public_url: str | None) -> bool:
    """True when a state-changing request did not come from one of our own pages."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        # The browser's own word, which no page can forge. (With a no-referrer policy
        # Chromium sends ``Origin: null`` even for same-origin forms.)
        return fetch_site != "same-origin"
    origin = request.headers.get("origin")
    return origin is not None and origin not in _allowed_origins(request, public_url)


def _allowed_origins(request: Request, public_url: str | None) -> set[str]:
    origins = {f"{request.url.scheme}://{request.url.netloc}"}
    if public_url:
        parts = urlsplit(public_url)
        origins.add(f"{parts.scheme}://{parts.netloc}")
    return origins


__all__ = ["MAX_FORM_BYTES", "cross_site", "read_form"]
