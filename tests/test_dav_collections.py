"""``vcard_collection`` and ``icalendar_collection``: address books and calendars whose
members appear and disappear, on real Radicale 3 (basic auth) and Xandikos.

A create is a PUT of a new object with ``If-None-Match: *`` and a UID the gateway mints;
its undo (a DELETE with the tag its read-back gave) is offered only once
``check-endpoint`` verified it on a test copy and a reviewer accepted it; until then the
create is irreversible and needs an acknowledgement. A delete keeps the whole text and is
undone by putting it back. An upsert finds its member by identity evidence over one
PROPFIND listing and never guesses: two contacts whose emails differ only in case are
``ambiguous``, and nothing is prepared or written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from undogate.adapters.dav.content import Instance
from undogate.errors import (
    Ambiguous,
    IrreversibleNotAcknowledged,
    TransitionNotAllowed,
    UndoNotVerified,
)
from undogate.jobs import ABSENT, ChangeRequest, ChangeState, JobState, Observation, Operation
from undogate.operations.endpoint_check import check_endpoint
from undogate.operations.undo_offer import accept_verified_undo, resource_undo_offer

from .caldav_servers import DavCollections
from .dav_world import (
    CONTACT,
    CREDENTIALS_ENV,
    EVENT,
    ICAL_TYPE,
    VCARD_TYPE,
    dav_gateway,
    dav_resource,
    event_properties,
    held,
    prepare,
    properties,
    seed,
    server_of,
)
from .davservers import run
from .relay import relay
from .worlds import OWNER, LocalGateway

CONTACT_FIELDS = ["FN", "N", "EMAIL", "TEL", "NOTE", "TITLE"]
EVENT_FIELDS = ["SUMMARY", "DTSTART", "DTEND", "LOCATION", "DESCRIPTION"]
CREDENTIALS = {CREDENTIALS_ENV: "alice:not-a-secret-radicale-0123"}


@dataclass
class Book:
    """A gateway over one address book (``book``), its test copy (``book-copy``), a
    calendar (``cal``) and its test copy (``cal-copy``) on one server."""

    gw: LocalGateway
    dav: DavCollections
    book: str
    calendar: str

    def members(self, collection: str) -> dict[str, str]:
        """Member path → its text, as the server lists and holds them."""
        listed = self.dav.propfind_members(collection)
        assert listed.status_code == 207
        hrefs = set(re.findall(r"<[^>]*href>([^<]+\.(?:vcf|ics))</", listed.text))
        return {h: held(self.dav, h)[0] for h in sorted(hrefs)}

    def verify_and_accept(self, copy: str, production: str) -> None:
        """check-endpoint on the test copy, then a reviewer accepts the verified undos."""
        result = check_endpoint(self.gw, copy)
        assert result.passed, [(s.name, s.summary, s.message) for s in result.steps]
        accept_verified_undo(self.gw, OWNER, production)


@pytest.fixture(params=["radicale", "xandikos"])
def dav(request: pytest.FixtureRequest) -> DavCollections:
    return server_of(request, request.param)


@pytest.fixture
def world(dav: DavCollections, data_dir: Path) -> Iterator[Book]:
    book, book_copy = dav.new_addressbook(), dav.new_addressbook()
    cal, cal_copy = dav.new_calendar(), dav.new_calendar()
    identity: list[dict[str, Any]] = [{"field": "EMAIL", "evidence": "email"}]
    with dav_gateway(
        data_dir,
        dav_resource(dav, "book", "vcard_collection", book, CONTACT_FIELDS, identity=identity),
        dav_resource(
            dav,
            "book-copy",
            "vcard_collection",
            book_copy,
            CONTACT_FIELDS,
            identity=identity,
            test_copy_of="book",
        ),
        dav_resource(
            dav,
            "cal",
            "icalendar_collection",
            cal,
            EVENT_FIELDS,
            identity=[{"field": "UID", "evidence": "exact"}],
        ),
        dav_resource(
            dav,
            "cal-copy",
            "icalendar_collection",
            cal_copy,
            EVENT_FIELDS,
            identity=[{"field": "UID", "evidence": "exact"}],
            test_copy_of="cal",
        ),
    ) as gw:
        seed(dav, book_copy, CONTACT, ".vcf")  # a test copy holds someone already
        seed(dav, cal_copy, EVENT, ".ics")
        yield Book(gw, dav, book, cal)


def test_a_contact_created_then_undone_after_a_verified_accepted_undo(world: Book) -> None:
    gw, dav = world.gw, world.dav
    start = world.members(world.book)
    job = prepare(
        gw,
        ChangeRequest(
            "book",
            create={
                "FN": "Grace Hopper",
                "EMAIL": {"value": "grace@navy.example", "params": {"TYPE": "work"}},
                "NOTE": "Met at the fair, twice",
            },
        ),
    )
    change = job.changes[0]
    assert change.target is not None and change.target.endswith(".vcf")
    # Not verified yet: the create is irreversible before the click, and says so.
    preview = gw.preview(OWNER, job.id, Operation.APPLY)
    assert preview.needs_acknowledgement and preview.changes[0].irreversible
    assert preview.token is not None
    with pytest.raises(IrreversibleNotAcknowledged):
        gw.confirm(OWNER, job.id, preview.token)
    assert world.members(world.book) == start  # nothing written
    (request,) = gw.confirm(OWNER, job.id, preview.token, dry_run=True).requests
    assert request["method"] == "PUT" and request["headers"]["If-None-Match"] == "*"
    applied = gw.confirm(OWNER, job.id, preview.token, acknowledge_irreversible=True).job
    assert applied.state is JobState.APPLIED
    path = f"{world.book}{change.target}"
    assert set(world.members(world.book)) == {*start, path}
    made = properties(held(dav, path)[0])
    assert made["FN"] == (Instance("Grace Hopper"),)
    assert made["UID"][0].value in str(request["body"])  # the UID the gateway minted
    refused = gw.preview(OWNER, job.id, Operation.UNDO)
    assert refused.token is None and refused.blockers[0]["code"] == UndoNotVerified.code
    world.verify_and_accept("book-copy", "book")
    undone = run(gw, job.id, Operation.UNDO)
    assert undone.state is JobState.UNDONE
    assert undone.actions[-1].method == "DELETE"
    assert world.members(world.book) == start


def test_two_contacts_whose_emails_differ_only_in_case_are_ambiguous(world: Book) -> None:
    gw, dav = world.gw, world.dav
    for email in ("Ada@Example.com", "ada@example.com"):
        seed(dav, world.book, CONTACT.replace("ada@old.example", email), ".vcf")
    start = world.members(world.book)
    assert len(start) == 2
    with pytest.raises(Ambiguous) as refused:
        prepare(gw, ChangeRequest("book", upsert={"EMAIL": "ADA@example.com", "NOTE": "x"}))
    candidates = refused.value.details["candidates"]
    assert isinstance(candidates, list) and len(candidates) == 2
    assert all(c["evidence"] == {"EMAIL": "ada@example.com"} for c in candidates)
    assert world.members(world.book) == start  # nothing written
    assert gw.ledger.list_jobs(OWNER.owner_id, "account-assistant") == []  # nothing prepared


def test_an_upsert_updates_the_one_match_and_creates_when_none(world: Book) -> None:
    gw, dav = world.gw, world.dav
    path, _ = seed(dav, world.book, CONTACT, ".vcf")
    found = prepare(
        gw, ChangeRequest("book", upsert={"EMAIL": "ADA@old.example", "NOTE": "Upserted"})
    )
    change = found.changes[0]
    assert path.endswith(str(change.target)) and change.fields == ("NOTE",)  # EMAIL kept
    assert run(gw, found.id, Operation.APPLY).state is JobState.APPLIED
    props = properties(held(dav, path)[0])
    assert props["NOTE"] == (Instance("Upserted"),)
    assert [i.value for i in props["EMAIL"]] == ["ada@old.example", "ada@home.example"]
    new = prepare(gw, ChangeRequest("book", upsert={"EMAIL": "bob@new.example", "FN": "Bob"}))
    assert new.changes[0].before is ABSENT and new.changes[0].fields == ("EMAIL", "FN")
    assert new.changes[0].after["preexisting"] == []  # type: ignore[index]


def test_a_contact_deleted_keeps_its_text_and_is_put_back(world: Book) -> None:
    gw, dav = world.gw, world.dav
    path, _ = seed(dav, world.book, CONTACT, ".vcf")
    text, _ = held(dav, path)
    name = path.rsplit("/", 1)[1]
    job = prepare(gw, ChangeRequest("book", id=name, delete=True))
    world.verify_and_accept("book-copy", "book")
    assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
    assert dav.request("GET", path).status_code == 404
    assert run(gw, job.id, Operation.UNDO).state is JobState.UNDONE
    assert properties(held(dav, path)[0]) == properties(text)


def test_an_update_by_name_changes_only_its_properties(world: Book) -> None:
    gw, dav = world.gw, world.dav
    path, _ = seed(dav, world.book, CONTACT, ".vcf")
    before = properties(held(dav, path)[0])
    job = prepare(gw, ChangeRequest("book", id=path.rsplit("/", 1)[1], set={"TITLE": "Analyst"}))
    assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
    after = properties(held(dav, path)[0])
    assert after["TITLE"] == (Instance("Analyst"),)
    assert {n: v for n, v in after.items() if n != "TITLE"} == {
        n: v for n, v in before.items() if n != "TITLE"
    }
    assert run(gw, job.id, Operation.UNDO).state is JobState.UNDONE
    assert properties(held(dav, path)[0]) == before


def test_an_event_created_in_a_zone_carries_its_time_zone(world: Book) -> None:
    gw, dav = world.gw, world.dav
    job = prepare(
        gw,
        ChangeRequest(
            "cal",
            create={
                "SUMMARY": "Design review, round two",
                "DTSTART": {"value": "20261204T150000", "params": {"TZID": "Europe/Paris"}},
            },
        ),
    )
    applied = run_acknowledged(gw, job.id)
    assert applied.state is JobState.APPLIED
    text, _ = held(dav, f"{world.calendar}{job.changes[0].target}")
    assert "BEGIN:VTIMEZONE" in text and "TZID:Europe/Paris" in text
    assert event_properties(text)["SUMMARY"] == (Instance("Design review, round two"),)
    # The next upsert by its UID finds it: an update, not a second event.
    uid = event_properties(text)["UID"][0].value
    again = prepare(gw, ChangeRequest("cal", upsert={"UID": uid, "LOCATION": "Room 4"}))
    assert again.changes[0].target == job.changes[0].target


def test_the_endpoint_check_verifies_both_undos_on_each_collection(world: Book) -> None:
    for copy, production in (("book-copy", "book"), ("cal-copy", "cal")):
        result = check_endpoint(world.gw, copy)
        assert result.passed, [(s.name, s.summary, s.message) for s in result.steps]
        assert set(result.undos) == {"undo_of_create", "recreate"}
        steps = {s.name: s for s in result.steps}
        assert steps["stale_write_refused"].evidence == {"status": 412, "unchanged": True}
        assert steps["collateral_guard"].evidence["members"] == 1
        assert "restore_test_copy" not in steps
        offer = resource_undo_offer(world.gw, production)
        assert set(offer.awaiting_acceptance) == {"undo_of_create", "recreate"}


# Someone else's object where a lost create would be found: the job's own text, and more
# (a property; an alarm inside the event, which the event's own properties never show).
THEIRS = {
    "vcard_collection": ("END:VCARD", "ORG:Third Party Ltd\r\n", "ORG"),
    "icalendar_collection": (
        "END:VEVENT",
        "BEGIN:VALARM\r\nACTION:DISPLAY\r\nDESCRIPTION:Their own reminder\r\n"
        "TRIGGER:-PT1H\r\nEND:VALARM\r\n",
        "VALARM",
    ),
}


@pytest.mark.parametrize("kind", sorted(THEIRS))
def test_a_lost_create_never_adopts_someone_elses_object_nor_lets_undo_delete_it(
    dav: DavCollections, data_dir: Path, kind: str
) -> None:
    """The create never reaches the server (a relay reads it and closes without an
    answer); another client then puts, at the member the create named, the job's own
    document with more in it. It is never the job's: reconciliation is blocked naming
    what differs (never its values), no undo can delete it, and nothing is written."""
    contact = kind == "vcard_collection"
    fields = CONTACT_FIELDS if contact else EVENT_FIELDS
    make = dav.new_addressbook if contact else dav.new_calendar
    collection, copy = make(), make()
    end, extra, named = THEIRS[kind]
    asked = (
        {"FN": "Ann Example", "EMAIL": "ann@example.com"}
        if contact
        else {"SUMMARY": "Planning", "DTSTART": "20261204T150000Z"}
    )
    with relay(dav.base_url) as held_at:
        production = dav_resource(dav, "production", kind, collection, fields)
        production["url"] = held_at.url(collection)
        with dav_gateway(
            data_dir,
            production,
            dav_resource(dav, "copy", kind, copy, fields, test_copy_of="production"),
        ) as gw:
            result = check_endpoint(gw, "copy")
            assert result.passed, [(s.name, s.message) for s in result.steps]
            accept_verified_undo(gw, OWNER, "production")
            job = prepare(gw, ChangeRequest("production", create=asked))
            change = job.changes[0]
            held_at.withhold_next_write()
            assert run(gw, job.id, Operation.APPLY).state is JobState.NEEDS_REVIEW
            assert [line.split(b" ")[0] for line in held_at.withheld] == [b"PUT"]
            path = f"{collection}{change.target}"
            assert dav.request("GET", path).status_code == 404  # the server never saw it
            sent = str(change.after["document"])  # type: ignore[index]
            theirs = sent.replace(end, extra + end, 1)
            content_type = VCARD_TYPE if contact else ICAL_TYPE
            made = dav.put(path, theirs.encode(), content_type, If_None_Match="*")
            assert made.status_code == 201, made.text
            kept = held(dav, path)

            preview = gw.preview(OWNER, job.id, Operation.ACCEPT_OBSERVED)
            assert preview.changes[0].observation is Observation.NEITHER
            assert preview.token is None
            (blocker,) = preview.blockers
            assert blocker["code"] == "reconciliation_blocked"
            assert f"'{named}'" in blocker["message"]
            assert "Third Party" not in blocker["message"] and "Their own" not in blocker["message"]
            with pytest.raises(TransitionNotAllowed):
                gw.preview(OWNER, job.id, Operation.UNDO)
            stored = gw.ledger.load_job(job.id)
            assert stored is not None and stored.changes[0].state is ChangeState.UNCERTAIN
            assert stored.changes[0].applied_etag is None
            assert held(dav, path) == kept  # nothing written, nothing deleted

            # Once their object is gone, the create plainly never happened.
            assert dav.request("DELETE", path).status_code in (200, 204)
            assert run(gw, job.id, Operation.ACCEPT_OBSERVED).state is JobState.PREPARED


def run_acknowledged(gw: LocalGateway, job_id: str) -> Any:
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token is not None
    return gw.confirm(OWNER, job_id, preview.token, acknowledge_irreversible=True).job
