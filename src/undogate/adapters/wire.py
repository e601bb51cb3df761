"""The wire for every kind: reads and writes a resource over HTTP.

One place sends a resource's requests, on the one pinned, policy-checked client
(``net.PinnedClient``): it adds the resource's static headers and the credential for
exactly the request that leaves (``credentials``), applies its network flags, checks a
read against the remote contract (docs/remote-contract.md), hands the body to the kind's adapter to
parse, and translates transport failures into the gateway's errors, once. A kind
reaches it only as a ``base.Reader`` (reads), or on a test copy a ``base.Prober``; the
writes of a confirm are sent by the operation that recorded their intent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..digests import sha256_label
from ..errors import RemoteContractBreach, RemoteUnavailable
from ..net import NetworkFlags, PinnedClient, RemoteResponse, TransportFailure
from ..net.etag import ETag, parse_etag
from ..resources import Limits, Resource
from .base import ConditionalWrite, Snapshot, absent_snapshot
from .credentials import Credentials, authentication
from .registry import adapter_for

# What a read answers where nothing exists.
ABSENT_STATUSES = frozenset({404, 410})
# The methods a kind may send while a change is prepared, previewed or confirmed: the
# ones that change nothing (RFC 9110 safe methods, and WebDAV's reads).
READ_METHODS = frozenset({"GET", "HEAD", "PROPFIND", "REPORT"})


@dataclass
class Wire:
    """Sends a resource's requests on the one HTTP client, for every kind."""

    http: PinnedClient
    limits: Limits
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    def __post_init__(self) -> None:
        self._credentials = Credentials(self.environ)

    def check_credentials(self, resource: Resource) -> None:
        """Raises: MissingToken: the resource's credential cannot be read now."""
        self._credentials.check(resource)

    def describe(self, resource: Resource, write: ConditionalWrite) -> dict[str, Any]:
        """``write`` as it will leave (``ConditionalWrite.describe``, with the
        resource's static headers), and how it will be authenticated, never with what."""
        described = write.describe()
        described["headers"] = with_static_headers(resource, write.headers)
        described["authentication"] = authentication(resource)
        return described

    def flags(self, resource: Resource) -> NetworkFlags:
        return NetworkFlags(
            allow_private_host=resource.allow_private_host,
            allow_loopback_http=resource.allow_loopback_http,
        )

    def read(
        self, resource: Resource, deadline: float | None = None, *, absent_ok: bool = False
    ) -> Snapshot:
        """GET the resource and check it against the remote contract. With
        ``absent_ok``, a 404 or 410 is an absent snapshot (a create's before side).

        Raises:
            RemoteUnavailable: the read failed (network, status other than 200).
            RemoteContractBreach: weak/missing/duplicate ETag, bad media type, oversize,
                malformed data.
            MissingToken, BlockedAddress: before anything is sent.
        """
        headers = self._outgoing(resource, "GET", resource.url, self._accept(resource), None)
        try:
            response = self.http.send(
                "GET",
                resource.url,
                headers=headers,
                flags=self.flags(resource),
                deadline=deadline,
                max_body=self.limits.max_document_bytes * 4,
            )
        except TransportFailure as exc:
            raise RemoteUnavailable(
                f"could not read {resource.id}: {exc.reason}", resource=resource.id
            ) from None
        if absent_ok and response.status in ABSENT_STATUSES:
            return absent_snapshot(address=response.address)
        return self.snapshot_from(resource, response)

    def snapshot_from(self, resource: Resource, response: RemoteResponse) -> Snapshot:
        """Raises: RemoteUnavailable, RemoteContractBreach (see ``read``)."""
        if response.status != 200:
            raise RemoteUnavailable(
                f"reading {resource.id} answered HTTP {response.status}",
                resource=resource.id,
                status=response.status,
            )
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise RemoteContractBreach(
                f"{resource.id} answered with Content-Encoding {encoding[:40]!r}; undogate "
                "asks for identity and never decompresses",
                resource=resource.id,
            )
        adapter = adapter_for(resource.kind)
        # Where the version lives in the body, the read's ETag is not it: a weak one (a
        # body hash, as CouchDB-like servers send) is then no breach.
        in_body = adapter.guard(resource).in_body
        etag = None if in_body else _strong_etag(resource, response)
        media_type = response.headers.get("content-type", "")
        content = adapter.parse(resource, media_type, response.body, self.limits)
        return Snapshot(
            etag=etag or adapter.body_version(resource, response.body),
            media_type=media_type,
            digest=sha256_label(response.body),
            size=len(response.body),
            content=content,
            address=response.address,
            body=response.body,
        )

    def send_write(
        self, resource: Resource, write: ConditionalWrite, deadline: float | None
    ) -> RemoteResponse:
        """Dispatch one write on a fresh connection (auth read now).

        Raises:
            TransportFailure: below HTTP; ``sent`` says whether anything left.
            MissingToken, BlockedAddress: before anything is sent.
        """
        headers = self._outgoing(resource, write.method, write.url, write.headers, write.body)
        return self.http.send(
            write.method,
            write.url,
            headers=headers,
            content=write.body,
            flags=self.flags(resource),
            deadline=deadline,
            fresh_connection=True,
            max_body=self.limits.max_document_bytes * 4,
        )

    def send_bare(
        self,
        resource: Resource,
        method: str,
        url: str,
        deadline: float | None,
        *,
        max_body: int | None = None,
    ) -> RemoteResponse:
        """A request with no body (a GET or DELETE) to ``url``, under ``resource``'s
        credentials and network flags; anything but a GET on a fresh connection. Its
        answer's body is read up to ``max_body`` bytes (a listing's bound; by default
        four documents' worth).

        Raises:
            TransportFailure (ResponseTooLarge past ``max_body``), MissingToken,
            BlockedAddress.
        """
        headers = self._outgoing(resource, method, url, self._accept(resource), None)
        return self.http.send(
            method,
            url,
            headers=headers,
            flags=self.flags(resource),
            deadline=deadline,
            fresh_connection=method != "GET",
            max_body=self.limits.max_document_bytes * 4 if max_body is None else max_body,
        )

    def fetch(
        self,
        resource: Resource,
        url: str,
        deadline: float | None,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        max_body: int | None = None,
    ) -> RemoteResponse:
        """A read of ``url`` (a listing, a query, a WebDAV ``PROPFIND``) under
        ``resource``'s credentials and network flags: only a method that changes
        nothing (``READ_METHODS``). Its answer's body is read up to ``max_body`` bytes
        (a listing's bound; by default four documents' worth).

        Raises:
            TransportFailure (ResponseTooLarge past ``max_body``), MissingToken,
            BlockedAddress. ValueError: not a read.
        """
        if method not in READ_METHODS:
            raise ValueError(f"{method} is not a read: a kind writes only what it plans")
        content = body or None
        asked = {**self._accept(resource), **(headers or {})}
        sent = self._outgoing(resource, method, url, asked, content)
        return self.http.send(
            method,
            url,
            headers=sent,
            content=content,
            flags=self.flags(resource),
            deadline=deadline,
            max_body=self.limits.max_document_bytes * 4 if max_body is None else max_body,
        )

    def _accept(self, resource: Resource) -> dict[str, str]:
        return {"Accept": adapter_for(resource.kind).accept}

    def _outgoing(
        self,
        resource: Resource,
        method: str,
        url: str,
        headers: Mapping[str, str],
        content: bytes | None,
    ) -> dict[str, str]:
        """Every header of the request that leaves: the resource's static ones, the
        request's own, then the credential for exactly this request (``content``: the
        body exactly as the client is handed it).

        Raises: MissingToken."""
        sent = with_static_headers(resource, headers)
        auth = self._credentials.headers_for(resource, method, url, sent, content)
        return _overridden(sent, auth)


def with_static_headers(resource: Resource, headers: Mapping[str, str]) -> dict[str, str]:
    """The resource's static headers, then ``headers``: a request's own header wins
    over a static one of the same name (names compared without case)."""
    return _overridden(dict(resource.headers), headers)


def _overridden(base: Mapping[str, str], over: Mapping[str, str]) -> dict[str, str]:
    """``base`` without the names ``over`` sets (in any case), then ``over``."""
    taken = {name.lower() for name in over}
    return {**{k: v for k, v in base.items() if k.lower() not in taken}, **over}


def _strong_etag(resource: Resource, response: RemoteResponse) -> ETag:
    values = response.headers.get_list("etag")
    if len(values) != 1:
        raise RemoteContractBreach(
            f"{resource.id} must send exactly one ETag (got {len(values)})",
            resource=resource.id,
        )
    try:
        etag = parse_etag(values[0])
    except ValueError:
        raise RemoteContractBreach(
            f"{resource.id} sent a malformed ETag", resource=resource.id
        ) from None
    if not etag.opaque.isascii():
        # RFC 9110 admits obs-text, but it cannot be sent back in If-Match reliably.
        raise RemoteContractBreach(
            f"{resource.id} sent an ETag with non-ASCII bytes", resource=resource.id
        )
    if etag.weak:
        raise RemoteContractBreach(
            f"{resource.id} sent a weak ETag; conditional writes need a strong one",
            resource=resource.id,
        )
    return etag
