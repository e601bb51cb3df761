"""What the kinds of contacts and calendars take in the config: the properties a change
may touch (``fields``), and for an address book or a calendar the identity evidence an
upsert matches on. A property that reschedules, re-identifies or invites is refused
here, at config load, never at the first change."""

from __future__ import annotations

import re
from typing import Any

from ...resources import KindSettings, Limits, Resource
from ..json_collection.settings import IdentityRule, identity_problems
from .formats import CHECK_PROPERTY, FORBIDDEN, STRUCTURAL

_PROPERTY_NAME = re.compile(r"[A-Z0-9-]{1,64}")


class PropertySettings(KindSettings):
    # The properties a change may set or remove, in capitals (EMAIL, NOTE, DTSTART).
    fields: tuple[str, ...] = ()

    def fingerprint_part(self) -> dict[str, Any]:
        return {"fields": sorted(self.fields)}


class PropertyCollectionSettings(PropertySettings):
    # Evidence of identity for an upsert: {field: EMAIL, evidence: email}, or
    # {field: UID, evidence: exact}.
    identity: tuple[IdentityRule, ...] = ()


def property_settings(resource: Resource) -> PropertySettings:
    settings = resource.settings
    assert isinstance(settings, PropertySettings), f"{resource.id} is not a kind of properties"
    return settings


def collection_settings(resource: Resource) -> PropertyCollectionSettings:
    settings = resource.settings
    assert isinstance(settings, PropertyCollectionSettings), f"{resource.id} is not a collection"
    return settings


def _why_not(name: str) -> str | None:
    if "." in name:
        return (
            f"{name[:64]!r} names a group: fields name properties, and a property allowed "
            "is allowed in every group (EMAIL allows item1.EMAIL)"
        )
    if not _PROPERTY_NAME.fullmatch(name):
        return f"{name[:64]!r} is not a property name in capitals (EMAIL, DTSTART, X-NAME)"
    if name in FORBIDDEN:
        return (
            f"{name} cannot be allow-listed: changing it reschedules an event, "
            "re-identifies it or sends invitations"
        )
    if name in STRUCTURAL:
        return (
            f"{name} is not a property a change may touch: it frames the object or says "
            "how it is read"
        )
    if name == CHECK_PROPERTY:
        return f"{name} is the endpoint check's own marker"
    return None


def property_problems(resource: Resource, limits: Limits) -> list[tuple[str, str]]:
    """The allow-list rules every kind of contacts and calendars shares."""
    problems: list[tuple[str, str]] = []
    fields = property_settings(resource).fields
    if not fields:
        problems.append(("fields", f"a {resource.kind} needs at least one property in fields"))
    if len(fields) > limits.max_fields_per_resource:
        problems.append(("fields", f"at most {limits.max_fields_per_resource} properties"))
    if len(set(fields)) != len(fields):
        problems.append(("fields", "a property is named twice"))
    for j, name in enumerate(fields):
        why = _why_not(name)
        if why is not None:
            problems.append((f"fields[{j}]", why))
    return problems


def collection_problems(resource: Resource, limits: Limits) -> list[tuple[str, str]]:
    problems = property_problems(resource, limits)
    if not resource.url.endswith("/"):
        problems.append(("url", "an address book's or a calendar's URL ends with /"))
    settings = collection_settings(resource)

    def field_problem(rule: IdentityRule) -> tuple[str, str] | None:
        if rule.field == "UID":
            return (
                None if rule.evidence == "exact" else ("evidence", "a UID is evidence only exactly")
            )
        if rule.field not in settings.fields:
            return "field", f"{rule.field!r} is neither UID nor in fields"
        return None

    return problems + identity_problems(settings.identity, field_problem)


def copy_problem(copy: Resource, production: Resource) -> str | None:
    """A test copy allow-lists the same properties as what it stands for."""
    if sorted(property_settings(copy).fields) != sorted(property_settings(production).fields):
        return f"the fields must be the same as {production.id!r}'s"
    return None


__all__ = [
    "PropertyCollectionSettings",
    "PropertySettings",
    "collection_problems",
    "collection_settings",
    "copy_problem",
    "property_problems",
    "property_settings",
]
