"""The kinds of contacts and calendars pass the contract of the kit (``undogate.testing``),
as every built-in kind does (tests/test_kinds_contract.py): through a real served
gateway and the kit's fault proxy, against real servers. ``vcard`` and
``vcard_collection`` on Radicale with basic auth, ``icalendar`` and
``icalendar_collection`` on Xandikos; the collections' cases create, so the kit also
runs the crash cells of a create, undone once the test copy verified that undo.

A case's state is each member's lines, unfolded, in one order: both servers may store
what they were sent in another order or folding, which is never a change.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Callable

import pytest

from undogate.testing import KindCase, KindContract

from .caldav_servers import PASSWORD, USER, DavCollections
from .dav_world import CONTACT, EVENT, held, seed

pytestmark = pytest.mark.slow  # a served gateway per test, four kinds: handed out first
_UNFOLD = re.compile(r"\r?\n[ \t]")
_edits = itertools.count()
CONTACT_FIELDS = ["FN", "EMAIL", "NOTE", "TITLE"]
EVENT_FIELDS = ["SUMMARY", "DTSTART", "DTEND", "LOCATION", "DESCRIPTION"]
# Radicale's basic auth, as a resource's ``auth`` names it and the gateway's environment
# holds it.
BASIC = {"scheme": "basic", "token_env": "KIT_DAV_LOGIN"}
LOGIN = {"KIT_DAV_LOGIN": f"{USER}:{PASSWORD}"}


def canonical(text: str) -> bytes:
    lines = _UNFOLD.sub("", text).replace("\r\n", "\n").split("\n")
    return "\n".join(sorted(line for line in lines if line)).encode()


def member_state(dav: DavCollections, path: str) -> Callable[[], bytes]:
    return lambda: canonical(held(dav, path)[0])


def collection_state(dav: DavCollections, collection: str) -> Callable[[], bytes]:
    def state() -> bytes:
        listed = dav.propfind_members(collection).text
        hrefs = sorted(set(re.findall(r"<[^>]*href>([^<]+)</", listed)) - {collection})
        return b"\n--\n".join(h.encode() + b"\n" + canonical(held(dav, h)[0]) for h in hrefs)

    return state


def edit_line(dav: DavCollections, path: str, name: str) -> Callable[[], None]:
    """Another client rewrites the property ``name`` (unfolded), under the current tag."""

    def edit() -> None:
        text, etag = held(dav, path)
        unfolded = _UNFOLD.sub("", text)
        edited = re.sub(
            rf"(?m)^{name}[:;].*$", f"{name}:edited elsewhere {next(_edits)}\r", unfolded
        )
        content_type = "text/vcard" if path.endswith(".vcf") else "text/calendar"
        put = dav.put(path, edited.encode(), content_type, If_Match=etag)
        assert put.status_code in (200, 204), put.text

    return edit


class TestVCardContract(KindContract):
    @pytest.fixture
    def kind_case(self, radicale: DavCollections) -> KindCase:
        path, _ = seed(radicale, radicale.addressbook, CONTACT, ".vcf")
        copy, _ = seed(radicale, radicale.addressbook, CONTACT, ".vcf")
        return KindCase(
            kind="vcard",
            url=radicale.url(path),
            test_copy_url=radicale.url(copy),
            change={"set": {"NOTE": "Called on Monday", "EMAIL": ["ada@new.example"]}},
            other_change={"set": {"NOTE": "Call again", "EMAIL": ["ada@other.example"]}},
            outside_edit=edit_line(radicale, path, "NOTE"),
            state=member_state(radicale, path),
            settings={"fields": CONTACT_FIELDS},
            auth=BASIC,
            environ=LOGIN,
        )


class TestICalendarContract(KindContract):
    @pytest.fixture
    def kind_case(self, xandikos: DavCollections) -> KindCase:
        path, _ = seed(xandikos, xandikos.calendar, EVENT, ".ics")
        copy, _ = seed(xandikos, xandikos.calendar, EVENT, ".ics")
        moved = {"value": "20261205T150000", "params": {"TZID": "Europe/Paris"}}
        return KindCase(
            kind="icalendar",
            url=xandikos.url(path),
            test_copy_url=xandikos.url(copy),
            change={"set": {"DTSTART": moved, "LOCATION": "Room 5"}},
            other_change={"set": {"DTSTART": "20261206T140000Z", "LOCATION": "Room 6"}},
            outside_edit=edit_line(xandikos, path, "LOCATION"),
            state=member_state(xandikos, path),
            settings={"fields": EVENT_FIELDS},
        )


class TestVCardCollectionContract(KindContract):
    @pytest.fixture
    def kind_case(self, radicale: DavCollections) -> KindCase:
        book, copy = radicale.new_addressbook(), radicale.new_addressbook()
        path, _ = seed(radicale, book, CONTACT, ".vcf")
        seed(radicale, copy, CONTACT, ".vcf")
        name = path.rsplit("/", 1)[1]
        return KindCase(
            kind="vcard_collection",
            url=radicale.url(book),
            test_copy_url=radicale.url(copy),
            change={"id": name, "set": {"NOTE": "Called on Monday"}},
            other_change={"id": name, "set": {"NOTE": "Call again"}},
            outside_edit=edit_line(radicale, path, "NOTE"),
            state=collection_state(radicale, book),
            settings={
                "fields": CONTACT_FIELDS,
                "identity": [{"field": "EMAIL", "evidence": "email"}],
            },
            auth=BASIC,
            environ=LOGIN,
            create={
                "create": {"FN": "Kit Created", "EMAIL": f"kit-{uuid.uuid4().hex[:6]}@example.com"}
            },
        )


class TestICalendarCollectionContract(KindContract):
    @pytest.fixture
    def kind_case(self, xandikos: DavCollections) -> KindCase:
        calendar, copy = xandikos.new_calendar(), xandikos.new_calendar()
        path, _ = seed(xandikos, calendar, EVENT, ".ics")
        seed(xandikos, copy, EVENT, ".ics")
        name = path.rsplit("/", 1)[1]
        return KindCase(
            kind="icalendar_collection",
            url=xandikos.url(calendar),
            test_copy_url=xandikos.url(copy),
            change={"id": name, "set": {"LOCATION": "Room 5"}},
            other_change={"id": name, "set": {"LOCATION": "Room 6"}},
            outside_edit=edit_line(xandikos, path, "LOCATION"),
            state=collection_state(xandikos, calendar),
            settings={"fields": EVENT_FIELDS, "identity": [{"field": "UID", "evidence": "exact"}]},
            create={"create": {"SUMMARY": "Kit event", "DTSTART": "20261207T090000Z"}},
        )
