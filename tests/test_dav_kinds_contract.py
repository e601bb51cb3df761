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
from typing import Any

import pytest

from undogate.testing import KindCase, KindContract

from .caldav_servers import PASSWORD, USER, DavCollections
from .dav_world import ICALENDAR, VCARD, DocumentFormat, held, seed, seed_document

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


def document_case(
    dav: DavCollections, fmt: DocumentFormat, edited: str, *sets: dict[str, Any], **extra: Any
) -> KindCase:
    """A case of ``fmt``'s document kind: a document and its test copy, its change and
    the other one (``sets``), another client rewriting the property ``edited``."""
    path, copy = seed_document(dav, fmt), seed_document(dav, fmt)
    change, other_change = ({"set": values} for values in sets)
    return KindCase(
        kind=fmt.kind,
        url=dav.url(path),
        test_copy_url=dav.url(copy),
        change=change,
        other_change=other_change,
        outside_edit=edit_line(dav, path, edited),
        state=member_state(dav, path),
        **extra,
    )


def collection_case(
    dav: DavCollections, fmt: DocumentFormat, edited: str, *sets: dict[str, Any], **extra: Any
) -> KindCase:
    """A case of ``fmt``'s collection kind: a collection of one document and a test copy
    of one, changes of that document (``sets``), another client rewriting ``edited``."""
    collection, copy = fmt.new_collection(dav), fmt.new_collection(dav)
    path, _ = seed(dav, collection, fmt.template, fmt.suffix)
    seed(dav, copy, fmt.template, fmt.suffix)
    name = path.rsplit("/", 1)[1]
    change, other_change = ({"id": name, "set": values} for values in sets)
    return KindCase(
        kind=f"{fmt.kind}_collection",
        url=dav.url(collection),
        test_copy_url=dav.url(copy),
        change=change,
        other_change=other_change,
        outside_edit=edit_line(dav, path, edited),
        state=collection_state(dav, collection),
        **extra,
    )


class TestVCardContract(KindContract):
    @pytest.fixture
    def kind_case(self, radicale: DavCollections) -> KindCase:
        return document_case(
            radicale,
            VCARD,
            "NOTE",
            {"NOTE": "Called on Monday", "EMAIL": ["ada@new.example"]},
            {"NOTE": "Call again", "EMAIL": ["ada@other.example"]},
            settings={"fields": CONTACT_FIELDS},
            auth=BASIC,
            environ=LOGIN,
        )


class TestICalendarContract(KindContract):
    @pytest.fixture
    def kind_case(self, xandikos: DavCollections) -> KindCase:
        moved = {"value": "20261205T150000", "params": {"TZID": "Europe/Paris"}}
        return document_case(
            xandikos,
            ICALENDAR,
            "LOCATION",
            {"DTSTART": moved, "LOCATION": "Room 5"},
            {"DTSTART": "20261206T140000Z", "LOCATION": "Room 6"},
            settings={"fields": EVENT_FIELDS},
        )


class TestVCardCollectionContract(KindContract):
    @pytest.fixture
    def kind_case(self, radicale: DavCollections) -> KindCase:
        created = {"FN": "Kit Created", "EMAIL": f"kit-{uuid.uuid4().hex[:6]}@example.com"}
        return collection_case(
            radicale,
            VCARD,
            "NOTE",
            {"NOTE": "Called on Monday"},
            {"NOTE": "Call again"},
            settings={
                "fields": CONTACT_FIELDS,
                "identity": [{"field": "EMAIL", "evidence": "email"}],
            },
            auth=BASIC,
            environ=LOGIN,
            create={"create": created},
        )


class TestICalendarCollectionContract(KindContract):
    @pytest.fixture
    def kind_case(self, xandikos: DavCollections) -> KindCase:
        return collection_case(
            xandikos,
            ICALENDAR,
            "LOCATION",
            {"LOCATION": "Room 5"},
            {"LOCATION": "Room 6"},
            settings={"fields": EVENT_FIELDS, "identity": [{"field": "UID", "evidence": "exact"}]},
            create={"create": {"SUMMARY": "Kit event", "DTSTART": "20261207T090000Z"}},
        )
