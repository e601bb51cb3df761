"""Rewind over contacts and events (docs/rewind.md) on real Radicale and Xandikos.

A contact's or an event's undo writes the whole object as the server holds it then
(only the touched properties' lines replaced), and a server may re-serialize what it
stores (Radicale does): the second undo's exact request on the same object is only
known once the first ran. So a plan undoes one step per object and blocks the older
ones, saying why; a new plan after it undoes the next, and the object ends as it began,
property by property.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from undogate.jobs import ChangeRequest, JobState, Operation
from undogate.operations.rewind import (
    RewindPlan,
    confirm_plan,
    create_plan,
    load_plan,
    preview_plan,
)
from undogate.operations.rewind_plan import Selection, StepVerdict

from .caldav_servers import DavCollections
from .dav_world import (
    CONTACT,
    EVENT,
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
from .worlds import OWNER, LocalGateway


@dataclass(frozen=True)
class Case:
    """One object of one kind on one server, and two changes of different properties."""

    server: str
    kind: str
    noun: str
    first: dict[str, Any]
    second: dict[str, Any]


CASES = [
    Case("radicale", "vcard", "contact", {"TITLE": "Analyst"}, {"NOTE": "Called back"}),
    Case(
        "xandikos",
        "icalendar",
        "event",
        {"SUMMARY": "Design review, moved"},
        {"LOCATION": "Room 9"},
    ),
    Case("radicale", "vcard_collection", "contact", {"TITLE": "Analyst"}, {"NOTE": "Called back"}),
]


@dataclass
class World:
    gw: LocalGateway
    dav: DavCollections
    path: str
    case: Case

    def change(self, values: dict[str, Any]) -> ChangeRequest:
        if self.case.kind.endswith("_collection"):
            return ChangeRequest("object", id=self.path.rsplit("/", 1)[1], set=values)
        return ChangeRequest("object", set=values)

    def properties(self) -> Any:
        text = held(self.dav, self.path)[0]
        return properties(text) if self.case.noun == "contact" else event_properties(text)


@pytest.fixture(params=CASES, ids=[f"{c.server}-{c.kind}" for c in CASES])
def world(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[World]:
    case: Case = request.param
    dav = server_of(request, case.server)
    contact = case.noun == "contact"
    collection = dav.new_addressbook() if contact else dav.new_calendar()
    path, _ = seed(dav, collection, CONTACT if contact else EVENT, ".vcf" if contact else ".ics")
    fields = ["FN", "EMAIL", "TITLE", "NOTE"] if contact else ["SUMMARY", "LOCATION"]
    if case.kind.endswith("_collection"):
        identity = [{"field": "EMAIL", "evidence": "email"}]
        entry = dav_resource(dav, "object", case.kind, collection, fields, identity=identity)
    else:
        entry = dav_resource(dav, "object", case.kind, path, fields)
    with dav_gateway(data_dir, entry) as gw:
        yield World(gw, dav, path, case)


def rewind(gw: LocalGateway, since: float, *, skip_blocked: bool = False) -> RewindPlan:
    """A plan of the agent's work since ``since``, previewed and confirmed."""
    made = create_plan(gw, OWNER, Selection("account-assistant", since))
    preview = preview_plan(gw, OWNER, load_plan(gw, OWNER.owner_id, made.id))
    fresh = load_plan(gw, OWNER.owner_id, made.id)
    return confirm_plan(gw, OWNER, fresh, preview.token, skip_blocked=skip_blocked)


def test_a_plan_undoes_one_step_per_object_and_says_why_the_older_waits(world: World) -> None:
    gw = world.gw
    start = world.properties()
    since = time.time()
    older = prepare(gw, world.change(world.case.first)).id
    assert run(gw, older, Operation.APPLY).state is JobState.APPLIED
    newer = prepare(gw, world.change(world.case.second)).id
    assert run(gw, newer, Operation.APPLY).state is JobState.APPLIED

    done = rewind(gw, since, skip_blocked=True)
    blocked = done.steps[1]
    assert [(s.job_id, s.verdict) for s in done.steps] == [
        (newer, StepVerdict.UNDO),
        (older, StepVerdict.BLOCKED),
    ]
    assert blocked.in_the_way is None
    assert blocked.message == (
        f"step 1 undoes a change of this {world.case.noun} first, and what the server "
        "keeps after that write cannot be foreseen, so this step's exact request cannot "
        "be previewed nor its guard checked. It is left as it is: once this plan ran, "
        "make a new plan to undo it"
    )
    assert [o for _s, o in done.outcomes()] == ["done", "skipped"]
    assert gw.get_job(OWNER.owner_id, older).state is JobState.APPLIED
    [(name, value)] = world.case.first.items()
    assert [i.value for i in world.properties()[name]] == [value]  # left as it was

    again = rewind(gw, since)
    assert [(s.verdict, o) for s, o in again.outcomes()] == [
        (StepVerdict.ALREADY_UNDONE, "not_run"),
        (StepVerdict.UNDO, "done"),
    ]
    assert gw.get_job(OWNER.owner_id, older).state is JobState.UNDONE
    assert world.properties() == start  # every property as before the first job
