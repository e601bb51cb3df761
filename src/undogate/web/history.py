"""A job's history as a reviewer reads it: a sentence per event, its facts as a short
list and the values it recorded as tables, never an internal event name or raw JSON.

Pure. Each event comes from ``views.event_view`` (the shape the API serves); an
event this module has no sentence for still shows, in plain words made from its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import views
from ..jsonvalue import JsonNumber, JsonValue
from ..ledger import Event
from .exact import json_text

#: event operation -> what happened (the "who" column says who did it).
SENTENCES: dict[str, str] = {
    "prepare": "Prepared the job: nothing was written.",
    "preview_apply": "Previewed the apply: every resource was read again.",
    "preview_undo": "Previewed the undo: every resource was read again.",
    "preview_accept_observed": "Previewed accepting the observed state.",
    "confirm_apply": "Confirmed the apply; the writes started.",
    "confirm_undo": "Confirmed the undo; the writes started.",
    "apply_done": "The write to {target} landed and reads back as planned.",
    "apply_refused": "The server refused the write to {target}: nothing changed there.",
    "apply_uncertain": "The write to {target} may or may not have landed: it is uncertain.",
    "undo_done": "The undo of {target} landed and reads back as before.",
    "undo_refused": "The server refused the undo of {target}: nothing changed there.",
    "undo_uncertain": "The undo of {target} may or may not have landed: it is uncertain.",
    "dispatch_stopped": "The remaining writes were not sent.",
    "finish_apply": "The apply finished.",
    "finish_undo": "The undo finished.",
    "reject": "Rejected the job: it can never be applied.",
    "accept_observed": "Accepted the state observed on {target} (a judgement, not proof).",
    "reconciled": "The job was reconciled.",
    "crash_recovered": "After an interruption, the job settled where its writes stand.",
    "identity_changed": "The identity of {target} changed in the config.",
    "invalidate": "The job was invalidated.",
    "endpoint_check_started": "An endpoint check started on a test copy.",
    "endpoint_check": "An endpoint check on a test copy finished.",
    "undo_accepted": "A reviewer accepted the verified undos of {target}: they are offered now.",
}

#: detail key -> its label in the facts list (others: their name in words)
FACT_LABELS: dict[str, str] = {
    "code": "Code",
    "message": "Why",
    "reason": "Why",
    "note": "Note",
    "observation": "Observed",
    "status": "Outcome",
    "http_status": "HTTP status",
    "detail": "Detail",
    "etag": "Version after",
    "test_copy": "Test copy",
    "check": "Check",
    "passed": "Passed",
}


def history(job_id: str, found: list[Event]) -> list[dict[str, Any]]:
    """The job's events, oldest first, each with ``sentence``, ``facts`` (label, text)
    and ``tables`` (values as field rows, or sizes for a document)."""
    rows: list[dict[str, Any]] = []
    for view in views.events_view(job_id, found)["events"]:  # type: ignore[union-attr]
        assert isinstance(view, dict)
        row: dict[str, Any] = dict(view)
        operation = str(view["operation"])
        target = view.get("target")
        template = SENTENCES.get(operation)
        if template is None:
            row["sentence"] = operation.replace("_", " ").capitalize() + "."
        else:
            row["sentence"] = template.format(target=target or "the resource")
        detail = view.get("detail")
        facts, tables = _detail(detail if isinstance(detail, dict) else {})
        row["facts"] = facts
        row["tables"] = tables
        rows.append(row)
    return rows


def _detail(detail: Mapping[str, JsonValue]) -> tuple[list[tuple[str, str]], list[Any]]:
    facts: list[tuple[str, str]] = []
    tables: list[dict[str, Any]] = []
    for key, value in detail.items():
        if key == "diff" and isinstance(value, dict):
            tables.append(_table(value))
        elif key == "changes" and isinstance(value, list):
            diffs = [v for v in value if isinstance(v, dict)]
            tables.extend(_table(v) for v in diffs)
            named = [v for v in value if not isinstance(v, dict)]
            if named:
                facts.append(("Changes", ", ".join(_change_number(v) for v in named)))
        elif key == "change":
            facts.append(("Change", _change_number(value)))
        else:
            facts.append((FACT_LABELS.get(key, key.replace("_", " ").capitalize()), _text(value)))
    return facts, tables


def _table(diff: Mapping[str, JsonValue]) -> dict[str, Any]:
    """One change's recorded values: a row per field, or a document's sizes."""
    table: dict[str, Any] = {"resource": diff.get("resource"), "rows": [], "sizes": None}
    fields = diff.get("fields")
    if isinstance(fields, dict):
        for name, sides in fields.items():
            sides = sides if isinstance(sides, dict) else {}
            before, after = sides.get("before"), sides.get("after")
            table["rows"].append(
                {
                    "field": name,
                    "before": before,
                    "before_present": not _absent(before),
                    "after": after,
                    "after_present": not _absent(after),
                }
            )
    if "before_bytes" in diff or "after_bytes" in diff:
        table["sizes"] = (_text(diff.get("before_bytes")), _text(diff.get("after_bytes")))
    return table


def _absent(side: JsonValue) -> bool:
    return isinstance(side, dict) and side == {"absent": True}


def _change_number(value: JsonValue) -> str:
    """A change's index as a reviewer counts them (from 1)."""
    text = value.text if isinstance(value, JsonNumber) else str(value)
    return str(int(text) + 1) if text.isascii() and text.isdigit() else text


def _text(value: JsonValue) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return ""
    return json_text(value)


__all__ = ["SENTENCES", "history"]
