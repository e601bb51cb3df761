"""Events: ``icalendar`` (one event, an ``.ics`` at one URL) and ``icalendar_collection``
(a calendar: events that appear and disappear). Importing it registers both."""

from ..dav.collection import PropertyCollectionAdapter
from ..dav.document import PropertyDocumentAdapter
from ..dav.formats import ICALENDAR_FORMAT
from ..dav.shapes import collection_shapes, document_shapes
from ..registry import register

_VALUES = (
    'each value is a string, {"value": ..., "params": {...}}, or a list of those; '
    "times as their text form: 20261204T150000Z (UTC), or 20261204T150000 with "
    'params {"TZID": "Europe/Paris"} (a zone the event\'s calendar object defines), '
    'or a date 20261204 with params {"VALUE": "DATE"}. UID, RRULE, RDATE, EXDATE, '
    "RECURRENCE-ID, ATTENDEE, ORGANIZER and METHOD never change"
)


@register
class ICalendarAdapter(PropertyDocumentAdapter):
    kind = "icalendar"
    noun = "event"
    accept = "text/calendar"
    format = ICALENDAR_FORMAT
    summary = (
        "one event (an iCalendar VEVENT at one URL); a change sets or removes its "
        "allow-listed properties (conditional PUT of the object as read, only those lines "
        "replaced)"
    )
    agent_guide = (
        "`set` (property -> value, only the resource's `fields`, e.g. DTSTART, DTEND, "
        f"LOCATION) and/or `remove` (property names: every instance goes); {_VALUES}."
    )
    change_shapes = document_shapes(
        "event",
        {
            "DTSTART": {"value": "20261205T150000", "params": {"TZID": "Europe/Paris"}},
            "DTEND": {"value": "20261205T160000", "params": {"TZID": "Europe/Paris"}},
        },
    )


@register
class ICalendarCollectionAdapter(PropertyCollectionAdapter):
    kind = "icalendar_collection"
    noun = "event"
    accept = "text/calendar"
    format = ICALENDAR_FORMAT
    summary = (
        "a calendar (CalDAV); a change updates an event's allow-listed properties, "
        "creates an event, deletes one, or upserts one by identity evidence (UID)"
    )
    agent_guide = (
        "exactly one of: `id` (the event's name in the calendar, e.g. `review.ics`) + "
        "`set`/`remove`, `create` (property -> value of a new event; DTSTART is required, "
        "the gateway mints its UID), `id` + `delete: true`, or `upsert` (property -> "
        "value, with the identity evidence, e.g. UID: updates the one event it matches, "
        "or creates one; several matches are refused as `ambiguous` and nothing is "
        f"prepared); {_VALUES}. A person is told before confirming whether a create or "
        "delete can be undone."
    )
    change_shapes = collection_shapes(
        "event",
        "review.ics",
        {"SUMMARY": "Design review", "DTSTART": "20261204T150000Z", "DTEND": "20261204T160000Z"},
        {"UID": "design-review-2026", "LOCATION": "Room 4"},
    )


__all__ = ["ICalendarAdapter", "ICalendarCollectionAdapter"]
