"""What real CardDAV/CalDAV servers do, pinned as plain HTTP: the ground the vCard and
iCalendar kinds stand on (docs/compatibility.md will cite these).

Radicale 3.9 (basic auth) and Xandikos 0.4 (anonymous), each in its own venv
(tests/caldav_servers.py). Every member a test writes has a fresh name, so the tests of a
module share one server without meeting.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import httpx
import pytest
from defusedxml import ElementTree

from .caldav_servers import USER, DavCollections

DAV = {"D": "DAV:"}
VCARD_TYPE = "text/vcard"
ICAL_TYPE = "text/calendar"
UNFOLD = re.compile(r"\r?\n[ \t]")


def contact(uid: str, email: str = "ada@old.example") -> bytes:
    return (
        "BEGIN:VCARD\r\nVERSION:3.0\r\n"
        f"UID:{uid}\r\nFN:Ada Lovelace\r\nN:Lovelace;Ada;;;\r\nEMAIL;TYPE=work:{email}\r\n"
        "END:VCARD\r\n"
    ).encode()


def event(uid: str, start: str = "20261204T150000Z") -> bytes:
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//undogate tests//EN\r\n"
        f"BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20261201T090000Z\r\nDTSTART:{start}\r\n"
        "SUMMARY:Design review\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    ).encode()


# A kind of member: (its collection on a server, its content type, its body for a UID,
# a second version of that body).
Member = tuple[Callable[[DavCollections], str], str, Callable[[str], bytes], Callable[[str], bytes]]
MEMBERS: dict[str, Member] = {
    "vcard": (
        lambda s: s.addressbook,
        VCARD_TYPE,
        contact,
        lambda uid: contact(uid, "ada@new.example"),
    ),
    "icalendar": (
        lambda s: s.calendar,
        ICAL_TYPE,
        event,
        lambda uid: event(uid, "20261205T150000Z"),
    ),
}
SERVERS = ("radicale", "xandikos")
CASES = [(server, member) for server in SERVERS for member in MEMBERS]
#: A server, a fresh member path in its collection, the server's name, the member kind.
Case = tuple[DavCollections, str, str, Member]


@pytest.fixture(params=CASES, ids=[f"{s}-{m}" for s, m in CASES])
def case(request: pytest.FixtureRequest) -> Case:
    """A server, a fresh member path in its address book or calendar, and the member kind."""
    server_name, member_name = request.param
    server: DavCollections = request.getfixturevalue(server_name)
    member = MEMBERS[member_name]
    suffix = ".vcf" if member_name == "vcard" else ".ics"
    return server, f"{member[0](server)}{uuid.uuid4().hex[:10]}{suffix}", server_name, member


def created(server: DavCollections, path: str, member: Member) -> str:
    """Create ``path`` (``If-None-Match: *``); its ETag."""
    _, content_type, first, _ = member
    made = server.put(path, first(path), content_type, If_None_Match="*")
    assert made.status_code == 201, made.text
    return str(made.headers["etag"])


def unfolded_lines(text: str) -> list[str]:
    return UNFOLD.sub("", text).replace("\r\n", "\n").rstrip("\n").split("\n")


# -- ETags and preconditions, on both servers, contacts and events -----------------------


def test_a_create_gives_one_strong_etag_that_get_and_head_repeat(case: Case) -> None:
    server, path, _, member = case
    tag = created(server, path, member)
    assert re.fullmatch(r'"[0-9a-f]{40,64}"', tag), tag  # strong: no W/, a content hash
    read = server.request("GET", path)
    assert read.status_code == 200
    assert read.headers["etag"] == tag
    assert read.headers["content-type"].startswith(member[1])
    assert server.request("HEAD", path).headers["etag"] == tag


def test_if_none_match_star_refuses_an_existing_member_and_keeps_it(case: Case) -> None:
    server, path, _, member = case
    tag = created(server, path, member)
    again = server.put(path, member[3](path), member[1], If_None_Match="*")
    assert again.status_code == 412
    assert server.request("GET", path).headers["etag"] == tag


def test_the_current_tag_updates_with_204_and_a_new_strong_etag(case: Case) -> None:
    server, path, _, member = case
    tag = created(server, path, member)
    updated = server.put(path, member[3](path), member[1], If_Match=tag)
    assert updated.status_code == 204
    new_tag = updated.headers["etag"]
    assert new_tag != tag
    assert not new_tag.startswith("W/")
    assert server.request("GET", path).headers["etag"] == new_tag


@pytest.mark.parametrize("which", ["stale", "weak form of the current"])
def test_a_stale_or_weak_if_match_is_refused_with_412_and_nothing_changed(
    case: Case, which: str
) -> None:
    server, path, _, member = case
    first_tag = created(server, path, member)
    current = server.put(path, member[3](path), member[1], If_Match=first_tag)
    current_tag = current.headers["etag"]
    before = server.request("GET", path)
    sent = first_tag if which == "stale" else f"W/{current_tag}"
    refused = server.put(path, member[2](path), member[1], If_Match=sent)
    assert refused.status_code == 412
    deleted = server.request("DELETE", path, headers={"If-Match": sent})
    assert deleted.status_code == 412
    after = server.request("GET", path)
    assert (after.headers["etag"], after.content) == (current_tag, before.content)


@pytest.mark.parametrize("tag", ['"0123456789abcdef0123456789abcdef01234567"', "*"])
def test_if_match_on_a_missing_member_creates_nothing(case: Case, tag: str) -> None:
    server, path, _, member = case
    refused = server.put(path, member[2](path), member[1], If_Match=tag)
    assert refused.status_code == 412
    assert server.request("GET", path).status_code == 404


# Radicale answers a DELETE with a 200 and a multistatus body; Xandikos with a bare 204.
DELETE_STATUS = {"radicale": 200, "xandikos": 204}


def test_a_delete_with_the_current_tag_removes_the_member(case: Case) -> None:
    server, path, server_name, member = case
    tag = created(server, path, member)
    deleted = server.request("DELETE", path, headers={"If-Match": tag})
    assert deleted.status_code == DELETE_STATUS[server_name]
    assert server.request("GET", path).status_code == 404


def test_propfind_depth_1_lists_each_member_with_the_etag_a_get_gives(case: Case) -> None:
    server, _, server_name, member = case
    collection = member[0](server)
    fresh = server.new_addressbook() if member[1] == VCARD_TYPE else server.new_calendar()
    suffix = ".vcf" if member[1] == VCARD_TYPE else ".ics"
    tags = {f"{fresh}m{n}{suffix}": created(server, f"{fresh}m{n}{suffix}", member) for n in (1, 2)}
    listed = server.propfind_members(fresh)
    assert listed.status_code == 207
    found: dict[str, str | None] = {}
    for response in ElementTree.fromstring(listed.content).iterfind("D:response", DAV):
        href = response.findtext("D:href", namespaces=DAV)
        assert href is not None
        found[href] = response.findtext("D:propstat/D:prop/D:getetag", namespaces=DAV)
    assert set(found) == {fresh, *tags}, (server_name, collection, found)
    for href, tag in tags.items():
        assert found[href] == tag == server.request("GET", href).headers["etag"]


# -- what each server does to the document it stores ------------------------------------

# Content lines in an order and folding of our own, with an X- property and two EMAILs.
OUR_VCARD = (
    "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:{uid}\r\nPRODID:-//undogate tests//EN\r\n"
    "FN:Ada Lovelace\r\nN:Lovelace;Ada;;;\r\n"
    "EMAIL;TYPE=work:ada@old.example\r\nEMAIL;TYPE=home:ada@home.example\r\n"
    "X-CUSTOM-THING:keep me\r\n"
    "NOTE:A note long enough to be folded\r\n"
    "  by a server that folds at seventy-five octets\\, with an escaped comma\r\n"
    "TEL:+44 20 1234\r\nEND:VCARD\r\n"
)
RADICALE_VCARD = (
    "BEGIN:VCARD\r\nVERSION:3.0\r\nPRODID:-//undogate tests//EN\r\nUID:{uid}\r\n"
    "EMAIL;TYPE=work:ada@old.example\r\nEMAIL;TYPE=home:ada@home.example\r\n"
    "FN:Ada Lovelace\r\nN:Lovelace;Ada;;;\r\n"
    "NOTE:A note long enough to be folded by a server that folds at seventy-five\r\n"
    "  octets\\, with an escaped comma\r\n"
    "TEL:+44 20 1234\r\nX-CUSTOM-THING:keep me\r\nEND:VCARD\r\n"
)


def test_radicale_reorders_and_refolds_a_vcard_and_keeps_every_content_line(
    radicale: DavCollections,
) -> None:
    path = f"{radicale.addressbook}{uuid.uuid4().hex[:10]}.vcf"
    ours = OUR_VCARD.format(uid=path)
    made = radicale.put(path, ours.encode(), VCARD_TYPE)
    assert made.status_code == 201
    stored = radicale.request("GET", path).text
    # VERSION, PRODID, UID first, then the rest by name (two EMAILs in their order),
    # folded at 75 octets, CRLF: every content line kept, unfolded, exactly.
    assert stored == RADICALE_VCARD.format(uid=path)
    assert sorted(unfolded_lines(stored)) == sorted(unfolded_lines(ours))


def test_radicale_answers_lf_with_crlf(radicale: DavCollections) -> None:
    path = f"{radicale.addressbook}{uuid.uuid4().hex[:10]}.vcf"
    ours = contact(path).decode().replace("\r\n", "\n")
    assert radicale.put(path, ours.encode(), VCARD_TYPE).status_code == 201
    stored = radicale.request("GET", path).text
    assert stored.count("\n") == stored.count("\r\n") == ours.count("\n")
    assert sorted(unfolded_lines(stored)) == sorted(unfolded_lines(ours))


def test_radicale_drops_what_follows_an_unescaped_comma_in_a_vcard_text_value(
    radicale: DavCollections,
) -> None:
    """A writer must escape TEXT values: Radicale (through vobject) reads ``NOTE:one, two``
    as the list ``one``, ``two`` and keeps the first."""
    path = f"{radicale.addressbook}{uuid.uuid4().hex[:10]}.vcf"
    body = contact(path).replace(b"END:VCARD", b"NOTE:one, two\r\nEND:VCARD")
    assert radicale.put(path, body, VCARD_TYPE).status_code == 201
    stored = radicale.request("GET", path).text
    assert "NOTE:one\r\n" in stored
    assert "two" not in stored
    escaped = contact(path).replace(b"END:VCARD", b"NOTE:one\\, two\r\nEND:VCARD")
    assert radicale.put(path, escaped, VCARD_TYPE).status_code == 204
    assert "NOTE:one\\, two\r\n" in radicale.request("GET", path).text


def test_xandikos_stores_a_vcard_byte_for_byte(xandikos: DavCollections) -> None:
    path = f"{xandikos.addressbook}{uuid.uuid4().hex[:10]}.vcf"
    ours = OUR_VCARD.format(uid=path).encode()
    assert xandikos.put(path, ours, VCARD_TYPE).status_code == 201
    assert xandikos.request("GET", path).content == ours


OUR_EVENT = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//undogate tests//EN\r\nX-WR-CALNAME:kept\r\n"
    "BEGIN:VTIMEZONE\r\nTZID:Europe/Paris\r\n"
    "BEGIN:STANDARD\r\nDTSTART:19701025T030000\r\nRRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\r\n"
    "TZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\nTZNAME:CET\r\nEND:STANDARD\r\n"
    "END:VTIMEZONE\r\n"
    "BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20261201T090000Z\r\nSUMMARY:Design review\r\n"
    "DTSTART;TZID=Europe/Paris:20261204T150000\r\nDTEND;TZID=Europe/Paris:20261204T160000\r\n"
    "LOCATION:Room 4\\; east wing\r\nX-CUSTOM:kept\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)
RADICALE_EVENT = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//undogate tests//EN\r\nX-WR-CALNAME:kept\r\n"
    "BEGIN:VTIMEZONE\r\nTZID:Europe/Paris\r\n"
    "BEGIN:STANDARD\r\nDTSTART:19701025T030000\r\nRRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\r\n"
    "TZNAME:CET\r\nTZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\nEND:STANDARD\r\n"
    "END:VTIMEZONE\r\n"
    "BEGIN:VEVENT\r\nUID:{uid}\r\n"
    "DTSTART;TZID=Europe/Paris:20261204T150000\r\nDTEND;TZID=Europe/Paris:20261204T160000\r\n"
    "DTSTAMP:20261201T090000Z\r\nLOCATION:Room 4\\; east wing\r\nSUMMARY:Design review\r\n"
    "X-CUSTOM:kept\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)
# Xandikos stores what icalendar writes: its own property order, and RRULE's parts
# re-ordered (BYDAY before BYMONTH) inside the untouched VTIMEZONE.
XANDIKOS_EVENT = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//undogate tests//EN\r\nX-WR-CALNAME:kept\r\n"
    "BEGIN:VTIMEZONE\r\nTZID:Europe/Paris\r\n"
    "BEGIN:STANDARD\r\nDTSTART:19701025T030000\r\nRRULE:FREQ=YEARLY;BYDAY=-1SU;BYMONTH=10\r\n"
    "TZNAME:CET\r\nTZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\nEND:STANDARD\r\n"
    "END:VTIMEZONE\r\n"
    "BEGIN:VEVENT\r\nSUMMARY:Design review\r\n"
    "DTSTART;TZID=Europe/Paris:20261204T150000\r\nDTEND;TZID=Europe/Paris:20261204T160000\r\n"
    "DTSTAMP:20261201T090000Z\r\nUID:{uid}\r\nLOCATION:Room 4\\; east wing\r\n"
    "X-CUSTOM:kept\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)
STORED_EVENT = {"radicale": RADICALE_EVENT, "xandikos": XANDIKOS_EVENT}


@pytest.mark.parametrize("server_name", SERVERS)
def test_both_servers_rewrite_an_event_each_in_its_own_order(
    request: pytest.FixtureRequest, server_name: str
) -> None:
    server: DavCollections = request.getfixturevalue(server_name)
    path = f"{server.calendar}{uuid.uuid4().hex[:10]}.ics"
    ours = OUR_EVENT.format(uid=path)
    assert server.put(path, ours.encode(), ICAL_TYPE).status_code == 201
    stored = server.request("GET", path).text
    assert stored == STORED_EVENT[server_name].format(uid=path)


# -- content a server refuses -------------------------------------------------------------


def test_xandikos_refuses_invalid_content_with_412_and_names_the_precondition(
    xandikos: DavCollections,
) -> None:
    """A content-validity 412 carries a ``valid-*-data`` element; a stale tag's 412 has an
    empty body. That is how a check tells them apart."""
    card = f"{xandikos.addressbook}{uuid.uuid4().hex[:10]}.vcf"
    no_fn = b"BEGIN:VCARD\r\nVERSION:3.0\r\nUID:no-fn\r\nEND:VCARD\r\n"
    refused = xandikos.put(card, no_fn, VCARD_TYPE)
    assert refused.status_code == 412
    assert b"valid-address-data" in refused.content
    assert xandikos.request("GET", card).status_code == 404
    ics = f"{xandikos.calendar}{uuid.uuid4().hex[:10]}.ics"
    refused = xandikos.put(ics, event(ics).replace(b"END:VCALENDAR\r\n", b""), ICAL_TYPE)
    assert refused.status_code == 412
    assert b"valid-calendar-data" in refused.content
    assert xandikos.request("GET", ics).status_code == 404
    tag = xandikos.put(card, contact(card), VCARD_TYPE).headers["etag"]
    xandikos.put(card, contact(card, "b@example.com"), VCARD_TYPE, If_Match=tag)
    stale = xandikos.put(card, contact(card, "c@example.com"), VCARD_TYPE, If_Match=tag)
    assert stale.status_code == 412
    assert stale.content == b""


def test_xandikos_accepts_an_x_property_marker_and_content_radicale_would_refuse(
    xandikos: DavCollections, radicale: DavCollections
) -> None:
    """The endpoint check's ``X-UNDOGATE-CHECK`` marker is accepted by both; a vCard with no
    UID is accepted by Xandikos and refused by Radicale with 400 (not 412)."""
    for server in (xandikos, radicale):
        path = f"{server.addressbook}{uuid.uuid4().hex[:10]}.vcf"
        marked = contact(path).replace(b"END:VCARD", b"X-UNDOGATE-CHECK:probe-1\r\nEND:VCARD")
        assert server.put(path, marked, VCARD_TYPE).status_code == 201
        assert "X-UNDOGATE-CHECK:probe-1" in server.request("GET", path).text
    no_uid = b"BEGIN:VCARD\r\nVERSION:3.0\r\nFN:No Uid\r\nEND:VCARD\r\n"
    assert xandikos.put(f"{xandikos.addressbook}no-uid.vcf", no_uid, VCARD_TYPE).status_code == 201
    path = f"{radicale.addressbook}no-uid.vcf"
    assert radicale.put(path, no_uid, VCARD_TYPE).status_code == 400
    assert radicale.request("GET", path).status_code == 404


# A second member with a UID already used in its collection: (status, precondition element),
# or None where the server accepts it.
DUPLICATE_UID = {
    ("radicale", "vcard"): (409, b"no-uid-conflict"),
    ("radicale", "icalendar"): (409, b"no-uid-conflict"),
    ("xandikos", "vcard"): None,
    ("xandikos", "icalendar"): (412, b"no-uid-conflict"),
}


def test_a_second_member_with_a_used_uid(case: Case) -> None:
    server, path, server_name, member = case
    _, content_type, body, _ = member
    uid = f"shared-{uuid.uuid4().hex[:8]}"
    assert server.put(path, body(uid), content_type).status_code == 201
    second = f"{path[:-4]}-second{path[-4:]}"
    answer = server.put(second, body(uid), content_type)
    expected = DUPLICATE_UID[(server_name, "vcard" if content_type == VCARD_TYPE else "icalendar")]
    if expected is None:
        assert answer.status_code == 201
        return
    status, precondition = expected
    assert answer.status_code == status
    assert precondition in answer.content
    assert server.request("GET", second).status_code == 404


def test_radicale_needs_its_password_and_writes_nothing_without_it(
    radicale: DavCollections,
) -> None:
    path = f"{radicale.addressbook}{uuid.uuid4().hex[:10]}.vcf"
    for auth in (None, (USER, "wrong-password")):
        answer = httpx.put(
            radicale.url(path),
            content=contact(path),
            headers={"Content-Type": VCARD_TYPE},
            auth=auth,
            trust_env=False,
            timeout=10.0,
        )
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"].startswith("Basic ")
    assert radicale.request("GET", path).status_code == 404
