"""Finding a collection's records by identity evidence (docs/collections.md), and where its records
live. A lookup reads a query (``?email={value}``, the server filters) or one bounded
listing; either way every record is matched here, on normalized evidence only. A listing
that is cut into pages (``Next-Page``, or an RFC 8288 ``Link`` with relation ``next``),
longer than ``limits.max_collection_records`` or over ``limits.max_listing_bytes``, is
refused: matching on part of a collection would be a guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote

from ...errors import InvalidRequest, LimitReached, RemoteContractBreach, RemoteUnavailable
from ...jsonvalue import JsonObject, JsonValue
from ...net import RemoteResponse, ResponseTooLarge, TransportFailure, parse_links
from ...resources import MAX_LISTING_BYTES, Resource
from ..base import Reader
from ..evidence import normalize
from ..records.fields import check_json_media_type, parse_listing
from .settings import collection_settings

# A record id the gateway mints or accepts from an agent: one URL path segment that
# every common store takes (Kinto: ``^[a-zA-Z0-9][a-zA-Z0-9_-]*$``).
RECORD_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def record_url(resource: Resource, record_id: str) -> str:
    return resource.url.rstrip("/") + "/" + quote(record_id, safe="")


def listing_url(resource: Resource) -> str:
    """Where the collection's records are listed: its own URL, or the declared
    ``listing.path`` after it (the operator's, never an agent's)."""
    listing = collection_settings(resource).listing
    return resource.url if listing is None else resource.url.rstrip("/") + "/" + listing.path


def record_resource(resource: Resource, record_id: str) -> Resource:
    """The collection's settings at one record's URL (what a read or write of it uses)."""
    return resource.model_copy(update={"url": record_url(resource, record_id)})


def check_record_id(resource: Resource, record_id: str) -> None:
    """Raises: InvalidRequest: not an id the gateway sends."""
    if not RECORD_ID_RE.fullmatch(record_id):
        raise InvalidRequest(
            "a record id is 1 to 128 letters, digits, '_' or '-', starting with a letter or digit",
            resource=resource.id,
        )


def evidence_of(resource: Resource, values: Mapping[str, JsonValue]) -> dict[str, str]:
    """Field → normalized evidence, for each identity field ``values`` gives evidence in."""
    found: dict[str, str] = {}
    for rule in collection_settings(resource).identity:
        normalized = normalize(rule.evidence, values.get(rule.field))
        if normalized is not None:
            found[rule.field] = normalized
    return found


def record_id_of(resource: Resource, record: JsonObject) -> str:
    """Raises: RemoteContractBreach: the record carries no usable id."""
    id_field = collection_settings(resource).id_field
    value = record.get(id_field)
    if not isinstance(value, str) or not RECORD_ID_RE.fullmatch(value):
        raise RemoteContractBreach(
            f"a record of {resource.id} has no usable {id_field!r}",
            resource=resource.id,
        )
    return value


def find_by_evidence(
    wire: Reader, resource: Resource, values: Mapping[str, JsonValue], deadline: float | None
) -> list[tuple[str, JsonObject]]:
    """Every record (id, record) whose evidence equals the evidence ``values`` give on
    the same field (any one field suffices), in the order the server listed them.

    A query lookup asks the server for each identity value as given and as normalized:
    its filter decides what comes back, and only what it returns can match here.

    Raises:
        RemoteUnavailable, RemoteContractBreach, LimitReached, MissingToken,
        BlockedAddress.
    """
    lookup = collection_settings(resource).lookup
    evidence = evidence_of(resource, values)
    if lookup is None or not evidence:
        return []
    urls = [listing_url(resource)]
    if lookup.query is not None:
        urls = []
        for name, normalized in evidence.items():
            given = values.get(name)
            spellings = [normalized, *([given.strip()] if isinstance(given, str) else [])]
            for value in dict.fromkeys(spellings):
                query = lookup.query.replace("{field}", quote(name)).replace(
                    "{value}", quote(value)
                )
                urls.append(resource.url + query)
    found: dict[str, JsonObject] = {}
    for url in urls:
        for record in list_records(wire, resource, url, deadline):
            theirs = evidence_of(resource, record)
            if any(theirs.get(f) == v for f, v in evidence.items()):
                found.setdefault(record_id_of(resource, record), record)
    return list(found.items())


def fetch_listing(
    wire: Reader,
    resource: Resource,
    url: str,
    deadline: float | None,
    bound: str,
    *,
    status: int = 200,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
) -> RemoteResponse:
    """One listing of a collection, for every collection kind: its answer, read up to
    ``limits.max_listing_bytes`` (``bound`` begins the words on what makes that bound),
    when it answered ``status``.

    Raises: LimitReached (over the bound), RemoteUnavailable (no answer, or another
    status), and what ``Reader.fetch`` raises."""
    limits = wire.limits
    try:
        response = wire.fetch(
            resource,
            url,
            deadline,
            method=method,
            headers=headers,
            body=body,
            max_body=limits.max_listing_bytes,
        )
    except ResponseTooLarge:
        raise LimitReached(
            f"{resource.id}'s listing is over {limits.max_listing_bytes} bytes "
            f"({bound}never over {MAX_LISTING_BYTES} bytes)",
            limit="max_collection_records",
            resource=resource.id,
        ) from None
    except TransportFailure as exc:
        raise RemoteUnavailable(
            f"could not list {resource.id}: {exc.reason}", resource=resource.id
        ) from None
    if response.status != status:
        raise RemoteUnavailable(
            f"listing {resource.id} answered HTTP {response.status}",
            resource=resource.id,
            status=response.status,
        )
    return response


def list_records(
    wire: Reader, resource: Resource, url: str, deadline: float | None
) -> list[JsonObject]:
    """One bounded listing of the collection (or a query of it).

    Raises: as ``find_by_evidence``."""
    limits = wire.limits
    bound = "limits.max_collection_records records of at most limits.max_document_bytes, and "
    response = fetch_listing(wire, resource, url, deadline, bound)
    try:
        links = parse_links(response.headers.get_list("link"))
    except ValueError as exc:
        raise RemoteContractBreach(
            f"{resource.id}'s listing carries a Link header undogate cannot read ({exc}): "
            "it may announce more pages, and undogate never matches on part of a collection",
            resource=resource.id,
        ) from None
    if "next-page" in response.headers or any("next" in link.relations for link in links):
        raise RemoteContractBreach(
            f"{resource.id}'s listing comes in pages; undogate never matches identity on "
            "part of a collection: use a query lookup that the server answers whole",
            resource=resource.id,
        )
    check_json_media_type(resource, response.headers.get("content-type", ""))
    listing = collection_settings(resource).listing
    records = parse_listing(resource, response.body, listing.records if listing else None)
    limit = limits.max_collection_records
    if len(records) > limit:
        raise LimitReached(
            f"{resource.id}'s listing holds more than {limit} records "
            "(limits.max_collection_records)",
            limit="max_collection_records",
            resource=resource.id,
        )
    return records
