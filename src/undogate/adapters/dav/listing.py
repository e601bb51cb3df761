"""An address book's or a calendar's members (RFC 4918 ``PROPFIND`` with ``Depth: 1``),
and finding them by identity evidence (docs/collections.md): one bounded listing, then
each member read, matched here on normalized evidence only.

A listing longer than ``limits.max_collection_records`` members, or over
``limits.max_listing_bytes``, is refused: matching on part of a collection would be a
guess. So is a member that cannot be read as the format: it could be the match.
A member that holds no object of the kind (a task in a calendar) is no candidate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from ...errors import InvalidRequest, LimitReached, RemoteContractBreach, RemoteUnavailable
from ...net import RemoteResponse, TransportFailure
from ...resources import Resource
from ..base import Reader
from ..evidence import normalize
from ..json_collection.lookup import fetch_listing
from .content import ContentError, Instance, ungrouped, values_of
from .formats import Format
from .preconditions import DAV
from .settings import collection_settings

PROPFIND_MEMBERS = (
    b'<?xml version="1.0" encoding="utf-8"?>\n'
    b'<D:propfind xmlns:D="DAV:"><D:prop>'
    b"<D:getetag/><D:getcontenttype/><D:resourcetype/>"
    b"</D:prop></D:propfind>"
)
# A member's name: one path segment, as the gateway mints them (``{uid}.vcf``) or as
# another client named it; never a dot segment or a control character.
MEMBER_NAME_RE = re.compile(r"[^/\x00-\x1f\x7f]{1,255}")


@dataclass(frozen=True)
class Member:
    """One member a listing names: its name in the collection and the tag it gave."""

    name: str
    etag: str


def member_url(resource: Resource, name: str) -> str:
    return resource.url + quote(name, safe="")


def member_resource(resource: Resource, name: str) -> Resource:
    """The collection's settings at one member's URL (what a read or write of it uses)."""
    return resource.model_copy(update={"url": member_url(resource, name)})


def check_member_name(resource: Resource, name: str) -> None:
    """Raises: InvalidRequest: not one name in the collection."""
    if not MEMBER_NAME_RE.fullmatch(name) or name in (".", ".."):
        raise InvalidRequest(
            f"{name[:64]!r} is not the name of one member of {resource.id} (e.g. ada.vcf)",
            resource=resource.id,
        )


def _children(element: Element | None, name: str) -> list[Element]:
    return [] if element is None else element.findall(f"{{{DAV}}}{name}")


def _members(resource: Resource, fmt: Format, body: bytes) -> Iterable[Member]:
    """The members a multistatus answer names (the collection itself, sub-collections
    and members of another media type aside).

    Raises: RemoteContractBreach."""
    try:
        root = fromstring(body)
    except (ParseError, DefusedXmlException, ValueError):
        raise RemoteContractBreach(
            f"{resource.id}'s PROPFIND answer is not a multistatus undogate can read",
            resource=resource.id,
        ) from None
    collection = unquote(urlsplit(resource.url).path)
    for response in _children(root, "response"):
        hrefs = _children(response, "href")
        path = unquote(urlsplit((hrefs[0].text or "") if hrefs else "").path)
        if path.rstrip("/") == collection.rstrip("/"):
            continue
        rest = path[len(collection) :] if path.startswith(collection) else ""
        if not rest or "/" in rest.rstrip("/"):
            raise RemoteContractBreach(
                f"{resource.id}'s listing names something outside it", resource=resource.id
            )
        found = {}
        for propstat in _children(response, "propstat"):
            status = _children(propstat, "status")
            if status and " 200 " in f"{status[0].text or ''} ":
                for prop in _children(propstat, "prop"):
                    found.update({child.tag: child for child in prop})
        kind = found.get(f"{{{DAV}}}resourcetype")
        if rest.endswith("/") or (kind is not None and _children(kind, "collection")):
            continue
        media = found.get(f"{{{DAV}}}getcontenttype")
        # Only the type: servers add parameters here (Radicale: ``;component=vevent``).
        media_type = (media.text or "").split(";")[0].strip().lower() if media is not None else ""
        if media_type and media_type != fmt.media_type:
            continue
        tag = found.get(f"{{{DAV}}}getetag")
        if tag is None or not (tag.text or "").strip():
            raise RemoteContractBreach(
                f"{resource.id}'s listing gives no ETag for {rest[:64]!r}", resource=resource.id
            )
        yield Member(rest, (tag.text or "").strip())


def list_members(
    wire: Reader, resource: Resource, fmt: Format, deadline: float | None
) -> list[Member]:
    """Every member of the collection, from one ``PROPFIND`` with ``Depth: 1``.

    Raises:
        RemoteUnavailable, RemoteContractBreach, LimitReached, MissingToken,
        BlockedAddress.
    """
    limits = wire.limits
    headers = {"Depth": "1", "Content-Type": "application/xml; charset=utf-8"}
    response = fetch_listing(
        wire,
        resource,
        resource.url,
        deadline,
        "",
        status=207,
        method="PROPFIND",
        headers=headers,
        body=PROPFIND_MEMBERS,
    )
    members = list(_members(resource, fmt, response.body))
    if len(members) > limits.max_collection_records:
        raise LimitReached(
            f"{resource.id} holds more than {limits.max_collection_records} members "
            "(limits.max_collection_records)",
            limit="max_collection_records",
            resource=resource.id,
        )
    return members


def _member_text(wire: Reader, resource: Resource, name: str, deadline: float | None) -> str | None:
    """A member's text as a lookup reads it (None: it is gone since the listing).

    Raises: RemoteUnavailable, RemoteContractBreach."""
    url = member_url(resource, name)
    try:
        answer: RemoteResponse = wire.fetch(resource, url, deadline)
    except TransportFailure as exc:
        raise RemoteUnavailable(
            f"could not read {name[:64]!r} of {resource.id}: {exc.reason}", resource=resource.id
        ) from None
    if answer.status in (404, 410):
        return None
    if answer.status != 200 or len(answer.body) > wire.limits.max_document_bytes:
        raise RemoteUnavailable(
            f"reading {name[:64]!r} of {resource.id} answered HTTP {answer.status}"
            + ("" if answer.status != 200 else " over the document limit"),
            resource=resource.id,
            status=answer.status,
        )
    try:
        return answer.body.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise RemoteContractBreach(
            f"{name[:64]!r} of {resource.id} is not valid UTF-8", resource=resource.id
        ) from None


def evidence_given(resource: Resource, values: dict[str, list[str]]) -> dict[str, set[str]]:
    """Identity field → the normalized evidence ``values`` (property → its values)
    give in it."""
    found: dict[str, set[str]] = {}
    for rule in collection_settings(resource).identity:
        shown = {normalize(rule.evidence, v) for v in values.get(rule.field, [])}
        kept = {v for v in shown if v is not None}
        if kept:
            found[rule.field] = kept
    return found


def evidence_shown(props: Mapping[str, Sequence[Instance]]) -> dict[str, list[str]]:
    """Property → the values ``props`` give it, in any group: ``item1.EMAIL`` is
    ``EMAIL`` evidence (what ``evidence_given`` reads)."""
    shown: dict[str, list[str]] = {}
    for name, instances in props.items():
        shown.setdefault(ungrouped(name), []).extend(i.value for i in instances)
    return shown


def evidence_held(
    resource: Resource, fmt: Format, text: str, evidence: dict[str, set[str]]
) -> dict[str, str]:
    """Identity field → the value of ``evidence`` the object in ``text`` holds in it
    (normalized), for each field it holds one in.

    Raises: ContentError."""
    rules = {r.field: r.evidence for r in collection_settings(resource).identity}
    held: dict[str, str] = {}
    for field, wanted in evidence.items():
        for instance in values_of(text, fmt, field):
            value = normalize(rules[field], instance.value)
            if value is not None and value in wanted:
                held[field] = value
    return held


def find_by_evidence(
    wire: Reader,
    resource: Resource,
    fmt: Format,
    evidence: dict[str, set[str]],
    deadline: float | None,
) -> list[tuple[str, dict[str, str]]]:
    """Every member (its name, and the evidence it matched on) holding an identity
    value equal to one of ``evidence``'s on the same field, in the listing's order.

    Raises: as ``list_members``; RemoteContractBreach for a member that cannot be read
    as the format (it might be the match: nothing is guessed)."""
    found: list[tuple[str, dict[str, str]]] = []
    for member in list_members(wire, resource, fmt, deadline):
        text = _member_text(wire, resource, member.name, deadline)
        if text is None:
            continue
        try:
            matched = evidence_held(resource, fmt, text, evidence)
        except ContentError as exc:
            raise RemoteContractBreach(
                f"{member.name[:64]!r} of {resource.id} is not a {fmt.name} object undogate "
                f"can read ({exc}); it could be a match, so nothing is guessed",
                resource=resource.id,
            ) from exc
        if matched:
            found.append((member.name, matched))
    return found


__all__ = [
    "PROPFIND_MEMBERS",
    "Member",
    "check_member_name",
    "evidence_given",
    "evidence_held",
    "evidence_shown",
    "find_by_evidence",
    "list_members",
    "member_resource",
    "member_url",
]
