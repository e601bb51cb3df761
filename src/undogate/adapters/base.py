"""The small interface every resource kind implements, and what is shared by all.

An adapter reads a resource into a ``Snapshot``, plans a change against it, tells
whether the resource currently shows one side of a change, and builds the
``ConditionalWrite`` that moves it from one side to the other. Sending, auth and the
translation of transport failures live here, once.
"""

from __future__ import annotations

import base64
import hashlib
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..errors import MissingToken, RemoteContractBreach, RemoteUnavailable
from ..etag import ETag, parse_etag
from ..jobs import AssertionKind, Change, ChangeRequest, ResourceKind
from ..jsonvalue import JsonObject
from ..net import NetworkFlags, RemoteHTTP, RemoteResponse, TransportFailure
from ..resources import Limits, Resource


def media_type_is(value: str, allowed: frozenset[str]) -> bool:
    """``value`` is one of ``allowed`` with no parameter or only ``charset=utf-8``.

    Type and parameter names compare case-insensitively; the charset value may be quoted
    and must be utf-8 (SPEC §6: the bytes are strict UTF-8, whatever else is claimed).
    """
    main, *params = value.split(";")
    if main.strip().lower() not in allowed:
        return False
    seen_charset = False
    for param in params:
        name, sep, val = param.partition("=")
        if not sep or name.strip().lower() != "charset" or seen_charset:
            return False
        val = val.strip()
        if len(val) >= 2 and val[0] == val[-1] == '"':
            val = val[1:-1]
        if val.lower() != "utf-8":
            return False
        seen_charset = True
    return True


class Side(StrEnum):
    BEFORE = "before"
    AFTER = "after"


@dataclass(frozen=True)
class Snapshot:
    """One read of a resource: its version, media type, digest and parsed content."""

    etag: ETag
    media_type: str
    digest: str
    size: int
    fields: JsonObject | None = None
    text: str | None = None
    address: str | None = None


@dataclass(frozen=True)
class Plan:
    """What prepare records for one change (before and after, nothing written)."""

    fields: tuple[str, ...]
    before: JsonObject | None
    after: JsonObject | None
    before_text: str | None
    after_text: str | None
    media_type: str

    def change(
        self,
        index: int,
        resource: Resource,
        read: Snapshot,
        assertion_kind: AssertionKind | None = None,
    ) -> Change:
        """The planned change as a job records it, against the read it was planned on."""
        return Change(
            index=index,
            resource_id=resource.id,
            kind=resource.kind,
            fingerprint=resource.fingerprint,
            fields=self.fields,
            before=self.before,
            after=self.after,
            before_text=self.before_text,
            after_text=self.after_text,
            media_type=self.media_type,
            prepared_etag=read.etag.header,
            assertion_kind=assertion_kind,
        )


@dataclass(frozen=True)
class ConditionalWrite:
    """The exact request a confirm sends (auth is added at dispatch, never stored)."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes
    if_match: str

    def describe(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "url": self.url,
            "headers": dict(self.headers),
            "body": self.body.decode("utf-8"),
        }


@dataclass
class Adapter(ABC):
    """One resource kind. Subclasses parse, plan, compare and build writes."""

    http: RemoteHTTP
    limits: Limits
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    kind: ResourceKind = field(init=False)

    # -- shared ----------------------------------------------------------------

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

    def read(self, resource: Resource, deadline: float | None = None) -> Snapshot:
        """GET the resource and check it against the remote contract (SPEC §6).

        Raises:
            RemoteUnavailable: the read failed (network, status other than 200).
            RemoteContractBreach: weak/missing/duplicate ETag, bad media type, oversize,
                malformed data.
            MissingToken, BlockedAddress: before anything is sent.
        """
        headers = {"Accept": self.accept, **self.auth_headers(resource)}
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
        return self.snapshot_from(resource, response)

    def snapshot_from(self, resource: Resource, response: RemoteResponse) -> Snapshot:
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
        etag = self._strong_etag(resource, response)
        media_type = response.headers.get("content-type", "")
        fields, text = self.parse(resource, media_type, response.body)
        return Snapshot(
            etag=etag,
            media_type=media_type,
            digest="sha256:" + hashlib.sha256(response.body).hexdigest(),
            size=len(response.body),
            fields=fields,
            text=text,
            address=response.address,
        )

    @staticmethod
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

    # -- per kind ----------------------------------------------------------------

    accept: str = field(init=False, default="*/*")

    @abstractmethod
    def parse(
        self, resource: Resource, media_type: str, body: bytes
    ) -> tuple[JsonObject | None, str | None]:
        """Check the media type and decode the body.

        Raises:
            RemoteContractBreach: unsupported media type, malformed or oversize data.
        """

    @abstractmethod
    def plan(self, resource: Resource, request: ChangeRequest, snapshot: Snapshot) -> Plan:
        """Record before and after for one change.

        Raises:
            InvalidRequest: fields not allow-listed, non-top-level paths, no-op, oversize.
        """

    @abstractmethod
    def shows(self, change: Change, snapshot: Snapshot, side: Side) -> bool:
        """True when the resource currently shows ``side`` of the change."""

    @abstractmethod
    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        """The conditional write that moves the resource to ``target`` of the change."""

    def undo_guard_holds(self, change: Change, snapshot: Snapshot) -> bool:
        """SPEC §2's undo guard. Records: the touched fields equal the after-values."""
        return self.shows(change, snapshot, Side.AFTER)
