"""What a vCard and an iCalendar object share, one test over both formats, on real
Radicale 3 (basic auth) and Xandikos: each allow-listed property set by a conditional PUT
of the document as read, every other property kept, and the undo putting the document's
properties back exactly. What is a format's own is tests/test_vcard.py's and
tests/test_icalendar.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from undogate.jobs import ChangeRequest, JobState, Operation

from .dav_world import ICALENDAR, VCARD, DocumentFormat, document_gateway, held, prepare, server_of
from .davservers import run

PARIS = {"TZID": "Europe/Paris"}


@pytest.mark.parametrize("server", ["radicale", "xandikos"])
@pytest.mark.parametrize(
    ("fmt", "name", "value"),
    [
        (VCARD, "FN", "Augusta Ada King"),
        (VCARD, "TEL", {"value": "+44 20 7946 0000", "params": {"TYPE": ["work", "voice"]}}),
        (VCARD, "ORG", "Difference Engines;Research"),
        (VCARD, "TITLE", "Countess of Lovelace"),
        (VCARD, "NOTE", "Two lines:\nthe second, with a comma; and a semicolon \\ backslash"),
        (ICALENDAR, "SUMMARY", "Design review; agenda, and a \\ backslash"),
        (ICALENDAR, "DTSTART", {"value": "20261204T143000", "params": PARIS}),
        (ICALENDAR, "LOCATION", "Room 5, second floor"),
        (ICALENDAR, "DESCRIPTION", "Two lines:\nthe second"),
    ],
    ids=lambda v: v.kind if isinstance(v, DocumentFormat) else None,
)
def test_each_property_applies_and_undoes(
    request: pytest.FixtureRequest,
    server: str,
    data_dir: Path,
    fmt: DocumentFormat,
    name: str,
    value: object,
) -> None:
    dav = server_of(request, server)
    with document_gateway(dav, data_dir, fmt, "doc") as (gw, path):
        before = fmt.properties(held(dav, path)[0])
        job = prepare(gw, ChangeRequest("doc", set={name: value}))
        assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
        after = fmt.properties(held(dav, path)[0])
        assert after[name] != before.get(name)
        assert {n: v for n, v in after.items() if n != name} == {
            n: v for n, v in before.items() if n != name
        }
        assert run(gw, job.id, Operation.UNDO).state is JobState.UNDONE
        assert fmt.properties(held(dav, path)[0]) == before
