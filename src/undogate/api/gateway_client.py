"""undogate's own API, as the CLI and the stdio MCP bridge call it: ``ApiClient`` for a
running gateway, ``ApiError`` for its refusals, and the rule for where a key may travel
(``require_safe_gateway_url``)."""

from __future__ import annotations

import ipaddress
from typing import Any

import httpx

from ..errors import InvalidRequest, UndogateError
from ..jsonvalue import JsonObject, JsonValue, dumps, from_python, loads


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address literal."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ApiError(UndogateError):
    """An error answer from a remote undogate API, carrying its stable code."""

    def __init__(self, code: str, message: str, status: int, details: JsonObject) -> None:
        super().__init__(message, status=status, **details)
        self.code = code


def require_safe_gateway_url(url: str) -> None:
    """A key may travel to a gateway over https, or over plain http only to this machine.

    Raises:
        InvalidRequest: no scheme or host (``127.0.0.1:8080``), or plain http (or another
            scheme) to any other host.
    """
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or "://" not in url or not parsed.host:
        missing = "the scheme (http:// or https://)" if "://" not in url else "the host"
        raise InvalidRequest(
            f"the gateway URL {url!r} is missing {missing}: write it in full, e.g. "
            "http://127.0.0.1:8080 (this machine) or https://undogate.example.com"
        )
    if parsed.scheme != "https" and not (parsed.scheme == "http" and is_loopback(parsed.host)):
        raise InvalidRequest(
            f"refusing to send a key to {parsed.scheme}://{parsed.host}: use https "
            "(plain http is only for 127.0.0.1 or localhost)"
        )


class ApiClient:
    """A small client of undogate's own API (the CLI's only way to a running server)."""

    def __init__(self, url: str, key: str, *, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        require_safe_gateway_url(self.url)
        self._client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
            trust_env=False,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, path: str, body: Any = None) -> JsonValue:
        """Raises: ApiError (the server's error), InvalidRequest (unreachable server)."""
        content = dumps(from_python(body) if body is not None else {}) if body is not None else None
        try:
            response = self._client.request(
                method,
                path,
                content=content,
                headers={"Content-Type": "application/json"} if content is not None else None,
            )
        except httpx.HTTPError as exc:
            raise InvalidRequest(
                f"cannot reach undogate at {self.url}: {exc.__class__.__name__}"
            ) from None
        try:
            value = loads(response.content)
        except ValueError:
            raise ApiError(
                "invalid_response",
                f"HTTP {response.status_code}: not JSON",
                response.status_code,
                {},
            ) from None
        if response.status_code >= 400:
            error = value.get("error") if isinstance(value, dict) else None
            if isinstance(error, dict):
                details = error.get("details")
                raise ApiError(
                    str(error.get("code")),
                    str(error.get("message")),
                    response.status_code,
                    details if isinstance(details, dict) else {},
                )
            raise ApiError("http_error", f"HTTP {response.status_code}", response.status_code, {})
        return value


__all__ = ["ApiClient", "ApiError", "is_loopback", "require_safe_gateway_url"]
