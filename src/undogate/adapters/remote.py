"""The wire for every kind: reads and writes a resource over HTTP.

One place sends a resource's requests: it reads the token from its variable at each
request (so rotation needs no restart), applies the resource's network flags, checks a
read against the remote contract (SPEC §6) and hands the body to the kind's adapter to
parse, and translates transport failures into the gateway's errors, once.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..digests import sha256_label
from ..errors import MissingToken, RemoteContractBreach, RemoteUnavailable
from ..etag import ETag, parse_etag
from ..net import NetworkFlags, RemoteHTTP, RemoteResponse, TransportFailure
from ..resources import Limits, Resource
from .base import ConditionalWrite, Snapshot, absent_snapshot, adapter_for

# What a read answers where nothing exists.
ABSENT_STATUSES = frozenset({404, 410})


@dataclass
class Remote:
    """Sends a resource's requests on the one HTTP client, for every kind."""

    http: RemoteHTTP
    limits: Limits
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    def auth_headers(self, resource: Resource) -> dict[str, str]:
        """Read the token from its variable now, so rotation needs no restart.

        Raises:
            MissingToken: the variable is unset or empty (named, never its value).
        """
        if resource.token_env is None:
            return {}
        value = self.environ.get(resource.token_env)
        if not value:
            raise MissingToken(
                f"the token variable {resource.token_env} is not set; "
                "set it in the gateway's environment",
                variable=resource.token_env,
                resource=resource.id,
            )
        if resource.token_scheme == "basic":  # noqa: S105 - a scheme name
            encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
            return {"Authorization": f"Basic {encoded}"}
        return {"Authorization": f"Bearer {value}"}

    def flags(self, resource: Resource) -> NetworkFlags:
        return NetworkFlags(
            allow_private_host=resource.allow_private_host,
            allow_loopback_http=resource.allow_loopback_http,
        )

    def read(
        self, resource: Resource, deadline: float | None = None, *, absent_ok: bool = False
    ) -> Snapshot:
        """GET the resource and check it against the remote contract (SPEC §6). With
        ``absent_ok``, a 404 or 410 is an absent snapshot (a create's before side).

        Raises:
            RemoteUnavailable: the read failed (network, status other than 200).
            RemoteContractBreach: weak/missing/duplicate ETag, bad media type, oversize,
                malformed data.
            MissingToken, BlockedAddress: before anything is sent.
        """
        headers = {"Accept": adapter_for(resource.kind).accept, **self.auth_headers(resource)}
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
        etag = _strong_etag(resource, response)
        media_type = response.headers.get("content-type", "")
        content = adapter_for(resource.kind).parse(resource, media_type, response.body, self.limits)
        return Snapshot(
            etag=etag,
            media_type=media_type,
            digest=sha256_label(response.body),
            size=len(response.body),
            content=content,
            address=response.address,
        )

    def send_write(
        self, resource: Resource, write: ConditionalWrite, deadline: float | None
    ) -> RemoteResponse:
        """Dispatch one write on a fresh connection (auth read now).

        Raises:
            TransportFailure: below HTTP; ``sent`` says whether anything left.
            MissingToken, BlockedAddress: before anything is sent.
        """
        headers = {**write.headers, **self.auth_headers(resource)}
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
        headers = {"Accept": adapter_for(resource.kind).accept, **self.auth_headers(resource)}
        return self.http.send(
            method,
            url,
            headers=headers,
            flags=self.flags(resource),
            deadline=deadline,
            fresh_connection=method != "GET",
            max_body=self.limits.max_document_bytes * 4 if max_body is None else max_body,
        )


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
