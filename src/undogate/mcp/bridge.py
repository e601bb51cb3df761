"""``undogate mcp``: the agent tools over stdio, forwarded to a running gateway's HTTP
API (``UNDOGATE_URL``) with the agent token from ``UNDOGATE_AGENT_TOKEN``."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping
from urllib.parse import quote

import anyio
import httpx

from ..config import AGENT_TOOLS
from ..errors import UndogateError
from ..jsonvalue import JsonError, JsonObject, JsonValue, dumps, loads
from .stdio import serve_stdio
from .tools import Refusal, build_server

URL_ENV = "UNDOGATE_URL"
TOKEN_ENV = "UNDOGATE_AGENT_TOKEN"  # noqa: S105 - a variable name


class RemoteBackend:
    """The tools forwarded to a running gateway's HTTP API (stdio)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._client = httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            trust_env=False,
            follow_redirects=False,
            transport=transport,
        )
        # This stdio process is one MCP session: its prepares name it, unless the agent
        # names its own (a rewind plan may select by it, docs/rewind.md).
        self.session = "mcp-stdio-" + secrets.token_hex(8)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _call(self, method: str, path: str, body: JsonObject | None = None) -> JsonValue:
        content = dumps(body, sort_keys=False) if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        try:
            response = await self._client.request(method, path, content=content, headers=headers)
        except httpx.HTTPError:
            raise Refusal("gateway_unavailable", "undogate could not be reached", {}) from None
        try:
            value = loads(response.content)
        except JsonError:
            raise Refusal(
                "gateway_error", f"undogate answered HTTP {response.status_code}", {}
            ) from None
        if response.status_code >= 400:
            error = value.get("error") if isinstance(value, dict) else None
            if not isinstance(error, dict):
                raise Refusal("gateway_error", f"undogate answered HTTP {response.status_code}", {})
            details = error.get("details")
            raise Refusal(
                str(error.get("code") or "gateway_error"),
                str(error.get("message") or f"HTTP {response.status_code}"),
                details if isinstance(details, dict) else {},
            )
        return value

    async def list_resources(self) -> list[JsonValue]:
        value = await self._call("GET", "/api/v1/resources")
        resources = value.get("resources") if isinstance(value, dict) else None
        if not isinstance(resources, list):
            raise Refusal("gateway_error", "undogate listed no resources", {})
        return resources

    async def prepare(self, body: JsonObject) -> JsonValue:
        if body.get("session") is None:
            body = {**body, "session": self.session}
        return await self._call("POST", "/api/v1/jobs", body)

    async def job_status(self, job_id: str) -> JsonValue:
        return await self._call("GET", f"/api/v1/jobs/{quote(job_id, safe='')}/status")

    async def agent_tools(self) -> tuple[str, ...]:
        """The tools the token's agent is opted in to (``GET /api/v1/agent``).

        Raises:
            Refusal: the gateway is unreachable, refuses the token, or answers oddly.
        """
        value = await self._call("GET", "/api/v1/agent")
        listed = value.get("tools") if isinstance(value, dict) else None
        if not isinstance(listed, list):
            raise Refusal("gateway_error", "undogate gave an unexpected answer", {})
        return tuple(t for t in AGENT_TOOLS if t in listed)


def run_stdio(url: str | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Serve the agent tools over stdio, forwarding to the gateway at ``url`` (default
    ``UNDOGATE_URL``) with the agent token in ``UNDOGATE_AGENT_TOKEN``. Returns an exit
    status: 0 when the client closed the session, 2 when the gateway refused to start it.
    """
    env = os.environ if environ is None else environ
    url = url or env.get(URL_ENV)
    token = env.get(TOKEN_ENV)
    if not url or not token:
        _say(f"set {URL_ENV} (the gateway, e.g. http://127.0.0.1:8080) and {TOKEN_ENV}")
        return 2
    from ..api.gateway_client import require_safe_gateway_url

    try:
        require_safe_gateway_url(url)
    except UndogateError as exc:
        _say(f"error [{exc.code}]: {exc.message}")
        return 2
    return anyio.run(_serve_stdio, url, token)


async def _serve_stdio(url: str, token: str) -> int:
    backend = RemoteBackend(url, token)
    try:
        try:
            tools = await backend.agent_tools()
        except Refusal as refusal:
            where = f" at {url}" if refusal.code == "gateway_unavailable" else ""
            _say(f"error [{refusal.code}]: {refusal.message}{where}")
            return 2
        if not tools:
            _say("warning: this agent is opted in to no tools (see `agents` in the config)")
        await serve_stdio(build_server(tools, lambda ctx: backend))
        return 0
    finally:
        await backend.aclose()


def _say(line: str) -> None:
    print(f"undogate mcp: {line}", file=sys.stderr, flush=True)


def main() -> None:
    """``python -m undogate.mcp``: the same as ``undogate mcp``."""
    sys.exit(run_stdio())


__all__ = ["TOKEN_ENV", "URL_ENV", "RemoteBackend", "main", "run_stdio"]
