"""What the agent tools tell a model: the server's instructions, each tool's description,
and the input schemas. The parts the kinds decide (what each kind is, the members a
change of it takes) are generated from the registry, so a newly installed kind is
described to agents the moment it is served."""

from __future__ import annotations

from typing import Any

from ..adapters import Adapter, adapters, member_takers
from ..jobs import STATES, AssertionKind

INSTRUCTIONS = (
    "undogate lets you propose changes to a few configured external records and "
    "documents. You prepare a job; a person reviews the exact before/after values and "
    "confirms or rejects it. You can never apply, confirm, undo or reject anything, and "
    "preparing writes nothing to the external system."
)

_LIST_RESOURCES = """\
List the external resources you may prepare changes to.

Each resource has an `id` (use it in prepare_changes), a `name`, a `kind` and `fields`:
{kinds}

Read-only: it changes nothing, and it never shows current values, URLs or credentials.
Safe to call at any time and as often as you like."""

_PREPARE_CHANGES = """\
Prepare a job of 1 to 8 changes for a person to review. It writes NOTHING to the
external system: undogate reads each resource now and records its current and planned
values. A person then reviews the exact before/after values and confirms or rejects
the job. You cannot apply, confirm, undo or reject a job, and you never need to.

Each change names a resource `id` from list_resources and then what its kind takes:
{kinds}
Optional per change:
`expected_version` (the version you based the change on; if the resource has moved on,
nothing is prepared and you get `stale_version` with the current version) and
`assertion_kind` (how you know the value: observed, inferred, imported or supplied).
`summary` tells the reviewer what and why, in one or two sentences.

Retry safely: always pass an `idempotency_key` (a new unique string, e.g. a UUID, per
intended job). If a call fails, times out or you are unsure it ran, call again with
the same key and the same input: you get the original job back (`replay: true`) and no
duplicate is created. The same key with different input is refused
(`idempotency_key_reused`): use a new key for a new change.

Returns the job id, its state, the resources and fields it will touch, and the path
where a person reviews it. Errors start with a stable code (for example
`stale_version`, `not_found`, `invalid_request`) followed by what to do next."""

JOB_STATUS_DESCRIPTION = f"""\
Read the state of a job you prepared, when it last changed, and, when a person
rejected it and said why, their reason. It never shows values, and only your own jobs:
any other id is `not_found`. A job's state is one of:
{chr(10).join(f"- `{state}`: {facts.for_agent}" for state, facts in STATES.items())}

Read-only: it changes nothing. Pass the `job_id` that prepare_changes returned."""


def _each(kinds: tuple[Adapter, ...], text: dict[str, str]) -> str:
    return "\n".join(f"- kind `{a.kind}`: {text[a.kind]}" for a in kinds)


def list_resources_description() -> str:
    """``list_resources``'s description: what each served kind is."""
    kinds = adapters()
    return _LIST_RESOURCES.format(kinds=_each(kinds, {a.kind: a.summary for a in kinds}))


def prepare_changes_description() -> str:
    """``prepare_changes``'s description: how a change of each served kind is written."""
    kinds = adapters()
    return _PREPARE_CHANGES.format(kinds=_each(kinds, {a.kind: a.agent_guide for a in kinds}))


def _nullable(schema: dict[str, Any], description: str) -> dict[str, Any]:
    kept = {k: v for k, v in schema.items() if k != "description"}
    return {"anyOf": [kept, {"type": "null"}], "default": None, "description": description}


def prepare_changes_schema() -> dict[str, Any]:
    """The input schema of ``prepare_changes``. The tool reads its arguments with the
    API's parser (``api.parse_prepare``), not with this schema: it only describes them."""
    members: dict[str, Any] = {
        "resource": {"type": "string", "description": "A resource id from list_resources."},
    }
    for name, (member, kinds) in member_takers().items():
        only = f"{', '.join(kinds)} only: " if len(kinds) < len(adapters()) else ""
        members[name] = _nullable(member.schema, f"{only}{member.schema.get('description', '')}.")
    members["expected_version"] = _nullable(
        {"type": "string"},
        "The version (entity tag) you based this change on; a mismatch is refused as "
        "stale_version and nothing is prepared.",
    )
    members["assertion_kind"] = _nullable(
        {"enum": [k.value for k in AssertionKind]},
        "How you know the new value: observed, inferred, imported or supplied.",
    )
    return {
        "title": "prepare_changesArguments",
        "type": "object",
        "additionalProperties": False,
        "required": ["summary", "changes"],
        "properties": {
            "summary": {
                "type": "string",
                "description": "What and why, for the reviewer, in one or two sentences.",
            },
            "changes": {
                "type": "array",
                "items": {"$ref": "#/$defs/ChangeInput"},
                "description": "1 to 8 changes.",
            },
            "idempotency_key": _nullable(
                {"type": "string"}, "A new unique string per intended job; repeat it on retries."
            ),
            "attribution_label": _nullable(
                {"type": "string"},
                "A label the reviewer sees as caller-supplied and unverified.",
            ),
            "session": _nullable(
                {"type": "string"},
                "Your session or run id, the same for every job of one run: a person can "
                "then undo that run's work as a whole. Caller-supplied, unverified.",
            ),
        },
        "$defs": {
            "ChangeInput": {
                "type": "object",
                "additionalProperties": False,
                "description": "One change in a prepare_changes call.",
                "required": ["resource"],
                "properties": members,
            }
        },
    }


__all__ = [
    "INSTRUCTIONS",
    "JOB_STATUS_DESCRIPTION",
    "list_resources_description",
    "prepare_changes_description",
    "prepare_changes_schema",
]
