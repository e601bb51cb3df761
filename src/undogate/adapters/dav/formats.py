"""The two formats the kinds of contacts and calendars speak: what each one's resource
holds, which of its properties a change may never touch, and how its values are read.

A ``Format`` is data, not behaviour: ``content`` reads and writes any document by it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Properties no change may touch, in either format: changing them reschedules an event,
# re-identifies an object or sends invitations (a server may mail every attendee).
FORBIDDEN = frozenset(
    {"UID", "RRULE", "RDATE", "EXDATE", "RECURRENCE-ID", "ATTENDEE", "ORGANIZER", "METHOD"}
)
# Lines that are not properties of the object at all: its frame, and the version that
# says how every other line is read.
STRUCTURAL = frozenset({"BEGIN", "END", "VERSION"})
# The property only the endpoint check writes, on a test copy.
CHECK_PROPERTY = "X-UNDOGATE-CHECK"
PRODUCT_ID = "-//undogate//undogate//EN"


@dataclass(frozen=True)
class Format:
    """One format: its name, media type and file suffix, the component a resource is
    (``VCARD``, ``VEVENT``) inside its root (``VCARD``, ``VCALENDAR``), and how values
    are read.

    ``verbatim`` properties have values that are not TEXT (dates, structured values,
    lists, URIs, numbers): they are compared and written exactly as given, where a TEXT
    value is unescaped to read and escaped to write (RFC 6350 §3.4, RFC 5545 §3.3.11).
    ``dates`` are DATE or DATE-TIME values, shown with their zone and checked before
    they are written (``values``). ``required`` is what a new object must have.
    ``groups``: whether a property may carry a group (``item1.EMAIL``: vCard's, not
    iCalendar's).
    """

    name: str
    media_type: str
    suffix: str
    root: str
    component: str
    verbatim: frozenset[str]
    dates: frozenset[str]
    required: tuple[str, ...]
    groups: bool


VCARD_FORMAT = Format(
    name="vCard",
    media_type="text/vcard",
    suffix=".vcf",
    root="VCARD",
    component="VCARD",
    verbatim=frozenset(
        {
            "N",
            "ADR",
            "ORG",
            "GENDER",
            "CLIENTPIDMAP",
            "BDAY",
            "ANNIVERSARY",
            "REV",
            "URL",
            "PHOTO",
            "LOGO",
            "SOUND",
            "KEY",
            "SOURCE",
            "IMPP",
            "GEO",
            "CATEGORIES",
            "NICKNAME",
            "MEMBER",
            "RELATED",
            "FBURL",
            "CALURI",
            "CALADRURI",
        }
    ),
    dates=frozenset(),
    required=("FN",),
    groups=True,
)

ICALENDAR_FORMAT = Format(
    name="iCalendar",
    media_type="text/calendar",
    suffix=".ics",
    root="VCALENDAR",
    component="VEVENT",
    verbatim=frozenset(
        {
            "DTSTART",
            "DTEND",
            "DUE",
            "DTSTAMP",
            "CREATED",
            "LAST-MODIFIED",
            "COMPLETED",
            "DURATION",
            "GEO",
            "URL",
            "ATTACH",
            "CATEGORIES",
            "RESOURCES",
            "PRIORITY",
            "SEQUENCE",
            "PERCENT-COMPLETE",
            "TRIGGER",
            "FREEBUSY",
            "TZOFFSETFROM",
            "TZOFFSETTO",
        }
    ),
    dates=frozenset({"DTSTART", "DTEND", "DUE", "DTSTAMP", "CREATED", "LAST-MODIFIED"}),
    required=("DTSTART",),
    groups=False,
)

__all__ = [
    "CHECK_PROPERTY",
    "FORBIDDEN",
    "ICALENDAR_FORMAT",
    "PRODUCT_ID",
    "STRUCTURAL",
    "VCARD_FORMAT",
    "Format",
]
