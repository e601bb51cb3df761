"""A gateway over a real CardDAV/CalDAV server (tests/caldav_servers.py), for the tests
of the kinds of contacts and calendars: the config entries of their resources, a
gateway with the server's credentials in its environment, members seeded as another
client would, and what a server holds read back by property. ``VCARD`` and ``ICALENDAR``
say where each format's documents live, so that a test of both formats is one test."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from undogate.adapters.dav.content import Properties, parse_document
from undogate.adapters.dav.formats import ICALENDAR_FORMAT, VCARD_FORMAT, Format
from undogate.config import parse_config
from undogate.jobs import ChangeRequest, Job, PrepareRequest
from undogate.ledger import open_store
from undogate.net import PinnedClient

from .caldav_servers import PASSWORD, USER, DavCollections
from .worlds import AGENT, LocalGateway

CREDENTIALS_ENV = "DAV_CREDENTIALS"
VCARD_TYPE, ICAL_TYPE = "text/vcard", "text/calendar"

CONTACT = (
    "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:{uid}\r\nPRODID:-//Hand//EN\r\nFN:Ada Lovelace\r\n"
    "N:Lovelace;Ada;;;\r\nEMAIL;TYPE=work:ada@old.example\r\n"
    "EMAIL;TYPE=home:ada@home.example\r\nX-CUSTOM-THING:keep me\r\n"
    "NOTE:A note long enough to be folded by a server that folds at seventy-five o\r\n"
    " ctets\\, with a comma\r\nTEL;TYPE=cell:+44 20 1234\r\nORG:Analytical Engines\\, Ltd\r\n"
    "TITLE:Countess\r\nEND:VCARD\r\n"
)
EVENT = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Hand//EN\r\n"
    "BEGIN:VTIMEZONE\r\nTZID:Europe/Paris\r\nBEGIN:STANDARD\r\nDTSTART:19701025T030000\r\n"
    "RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\r\nTZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\n"
    "TZNAME:CET\r\nEND:STANDARD\r\nBEGIN:DAYLIGHT\r\nDTSTART:19700329T020000\r\n"
    "RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU\r\nTZOFFSETFROM:+0100\r\nTZOFFSETTO:+0200\r\n"
    "TZNAME:CEST\r\nEND:DAYLIGHT\r\nEND:VTIMEZONE\r\n"
    "BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20261201T090000Z\r\nSUMMARY:Design review\r\n"
    "DTSTART;TZID=Europe/Paris:20261204T150000\r\nDTEND;TZID=Europe/Paris:20261204T160000\r\n"
    "LOCATION:Room 4\r\nDESCRIPTION:Agenda\r\nBEGIN:VALARM\r\nACTION:DISPLAY\r\n"
    "DESCRIPTION:Reminder\r\nTRIGGER:-PT15M\r\nEND:VALARM\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)


@dataclass(frozen=True)
class DocumentFormat:
    """One format's documents on a server, as the tests of its kinds start from them."""

    kind: str  # the document's kind; its collection's is ``{kind}_collection``
    template: str  # a document of it, ``{uid}`` to fill
    suffix: str
    fields: tuple[str, ...]  # the properties its tests allow
    collection: Callable[[DavCollections], str]  # the server's collection of them
    new_collection: Callable[[DavCollections], str]  # a fresh, empty one
    properties: Callable[[str], Properties]


def dav_resource(
    server: DavCollections, rid: str, kind: str, path: str, fields: list[str], **extra: Any
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": rid,
        "agent_id": "account-assistant",
        "name": rid,
        "kind": kind,
        "url": server.url(path),
        "fields": fields,
        "conditional_writes": True,
        "allow_loopback_http": True,
    }
    if server.auth is not None:  # Radicale: basic auth, the gateway adds it
        entry.update(token_env=CREDENTIALS_ENV, token_scheme="basic")
    entry.update(extra)
    return entry


@contextlib.contextmanager
def dav_gateway(data_dir: Path, *resources: dict[str, Any]) -> Iterator[LocalGateway]:
    config = parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": list(resources),
            "agents": [{"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}],
        }
    )
    ledger = open_store(config.server)
    http = PinnedClient(request_timeout_s=config.server.request_timeout_s)
    try:
        environ = {CREDENTIALS_ENV: f"{USER}:{PASSWORD}"}
        gw = LocalGateway(config=config, ledger=ledger, http=http, environ=environ)
        gw.recover()
        yield gw
    finally:
        http.close()
        ledger.close()


def server_of(request: pytest.FixtureRequest, name: str) -> DavCollections:
    found: DavCollections = request.getfixturevalue(name)
    return found


def seed(server: DavCollections, collection: str, template: str, suffix: str) -> tuple[str, str]:
    """A new member made by another client; its path and its UID."""
    uid = uuid.uuid4().hex
    path = f"{collection}{uid}{suffix}"
    content_type = VCARD_TYPE if suffix == ".vcf" else ICAL_TYPE
    made = server.put(path, template.format(uid=uid).encode(), content_type, If_None_Match="*")
    assert made.status_code == 201, made.text
    return path, uid


def held(server: DavCollections, path: str) -> tuple[str, str]:
    """What the server holds at ``path``: its text and its ETag."""
    got = server.request("GET", path)
    assert got.status_code == 200, got.status_code
    return got.text, got.headers["etag"]


def properties(text: str, fmt: Format = VCARD_FORMAT) -> Properties:
    return parse_document(text, fmt).properties(fmt)


def event_properties(text: str) -> Properties:
    return properties(text, ICALENDAR_FORMAT)


def outside_edit(server: DavCollections, path: str, old: str, new: str) -> None:
    """Another client rewrites one line of the member, under its current tag."""
    text, etag = held(server, path)
    assert old in text, (old, text)
    content_type = VCARD_TYPE if path.endswith(".vcf") else ICAL_TYPE
    put = server.put(path, text.replace(old, new).encode(), content_type, If_Match=etag)
    assert put.status_code in (200, 204), put.text


VCARD = DocumentFormat(
    "vcard",
    CONTACT,
    ".vcf",
    ("FN", "EMAIL", "TEL", "ORG", "TITLE", "NOTE"),
    lambda server: server.addressbook,
    lambda server: server.new_addressbook(),
    properties,
)
ICALENDAR = DocumentFormat(
    "icalendar",
    EVENT,
    ".ics",
    ("SUMMARY", "DTSTART", "DTEND", "LOCATION", "DESCRIPTION"),
    lambda server: server.calendar,
    lambda server: server.new_calendar(),
    event_properties,
)


def seed_document(server: DavCollections, fmt: DocumentFormat) -> str:
    """A new document of ``fmt`` in the server's collection of them; its path."""
    path, _ = seed(server, fmt.collection(server), fmt.template, fmt.suffix)
    return path


@contextlib.contextmanager
def document_gateway(
    server: DavCollections, data_dir: Path, fmt: DocumentFormat, rid: str
) -> Iterator[tuple[LocalGateway, str]]:
    """A gateway over one new document of ``fmt`` (the resource ``rid``), and its path."""
    path = seed_document(server, fmt)
    with dav_gateway(data_dir, dav_resource(server, rid, fmt.kind, path, [*fmt.fields])) as gw:
        yield gw, path


def prepare(gw: LocalGateway, *changes: ChangeRequest) -> Job:
    request = PrepareRequest(summary="a contact or an event", changes=tuple(changes))
    return gw.prepare(AGENT, "account-assistant", request).job


__all__ = [
    "CONTACT",
    "CREDENTIALS_ENV",
    "EVENT",
    "ICALENDAR",
    "ICAL_TYPE",
    "VCARD",
    "VCARD_TYPE",
    "DocumentFormat",
    "dav_gateway",
    "dav_resource",
    "document_gateway",
    "event_properties",
    "held",
    "outside_edit",
    "prepare",
    "properties",
    "seed",
    "seed_document",
    "server_of",
]
