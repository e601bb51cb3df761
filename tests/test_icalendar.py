"""``icalendar``: one event, its allow-listed properties set and removed by a
conditional PUT of the calendar object as read, on real Radicale 3 (basic auth) and
Xandikos (which re-serializes every event it stores, RRULE parts reordered even inside
an untouched VTIMEZONE).

An event moved and moved back keeps its VTIMEZONE and its VALARM as the server holds
them; times are shown with their zone; a time in a zone the object does not define is
refused before anything is planned.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.adapters.dav.content import Instance, content_lines
from undogate.errors import InvalidRequest, RemoteContractBreach
from undogate.jobs import ChangeRequest, JobState, Operation
from undogate.views import job_receipt

from .caldav_servers import DavCollections
from .dav_world import (
    EVENT,
    ICALENDAR,
    dav_gateway,
    dav_resource,
    document_gateway,
    event_properties,
    held,
    prepare,
    seed,
    server_of,
)
from .davservers import run
from .worlds import LocalGateway

PARIS = {"TZID": "Europe/Paris"}
UNFOLD = re.compile(r"\r?\n[ \t]")


@pytest.fixture(params=["radicale", "xandikos"])
def dav(request: pytest.FixtureRequest) -> DavCollections:
    return server_of(request, request.param)


@pytest.fixture
def event(
    dav: DavCollections, data_dir: Path
) -> Iterator[tuple[LocalGateway, DavCollections, str]]:
    with document_gateway(dav, data_dir, ICALENDAR, "review") as (gw, path):
        yield gw, dav, path


def nested(text: str, component: str) -> list[str]:
    """The lines of every ``component`` block, unfolded, as the server holds them."""
    lines = [line.raw for line in content_lines(text) if component in line.path]
    return [UNFOLD.sub("", raw).rstrip("\r\n") for raw in lines]


def test_an_event_moved_and_moved_back_keeps_its_time_zone_and_alarm(
    event: tuple[LocalGateway, DavCollections, str],
) -> None:
    gw, dav, path = event
    start, _ = held(dav, path)
    job = prepare(
        gw,
        ChangeRequest(
            "review",
            set={
                "DTSTART": {"value": "20261205T150000", "params": PARIS},
                "DTEND": {"value": "20261205T163000", "params": PARIS},
            },
        ),
    )
    assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
    moved, _ = held(dav, path)
    props = event_properties(moved)
    assert props["DTSTART"] == (Instance("20261205T150000", (("TZID", ("Europe/Paris",)),)),)
    assert props["DTEND"][0].value == "20261205T163000"
    assert nested(moved, "VTIMEZONE") == nested(start, "VTIMEZONE")
    assert nested(moved, "VALARM") == nested(start, "VALARM")
    assert run(gw, job.id, Operation.UNDO).state is JobState.UNDONE
    back, _ = held(dav, path)
    assert event_properties(back) == event_properties(start)
    assert nested(back, "VTIMEZONE") == nested(start, "VTIMEZONE")


def test_times_are_shown_with_their_zone(event: tuple[LocalGateway, DavCollections, str]) -> None:
    gw, _, _ = event
    job = prepare(
        gw,
        ChangeRequest(
            "review",
            set={
                "DTSTART": {"value": "20261205T150000", "params": PARIS},
                "DTEND": "20261205T153000Z",
            },
        ),
    )
    receipt: Any = job_receipt(job)
    rows = {r["field"]: r for r in receipt["changes"][0]["rows"]}
    assert rows["DTSTART"]["before"] == "2026-12-04 15:00 Europe/Paris"
    assert rows["DTSTART"]["after"] == "2026-12-05 15:00 Europe/Paris"
    assert rows["DTEND"]["after"] == "2026-12-05 15:30 UTC"
    assert rows["DTSTART"]["changes"] is True


def test_changing_the_description_leaves_the_alarms_own(
    event: tuple[LocalGateway, DavCollections, str],
) -> None:
    gw, dav, path = event
    job = prepare(gw, ChangeRequest("review", set={"DESCRIPTION": "Agenda, revised"}))
    assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
    text, _ = held(dav, path)
    assert event_properties(text)["DESCRIPTION"] == (Instance("Agenda, revised"),)
    assert "DESCRIPTION:Reminder" in nested(text, "VALARM")


def test_times_a_calendar_would_misread_are_refused(
    event: tuple[LocalGateway, DavCollections, str],
) -> None:
    gw, _, _ = event
    refusals = [
        ({"value": "20261205T150000", "params": {"TZID": "America/New_York"}}, "not a time zone"),
        ({"value": "20261205T150000Z", "params": PARIS}, "without Z"),
        ("20261205", "VALUE"),
        ("5 December 2026, 3pm", "date-time like"),
    ]
    for value, words in refusals:
        with pytest.raises(InvalidRequest, match=words):
            prepare(gw, ChangeRequest("review", set={"DTSTART": value}))
    job = prepare(
        gw,
        ChangeRequest(
            "review", set={"DTSTART": {"value": "20261205", "params": {"VALUE": "DATE"}}}
        ),
    )
    assert job.changes[0].fields == ("DTSTART",)


def test_an_event_with_changed_instances_is_not_guessed_at(
    dav: DavCollections, data_dir: Path
) -> None:
    overridden = EVENT.replace(
        "END:VCALENDAR",
        "BEGIN:VEVENT\r\nUID:{uid}\r\nRECURRENCE-ID;TZID=Europe/Paris:20261211T150000\r\n"
        "DTSTAMP:20261201T090000Z\r\nDTSTART;TZID=Europe/Paris:20261211T170000\r\n"
        "SUMMARY:Design review (moved)\r\nEND:VEVENT\r\nEND:VCALENDAR",
    ).replace("LOCATION:Room 4\r\n", "RRULE:FREQ=WEEKLY;COUNT=3\r\n")
    path, _ = seed(dav, dav.calendar, overridden, ".ics")
    series = dav_resource(dav, "series", "icalendar", path, [*ICALENDAR.fields])
    with (
        dav_gateway(data_dir, series) as gw,
        pytest.raises(RemoteContractBreach, match="one VEVENT per resource"),
    ):
        prepare(gw, ChangeRequest("series", set={"SUMMARY": "Renamed"}))


def test_a_property_after_the_alarm_is_replaced_where_it_stands(
    dav: DavCollections, data_dir: Path
) -> None:
    """A property may stand after the event's VALARM (Radicale sorts a VEVENT's
    children by name, and its X- properties land after VALARM); it is still the event's
    own, and a change replaces it where it stands, never adds a second one."""
    late = EVENT.replace("LOCATION:Room 4\r\n", "X-ROOM:Room 4\r\n")
    path, _ = seed(dav, dav.calendar, late, ".ics")
    text, _ = held(dav, path)
    assert (text.index("X-ROOM:") > text.index("END:VALARM")) is (dav.name == "radicale")
    fields = [*ICALENDAR.fields, "X-ROOM"]
    with dav_gateway(data_dir, dav_resource(dav, "late", "icalendar", path, fields)) as gw:
        job = prepare(gw, ChangeRequest("late", set={"X-ROOM": "Room 5"}))
        assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
        assert event_properties(held(dav, path)[0])["X-ROOM"] == (Instance("Room 5"),)
        assert run(gw, job.id, Operation.UNDO).state is JobState.UNDONE
    assert event_properties(held(dav, path)[0])["X-ROOM"] == (Instance("Room 4"),)
