"""check-endpoint on a single contact and a single event (the whole-resource check with
an ``X-UNDOGATE-CHECK`` marker), on Radicale and Xandikos; and how a 412 for content a
server finds invalid is told apart from the 412 of a stale tag.

Xandikos answers both with 412: a stale tag with an empty body, invalid content with a
``DAV:error`` naming ``valid-address-data`` or ``valid-calendar-data``, a UID already used
in the calendar with ``no-uid-conflict``. Only the first shows that the tag was
compared, so only it counts as the stale-tag refusal the check relies on (and the check
makes a good write succeed first, so its content is one the server takes).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from undogate.adapters.dav.content import parse_document
from undogate.adapters.dav.formats import ICALENDAR_FORMAT, VCARD_FORMAT
from undogate.adapters.dav.preconditions import content_refusal
from undogate.net import RemoteResponse
from undogate.operations.endpoint_check import check_endpoint

from .caldav_servers import DavCollections
from .dav_world import CONTACT, CREDENTIALS_ENV, EVENT, dav_gateway, dav_resource, held, seed

CREDENTIALS = {CREDENTIALS_ENV: "alice:not-a-secret-radicale-0123"}
KINDS = {
    "vcard": (CONTACT, ".vcf", ["FN", "EMAIL", "NOTE"], VCARD_FORMAT),
    "icalendar": (EVENT, ".ics", ["SUMMARY", "LOCATION"], ICALENDAR_FORMAT),
}


@pytest.mark.parametrize("server", ["radicale", "xandikos"])
@pytest.mark.parametrize("kind", ["vcard", "icalendar"])
def test_the_check_verifies_a_contact_and_an_event(
    server: str, kind: str, request: pytest.FixtureRequest, data_dir: Path
) -> None:
    dav: DavCollections = request.getfixturevalue(server)
    template, suffix, fields, fmt = KINDS[kind]
    collection = dav.addressbook if suffix == ".vcf" else dav.calendar
    production, _ = seed(dav, collection, template, suffix)
    copy, _ = seed(dav, collection, template, suffix)
    prod_before, copy_before = held(dav, production), held(dav, copy)
    with dav_gateway(
        data_dir,
        dav_resource(dav, "prod", kind, production, fields),
        dav_resource(dav, "copy", kind, copy, fields, test_copy_of="prod"),
    ) as gw:
        result = check_endpoint(gw, "copy")
    assert result.passed, [(s.name, s.summary, s.message) for s in result.steps]
    steps = {s.name: s for s in result.steps}
    assert steps["stale_write_refused"].evidence == {"status": 412, "unchanged": True}
    assert steps["weak_if_match_refused"].evidence["status"] == 412
    assert steps["missing_not_created"].evidence["absent_after"] is True
    assert steps["undo_restores"].summary.endswith("every property reads as at the start")
    assert held(dav, production) == prod_before  # never written
    text, _ = held(dav, copy)
    assert "X-UNDOGATE-CHECK" not in text
    back = parse_document(text, fmt).properties(fmt)
    assert back == parse_document(copy_before[0], fmt).properties(fmt)


def _answer(status: int, body: bytes) -> RemoteResponse:
    return RemoteResponse(status=status, headers=httpx.Headers(), body=body, address=None)


def test_xandikos_names_what_it_refuses_and_a_stale_tag_names_nothing(
    xandikos: DavCollections,
) -> None:
    path, _ = seed(xandikos, xandikos.addressbook, CONTACT, ".vcf")
    text, etag = held(xandikos, path)
    edited = text.replace("TITLE:Countess", "TITLE:Mathematician").encode()
    moved = xandikos.put(path, edited, "text/vcard", If_Match=etag)
    assert moved.status_code == 204
    stale = xandikos.put(path, text.encode(), "text/vcard", If_Match=etag)
    invalid = xandikos.put(
        path,
        text.replace("VERSION:3.0\r\n", "").encode(),
        "text/vcard",
        If_Match=moved.headers["etag"],
    )
    _, event_uid = seed(xandikos, xandikos.calendar, EVENT, ".ics")
    taken = xandikos.put(
        f"{xandikos.calendar}another-{event_uid}.ics",
        EVENT.format(uid=event_uid).encode(),
        "text/calendar",
        If_None_Match="*",
    )
    answers = {
        "stale": _answer(stale.status_code, stale.content),
        "invalid": _answer(invalid.status_code, invalid.content),
        "taken": _answer(taken.status_code, taken.content),
    }
    assert {k: a.status for k, a in answers.items()} == {"stale": 412, "invalid": 412, "taken": 412}
    assert content_refusal(answers["stale"]) is None
    assert content_refusal(answers["invalid"]) == "valid-address-data"
    assert content_refusal(answers["taken"]) == "no-uid-conflict"
    assert held(xandikos, path)[0] == edited.decode()  # none of them changed anything
