"""What a ``json_collection`` needs of its settings (docs/collections.md): the record
kinds' field rules and dialect, how records are created, where they are listed, and
identity evidence that never guesses."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import Field

from ...jsonvalue import JsonError, parse_pointer
from ...resources import Limits, Resource, StrictModel
from ..evidence import EVIDENCE_KINDS
from ..records.dialects import dialect_problems, version_member
from ..records.fields import field_problems
from ..records.settings import RecordSettings

# A listing's path: segments of unreserved characters (never "." or ".."), then the
# operator's own query.
_LISTING_PATH_RE = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9_.~-]*(/[A-Za-z0-9_~-][A-Za-z0-9_.~-]*)*")
_LISTING_QUERY_RE = re.compile(r"[A-Za-z0-9_.~=&%+,:-]*")


class IdentityRule(StrictModel):
    """One field whose value is evidence of a record's identity (docs/collections.md). Which
    evidence kinds exist is ``records.evidence``'s business: anything else is refused."""

    field: str = Field(min_length=1, max_length=128)
    evidence: str = Field(min_length=1, max_length=40)


class Lookup(StrictModel):
    """How an upsert finds records by evidence: a query template appended to the
    collection URL (``?email={value}``), or a bounded listing matched locally."""

    query: str | None = Field(None, min_length=1, max_length=512)
    list: bool = False


class Listing(StrictModel):
    """Where a collection whose URL does not list its records lists them (CouchDB:
    ``_all_docs?include_docs=true``): ``path``, after the collection's URL (its query is
    the operator's, never an agent's), and ``records``, a JSON Pointer to the records in
    the answer, where ``*`` stands for every item of an array (``/rows/*/doc``)."""

    path: str = Field(min_length=1, max_length=512)
    records: str = Field("", max_length=256)


class CollectionSettings(RecordSettings):
    # How a create is sent: ``put`` (PUT {collection}/{id} with If-None-Match: *) or
    # ``post``; identity evidence and its lookup; the record's id member; the members
    # the server rewrites on every write (never sent back by a re-create, never
    # compared).
    create: Literal["put", "post"] | bool | None = None
    identity: tuple[IdentityRule, ...] = ()
    lookup: Lookup | None = None
    id_field: str = Field("id", min_length=1, max_length=128)
    server_fields: tuple[str, ...] = ()
    listing: Listing | None = None

    def fingerprint_part(self) -> dict[str, Any]:
        part = super().fingerprint_part()
        if self.create is not None:
            # How records appear is identity too; absent, the digest of a resource
            # declared before ``create`` existed stays what it was.
            part["create"] = self.create
        if self.listing is not None:
            part["listing"] = self.listing.model_dump(mode="json")
        return part

    def rewritten_fields(self) -> list[str]:
        """The members the server rewrites on every write: the ``server_fields``, and the
        record's version member where it lives in the record (never compared, never
        sent back by a re-create)."""
        version = version_member(self)
        extra = [version] if version is not None and version not in self.server_fields else []
        return [*self.server_fields, *extra]


def collection_settings(resource: Resource) -> CollectionSettings:
    settings = resource.settings
    assert isinstance(settings, CollectionSettings), f"{resource.id} is not a collection"
    return settings


def collection_problems(resource: Resource, limits: Limits) -> list[tuple[str, str]]:
    problems = field_problems(resource, limits) + dialect_problems(resource, deletes=True)
    settings = collection_settings(resource)
    if settings.listing is not None:
        problems.extend(_listing_problems(settings.listing))
    if settings.create not in (None, "put", "post"):
        problems.append(("create", "a json_collection creates with put or post"))
    fields = set(settings.fields)
    problems.extend(
        identity_problems(
            settings.identity,
            lambda rule: (
                None if rule.field in fields else ("field", f"{rule.field!r} is not in fields")
            ),
        )
    )
    lookup = settings.lookup
    if settings.identity and lookup is None:
        problems.append(
            ("lookup", "identity evidence needs a lookup: {query: ...} or {list: true}")
        )
    if lookup is not None:
        if not settings.identity:
            problems.append(("lookup", "a lookup needs identity evidence to look up"))
        if (lookup.query is None) == (not lookup.list):
            problems.append(("lookup", "give exactly one of query or list: true"))
        if lookup.query is not None:
            if not lookup.query.startswith("?") or "{value}" not in lookup.query:
                problems.append(
                    ("lookup.query", "a query template starts with '?' and holds {value}")
                )
            elif len(settings.identity) > 1 and "{field}" not in lookup.query:
                problems.append(
                    (
                        "lookup.query",
                        "with several identity fields, the template names {field} too",
                    )
                )
    if settings.create == "post" and not settings.identity:
        problems.append(
            (
                "create",
                "create: post needs identity evidence: a lost answer to a POST is "
                "resolved by finding the one new record that matches it",
            )
        )
    for j, name in enumerate(settings.server_fields):
        if name in fields:
            problems.append((f"server_fields[{j}]", f"{name!r} is an allow-listed field"))
    return problems


def identity_problems(
    identity: Sequence[IdentityRule],
    field_problem: Callable[[IdentityRule], tuple[str, str] | None],
) -> list[tuple[str, str]]:
    """The problems of a collection's identity rules, for every collection kind:
    ``field_problem`` is the kind's own word on a rule's field (the rule's member it
    names, and why), or None."""
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, rule in enumerate(identity):
        if rule.evidence not in EVIDENCE_KINDS:
            problems.append(
                (
                    f"identity[{i}].evidence",
                    f"{rule.evidence!r} is not identity evidence: only "
                    + ", ".join(EVIDENCE_KINDS)
                    + " match (never similarity, fuzzy or name matching)",
                )
            )
        wrong = field_problem(rule)
        if wrong is not None:
            member, why = wrong
            problems.append((f"identity[{i}].{member}", why))
        if rule.field in seen:
            problems.append((f"identity[{i}].field", f"{rule.field!r} is named twice"))
        seen.add(rule.field)
    return problems


def _listing_problems(listing: Listing) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    path, _, query = listing.path.partition("?")
    if not _LISTING_PATH_RE.fullmatch(path) or not _LISTING_QUERY_RE.fullmatch(query):
        problems.append(
            (
                "listing.path",
                "a path after the collection's URL (letters, digits, '_', '-', '.', '~' "
                "between slashes, never '.' or '..'), then an optional query",
            )
        )
    try:
        parse_pointer(listing.records)
    except JsonError:
        problems.append(("listing.records", "must be empty or a JSON Pointer starting with '/'"))
    return problems
