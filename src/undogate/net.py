"""All remote traffic goes through here: one client, no redirects, no retries.

``RemoteHTTP.send`` is the only way adapters reach a server. It distinguishes a
request that certainly never left (``TransportFailure(sent=False)``) from one whose
fate is unknown (``sent=True``), because the engine records the first as a certain
refusal and the second as ``uncertain``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from .errors import BlockedAddress


@dataclass(frozen=True)
class NetworkFlags:
    """What the operator opened for one resource (SPEC §7)."""

    allow_private_host: bool = False
    allow_loopback_http: bool = False


@dataclass(frozen=True)
class RemoteResponse:
    status: int
    headers: httpx.Headers
    body: bytes
    address: str | None


class TransportFailure(Exception):
    """The request failed below HTTP. ``sent`` is False only when nothing left this host."""

    def __init__(self, reason: str, *, sent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent = sent


class RemoteHTTP:
    """The one client factory for remote traffic."""

    def __init__(
        self,
        *,
        request_timeout_s: float = 8.0,
        ca_bundle: Path | None = None,
    ) -> None:
        self.request_timeout_s = request_timeout_s
        self._verify: str | bool = str(ca_bundle) if ca_bundle else True
        self._client = self._new_client()

    def _new_client(self) -> httpx.Client:
        return httpx.Client(
            trust_env=False,
            follow_redirects=False,
            verify=self._verify,
            timeout=self.request_timeout_s,
        )

    def close(self) -> None:
        self._client.close()

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        content: bytes | None = None,
        flags: NetworkFlags,
        deadline: float | None = None,
        fresh_connection: bool = False,
        max_body: int = 1024 * 1024,
    ) -> RemoteResponse:
        """Send one request and read a bounded body.

        Raises:
            BlockedAddress: the URL's address is refused by the policy (nothing sent).
            TransportFailure: the request failed below HTTP.
        """
        del flags  # the address policy lands with the pinned client (net safety issue)
        timeout = self.request_timeout_s
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TransportFailure("the operation ran out of time", sent=False)
            timeout = min(timeout, remaining)
        client = self._new_client() if fresh_connection else self._client
        try:
            request = client.build_request(
                method, url, headers=headers, content=content, timeout=timeout
            )
            try:
                response = client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                raise TransportFailure(
                    f"could not connect: {type(exc).__name__}", sent=False
                ) from None
            except httpx.TimeoutException as exc:
                raise TransportFailure(f"timed out: {type(exc).__name__}", sent=True) from None
            except httpx.HTTPError as exc:
                raise TransportFailure(
                    f"transport error: {type(exc).__name__}", sent=True
                ) from None
            try:
                body = bytearray()
                for chunk in response.iter_bytes():
                    body.extend(chunk)
                    if len(body) > max_body:
                        raise TransportFailure("response body over the size limit", sent=True)
            except httpx.HTTPError as exc:
                raise TransportFailure(
                    f"transport error: {type(exc).__name__}", sent=True
                ) from None
            finally:
                response.close()
            return RemoteResponse(
                status=response.status_code,
                headers=response.headers,
                body=bytes(body),
                address=None,
            )
        finally:
            if fresh_connection:
                client.close()


__all__ = ["BlockedAddress", "NetworkFlags", "RemoteHTTP", "RemoteResponse", "TransportFailure"]
