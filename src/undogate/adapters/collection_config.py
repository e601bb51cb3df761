"""What a ``json_collection`` needs of its settings (SPEC §12): the record kinds' field
rules, how records are created, and identity evidence that never guesses."""

from __future__ import annotations

from ..resources import Limits, Resource
from .evidence import EVIDENCE_KINDS
from .record_fields import field_problems


def collection_problems(resource: Resource, limits: Limits) -> list[tuple[str, str]]:
    problems = field_problems(resource, limits)
    if resource.create not in (None, "put", "post"):
        problems.append(("create", "a json_collection creates with put or post"))
    fields = set(resource.fields)
    seen: set[str] = set()
    for i, rule in enumerate(resource.identity):
        if rule.evidence not in EVIDENCE_KINDS:
            problems.append(
                (
                    f"identity[{i}].evidence",
                    f"{rule.evidence!r} is not identity evidence: only "
                    + ", ".join(EVIDENCE_KINDS)
                    + " match (never similarity, fuzzy or name matching)",
                )
            )
        if rule.field not in fields:
            problems.append((f"identity[{i}].field", f"{rule.field!r} is not in fields"))
        if rule.field in seen:
            problems.append((f"identity[{i}].field", f"{rule.field!r} is named twice"))
        seen.add(rule.field)
    lookup = resource.lookup
    if resource.identity and lookup is None:
        problems.append(
            ("lookup", "identity evidence needs a lookup: {query: ...} or {list: true}")
        )
    if lookup is not None:
        if not resource.identity:
            problems.append(("lookup", "a lookup needs identity evidence to look up"))
        if (lookup.query is None) == (not lookup.list):
            problems.append(("lookup", "give exactly one of query or list: true"))
        if lookup.query is not None:
            if not lookup.query.startswith("?") or "{value}" not in lookup.query:
                problems.append(
                    ("lookup.query", "a query template starts with '?' and holds {value}")
                )
            elif len(resource.identity) > 1 and "{field}" not in lookup.query:
                problems.append(
                    (
                        "lookup.query",
                        "with several identity fields, the template names {field} too",
                    )
                )
    if resource.create == "post" and not resource.identity:
        problems.append(
            (
                "create",
                "create: post needs identity evidence: a lost answer to a POST is "
                "resolved by finding the one new record that matches it",
            )
        )
    for j, name in enumerate(resource.server_fields):
        if name in fields:
            problems.append((f"server_fields[{j}]", f"{name!r} is an allow-listed field"))
    return problems
