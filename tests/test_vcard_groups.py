"""Grouped vCard properties (RFC 6350 groups), as Apple's address books write them:
``item1.EMAIL`` with its label ``item1.X-ABLabel``. A grouped property is a property
like any other, named with its group (``item1.EMAIL``): read, changed, written back and
undone on real Radicale 3 and Xandikos, every other line (the group's label, the other
groups, their parameters) kept as read; upserts and lookups in an address book of such
cards work. iCalendar has no groups: an event with one is still refused whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from undogate.adapters.dav.content import ContentError, Instance, parse_document, rewrite
from undogate.adapters.dav.formats import VCARD_FORMAT
from undogate.adapters.dav.listing import find_by_evidence
from undogate.adapters.registry import adapter_for
from undogate.errors import Conflict, InvalidRequest, RemoteContractBreach
from undogate.jobs import ABSENT, ChangeRequest, JobState, Operation

from .caldav_servers import DavCollections
from .dav_world import (
    EVENT,
    ICAL_TYPE,
    dav_gateway,
    dav_resource,
    held,
    outside_edit,
    prepare,
    properties,
    seed,
    server_of,
)
from .davservers import run
from .worlds import OWNER, LocalGateway

# As macOS Contacts writes a card: two labelled emails, a labelled address, a plain TEL.
APPLE_CARD = (
    "BEGIN:VCARD\r\nVERSION:3.0\r\nPRODID:-//Apple Inc.//macOS 15.1//EN\r\nUID:{uid}\r\n"
    "FN:Ada Lovelace\r\nN:Lovelace;Ada;;;\r\n"
    "item1.EMAIL;TYPE=INTERNET:ada@apple.example\r\nitem1.X-ABLabel:_$!<Other>!$_\r\n"
    "item2.EMAIL;type=INTERNET;type=pref:ada@lab.example\r\nitem2.X-ABLabel:Lab\r\n"
    "item3.ADR;type=HOME:;;1 Loop;Cupertino;CA;95014;USA\r\nitem3.X-ABADR:us\r\n"
    "TEL;type=CELL:+44 20 1234\r\nNOTE:Met at the fair\r\nEND:VCARD\r\n"
)
FIELDS = ["FN", "EMAIL", "X-ABLABEL", "NOTE"]


@pytest.fixture(params=["radicale", "xandikos"])
def dav(request: pytest.FixtureRequest) -> DavCollections:
    return server_of(request, request.param)


@pytest.fixture
def card(dav: DavCollections, data_dir: Path) -> Iterator[tuple[LocalGateway, str]]:
    path, _ = seed(dav, dav.addressbook, APPLE_CARD, ".vcf")
    with dav_gateway(data_dir, dav_resource(dav, "ada", "vcard", path, FIELDS)) as gw:
        yield gw, path


def _without(text: str, *prefixes: str) -> list[str]:
    """The logical lines of ``text`` (unfolded), but those starting with ``prefixes``
    (in any case)."""
    lines = re.sub(r"\r\n[ \t]", "", text).split("\r\n")
    return [line for line in lines if not line.lower().startswith(prefixes)]


def test_a_grouped_email_changes_and_undoes_leaving_its_label_and_every_other_group(
    dav: DavCollections, card: tuple[LocalGateway, str]
) -> None:
    gw, path = card
    start, _ = held(dav, path)
    before = properties(start)
    assert before["item1.EMAIL"] == (Instance("ada@apple.example", (("TYPE", ("INTERNET",)),)),)
    # Named in any case: recorded with its group in lowercase, its property in capitals.
    new = {"value": "ada@work.example", "params": {"TYPE": "INTERNET"}}
    job = prepare(gw, ChangeRequest("ada", set={"ITEM1.email": new}))
    assert job.changes[0].fields == ("item1.EMAIL",)
    preview = gw.preview(OWNER, job.id, Operation.APPLY)
    assert preview.token is not None
    (sent,) = gw.confirm(OWNER, job.id, preview.token, dry_run=True).requests
    body = str(sent["body"])
    # Only that one line differs from the card as read: the label, the other groups and
    # their parameters are sent byte for byte.
    assert "item1.EMAIL;TYPE=INTERNET:ada@work.example\r\n" in body
    assert _without(body, "item1.email") == _without(start, "item1.email")
    assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
    after = properties(held(dav, path)[0])
    assert after["item1.EMAIL"] == (Instance("ada@work.example", (("TYPE", ("INTERNET",)),)),)
    assert {n: v for n, v in after.items() if n != "item1.EMAIL"} == {
        n: v for n, v in before.items() if n != "item1.EMAIL"
    }
    assert run(gw, job.id, Operation.UNDO).state is JobState.UNDONE
    back, _ = held(dav, path)
    assert properties(back) == before
    if dav.name == "xandikos":  # it stores what it is sent: the card is back byte for byte
        assert back == start


def test_a_change_to_one_group_never_touches_another_group_nor_the_ungrouped_property(
    dav: DavCollections, card: tuple[LocalGateway, str]
) -> None:
    """``EMAIL`` is the ungrouped property: setting it adds a line and leaves every
    grouped EMAIL; a label set or removed is that group's only. An outside edit of
    another group's email, made after the apply, is kept by the undo."""
    gw, path = card
    before = properties(held(dav, path)[0])
    job = prepare(
        gw,
        ChangeRequest(
            "ada",
            set={"EMAIL": "ada@plain.example", "item2.X-ABLabel": "Work"},
            remove=["item1.X-ABLABEL"],
        ),
    )
    touched = ("EMAIL", "item2.X-ABLABEL", "item1.X-ABLABEL")
    assert sorted(job.changes[0].fields) == sorted(touched)
    assert job.changes[0].before == {
        "properties": {
            "item2.X-ABLABEL": [{"value": "Lab"}],
            "item1.X-ABLABEL": [{"value": "_$!<Other>!$_"}],
        }
    }
    assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
    after = properties(held(dav, path)[0])
    assert after["EMAIL"] == (Instance("ada@plain.example"),)
    assert after["item2.X-ABLABEL"] == (Instance("Work"),)
    assert "item1.X-ABLABEL" not in after
    untouched = {n: v for n, v in before.items() if n not in touched}
    assert {n: v for n, v in after.items() if n not in touched} == untouched
    outside_edit(dav, path, "ada@lab.example", "ada@lab2.example")
    assert run(gw, job.id, Operation.UNDO).state is JobState.UNDONE
    back = properties(held(dav, path)[0])
    assert back["item2.EMAIL"] == (Instance("ada@lab2.example", (("TYPE", ("INTERNET", "pref")),)),)
    assert {n: v for n, v in back.items() if n != "item2.EMAIL"} == {
        n: v for n, v in before.items() if n != "item2.EMAIL"
    }


def test_a_grouped_name_is_checked_as_its_property(card: tuple[LocalGateway, str]) -> None:
    gw, _ = card
    for name in ("item1.TEL", "item1.UID", "a.b.EMAIL", ".EMAIL", "item_1.EMAIL"):
        with pytest.raises(InvalidRequest, match="is not a property"):
            prepare(gw, ChangeRequest("ada", set={name: "x"}))


@pytest.fixture
def book(dav: DavCollections, data_dir: Path) -> Iterator[tuple[LocalGateway, str, str]]:
    """An address book of one Apple card and one plain card."""
    addressbook = dav.new_addressbook()
    apple, _ = seed(dav, addressbook, APPLE_CARD, ".vcf")
    plain = APPLE_CARD.replace("@apple.", "@plain.").replace("@lab.", "@plainlab.")
    seed(dav, addressbook, plain.replace("item1.", "").replace("item2.", ""), ".vcf")
    identity: list[dict[str, Any]] = [{"field": "EMAIL", "evidence": "email"}]
    entry = dav_resource(dav, "book", "vcard_collection", addressbook, FIELDS, identity=identity)
    with dav_gateway(data_dir, entry) as gw:
        yield gw, apple, addressbook


def test_an_upsert_finds_a_card_by_a_grouped_email_and_keeps_it_as_the_card_has_it(
    dav: DavCollections, book: tuple[LocalGateway, str, str]
) -> None:
    gw, apple, _ = book
    start = properties(held(dav, apple)[0])
    found = prepare(
        gw, ChangeRequest("book", upsert={"EMAIL": "ADA@Apple.example", "NOTE": "Upserted"})
    )
    change = found.changes[0]
    assert apple.endswith(str(change.target)) and change.fields == ("NOTE",)
    assert run(gw, found.id, Operation.APPLY).state is JobState.APPLIED
    now = properties(held(dav, apple)[0])
    assert now["NOTE"] == (Instance("Upserted"),)
    assert {n: v for n, v in now.items() if n != "NOTE"} == {
        n: v for n, v in start.items() if n != "NOTE"
    }
    # Evidence given in a group is evidence of its property: this finds the same card,
    # and its grouped email stays as the card has it.
    again = prepare(
        gw, ChangeRequest("book", upsert={"item7.EMAIL": "ada@lab.example", "NOTE": "Again"})
    )
    assert again.changes[0].target == change.target and again.changes[0].fields == ("NOTE",)
    new = prepare(gw, ChangeRequest("book", upsert={"EMAIL": "grace@new.example", "FN": "G"}))
    assert new.changes[0].before is ABSENT


def test_an_upsert_whose_match_was_edited_after_the_listing_prepares_nothing(
    dav: DavCollections, book: tuple[LocalGateway, str, str]
) -> None:
    """The listing reads each member, then the update is planned on a read of its own:
    an edit between the two (here, the test's own, between the adapter's two steps) that
    takes the evidence away refuses the upsert (``conflict``), nothing prepared."""
    gw, apple, _ = book
    resource = gw.resource("book")
    evidence = {"EMAIL": {"ada@apple.example"}}
    ((name, matched),) = find_by_evidence(gw.wire, resource, VCARD_FORMAT, evidence, None)
    assert apple.endswith(name) and matched == {"EMAIL": "ada@apple.example"}
    outside_edit(dav, apple, "ada@apple.example", "grace@apple.example")
    edited = held(dav, apple)
    adapter = adapter_for("vcard_collection")
    given: dict[str, Any] = {"EMAIL": "ada@apple.example", "NOTE": "Upserted"}
    with pytest.raises(Conflict) as refused:
        adapter._update_match(  # type: ignore[attr-defined]  # the step after the listing
            gw.wire, resource, given, name, evidence, gw.config.limits, None
        )
    assert refused.value.details["id"] == name
    assert "grace" not in refused.value.message
    assert held(dav, apple) == edited
    assert gw.ledger.list_jobs(OWNER.owner_id, "account-assistant") == []


def test_an_event_with_a_grouped_line_is_still_refused_whole(
    dav: DavCollections, data_dir: Path
) -> None:
    """iCalendar has no groups: an event with one is not one undogate can change (Radicale
    will not even store one; Xandikos does), and a change naming a group on an event is
    refused as naming no property."""
    fields = ["SUMMARY", "LOCATION"]
    plain, _ = seed(dav, dav.calendar, EVENT, ".ics")
    named = pytest.raises(InvalidRequest, match="is not a property plain's fields allow")
    with dav_gateway(data_dir, dav_resource(dav, "plain", "icalendar", plain, fields)) as gw, named:
        prepare(gw, ChangeRequest("plain", set={"item1.SUMMARY": "Moved"}))
    event = EVENT.replace("LOCATION:Room 4\r\n", "LOCATION:Room 4\r\nitem1.X-ROOM:4\r\n")
    if dav.name == "radicale":
        stored = dav.put(f"{dav.calendar}grouped.ics", event.format(uid="g").encode(), ICAL_TYPE)
        assert stored.status_code == 400
        return
    path, _ = seed(dav, dav.calendar, event, ".ics")
    start = held(dav, path)
    refused = pytest.raises(RemoteContractBreach, match=r"'item1\.X-ROOM' is not a property name")
    with (
        dav_gateway(data_dir, dav_resource(dav, "review", "icalendar", path, fields)) as gw,
        refused,
    ):
        prepare(gw, ChangeRequest("review", set={"SUMMARY": "Moved"}))
    assert held(dav, path) == start


# -- the rewrite itself, over many cards -------------------------------------------------

_GROUPS = st.sampled_from(["", "item1", "item2", "ITEM3", "work"])
_PROPS = st.sampled_from(["EMAIL", "X-ABLabel", "TEL", "NOTE"])
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), max_size=30)


@st.composite
def _cards(draw: st.DrawFn) -> str:
    lines = ["BEGIN:VCARD", "VERSION:3.0", "FN:Ada"]
    for group, prop, value in draw(st.lists(st.tuples(_GROUPS, _PROPS, _TEXT), max_size=8)):
        escaped = value.replace("\\", "\\\\").replace(",", "\\,").replace(";", "\\;")
        lines.append(f"{group}{'.' if group else ''}{prop};TYPE=x:{escaped}")
    return "\r\n".join([*lines, "END:VCARD", ""])


def _groups_spelled(text: str) -> set[str]:
    heads = (re.split("[;:]", line, maxsplit=1)[0] for line in text.split("\r\n"))
    return {head.partition(".")[0] for head in heads if "." in head}


@settings(max_examples=200, deadline=None)
@given(_cards(), _GROUPS, _PROPS, st.lists(_TEXT, max_size=3))
def test_a_rewrite_of_one_grouped_property_keeps_every_other_line_and_undoes(
    text: str, group: str, prop: str, values: list[str]
) -> None:
    fmt = VCARD_FORMAT
    doc = parse_document(text, fmt)
    name = f"{group.lower()}.{prop.upper()}" if group else prop.upper()
    start = doc.properties(fmt)
    goal = tuple(Instance(v) for v in values)
    written = rewrite(doc, fmt, {name: goal})
    after = parse_document(written, fmt).properties(fmt)
    assert after.get(name, ()) == goal
    assert {n: v for n, v in after.items() if n != name} == {
        n: v for n, v in start.items() if n != name
    }
    # Every line not of that property is sent as read, in its order.
    ours = (name.lower() + ";", name.lower() + ":")
    assert _without(written, *ours) == _without(text, *ours)
    # A group the card has keeps its spelling (``ITEM3``): its label's line is spelled so.
    if group and group.lower() in {g.lower() for g in _groups_spelled(text)}:
        assert _groups_spelled(written) <= _groups_spelled(text)
    back = rewrite(parse_document(written, fmt), fmt, {name: start.get(name, ())})
    assert parse_document(back, fmt).properties(fmt) == start


@pytest.mark.parametrize("line", ["item1.BEGIN:VCARD", "item1.END:VCARD", "item1.VERSION:4.0"])
def test_a_group_on_the_frame_of_a_card_is_no_card(line: str) -> None:
    """A group names related properties; on ``BEGIN``, ``END`` or ``VERSION`` it would
    make a frame that is not one: such a card is refused, never read around."""
    text = f"BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Ada\r\n{line}\r\nEND:VCARD\r\n"
    with pytest.raises(ContentError, match="is not a property name"):
        parse_document(text, VCARD_FORMAT)
