"""vCard and iCalendar documents as content lines (RFC 6350, RFC 5545): how the kinds of
contacts and calendars read, compare and change one.

A document is kept as the text the server sent: every content line with its own folds
and line ending. Each logical line is split by icalendar's content-line API
(``Contentline``) into its name, parameters and value; nothing here serializes a value
by hand. A change is surgical: only the touched property's lines of the one object a
resource is (its ``VCARD``, its ``VEVENT``) are replaced, each new line escaped and
folded by icalendar, and every other line (UID, PRODID, X- properties, a VTIMEZONE,
their order, their folding) is kept byte for byte.

Documents are compared by property, never by bytes: servers re-serialize what they
store (Radicale reorders properties, folds at 75 octets and writes CRLF; Xandikos
re-serializes events), and order, line endings and folding are never a change. A
property is the multiset of its instances, each its value and its parameters (their
names in capitals, each one's values as a set).

A vCard property may carry a group (RFC 6350 §3.3: ``item1.EMAIL`` with its label
``item1.X-ABLabel``, as Apple's address books write them). A grouped property is a
property like any other, named with its group: ``item1.EMAIL`` (the group in lowercase,
the property in capitals, however the document spells them) is another property than
``EMAIL`` or ``item2.EMAIL``, so a change to one never touches another group's lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date

from icalendar import Calendar, vText, vUnknown
from icalendar.parser import Contentline, Parameters, unescape_backslash

from ...jsonvalue import JsonObject, JsonValue
from .formats import PRODUCT_ID, STRUCTURAL, Format

_FOLD = re.compile(r"\r?\n[ \t]")
_PHYSICAL = re.compile(r"[^\n]*\n|[^\n]+")
# A content line's name: a property, or a group and a property (``item1.EMAIL``).
_NAME = re.compile(r"(?:([A-Za-z0-9-]+)\.)?([A-Za-z0-9-]+)")

ParamItems = tuple[tuple[str, tuple[str, ...]], ...]


class ContentError(ValueError):
    """The text is not a document undogate can change (its reason is the message)."""


class NoObject(ContentError):
    """The document is well formed but holds no object of the kind (a task in a
    calendar, where an event is looked for)."""


@dataclass(frozen=True)
class Instance:
    """One occurrence of a property: its value (TEXT unescaped; any other value as
    written) and its parameters, names in capitals, in the order they came."""

    value: str
    params: ParamItems = ()

    def key(self) -> tuple[str, ParamItems]:
        """What comparison sees: the order of parameters and of a parameter's values
        is never a change."""
        return self.value, tuple(sorted((n, tuple(sorted(vs))) for n, vs in self.params))

    def param(self, name: str) -> tuple[str, ...]:
        return next((vs for n, vs in self.params if n == name), ())

    def to_json(self) -> JsonObject:
        out: JsonObject = {"value": self.value}
        if self.params:
            out["params"] = {n: list(vs) for n, vs in self.params}
        return out


Properties = dict[str, tuple[Instance, ...]]


def property_name(given: str) -> str | None:
    """The name a property is known by: ``EMAIL``, or with its group ``item1.EMAIL``
    (the group in lowercase, the property in capitals), from any spelling of either;
    None: not a property name."""
    match = _NAME.fullmatch(given)
    if match is None:
        return None
    group, name = match.groups()
    return name.upper() if group is None else f"{group.lower()}.{name.upper()}"


def ungrouped(name: str) -> str:
    """The property a name is of, its group aside: ``EMAIL`` for ``item1.EMAIL``."""
    return name.rpartition(".")[2]


def instance_from_json(value: JsonValue) -> Instance:
    """An instance as a side records it (``Instance.to_json``)."""
    assert isinstance(value, dict), "a recorded instance is an object"
    text = value.get("value")
    params = value.get("params")
    items: list[tuple[str, tuple[str, ...]]] = []
    if isinstance(params, dict):
        for name, values in params.items():
            listed = values if isinstance(values, list) else [values]
            items.append((name, tuple(str(v) for v in listed)))
    return Instance(str(text), tuple(items))


def properties_to_json(props: Mapping[str, Sequence[Instance]]) -> JsonObject:
    return {name: [i.to_json() for i in instances] for name, instances in props.items()}


def properties_from_json(value: JsonValue) -> Properties:
    if not isinstance(value, dict):
        return {}
    return {
        name: tuple(instance_from_json(i) for i in instances)
        for name, instances in value.items()
        if isinstance(instances, list)
    }


def same(a: Sequence[Instance], b: Sequence[Instance]) -> bool:
    """Two properties are the same: the same instances, in any order."""
    return sorted(i.key() for i in a) == sorted(i.key() for i in b)


@dataclass(frozen=True)
class Line:
    """One logical content line. ``raw`` is exactly as in the document (its folds and
    its line ending); ``path`` the components around it (for ``BEGIN``/``END``, around
    the component it opens or closes); a blank line has the name ``""``."""

    raw: str
    name: str
    params: ParamItems
    value: str
    path: tuple[str, ...]

    def opens(self, component: str) -> bool:
        return self.name == "BEGIN" and self.value.upper() == component

    @property
    def group(self) -> str:
        """The group as the document spells it (``""``: none)."""
        if "." not in self.name:
            return ""
        return _FOLD.sub("", self.raw)[: self.name.index(".")]


def _logical(text: str) -> Iterator[str]:
    """The document's logical lines, each with its folds and line ending."""
    current = ""
    for match in _PHYSICAL.finditer(text):
        physical = match.group(0)
        if physical[:1] in (" ", "\t") and current:
            current += physical
            continue
        if current:
            yield current
        current = physical
    if current:
        yield current


def _params(head: str) -> ParamItems:
    """The parameters of a line's head (``EMAIL;TYPE=work;type=pref``). icalendar keeps
    only the last of a repeated parameter (vCard 3 writes ``type=WORK;type=pref``), so
    each is read on its own and repeated ones are merged: none is ever lost."""
    pieces: list[str] = []
    quoted, start = False, head.find(";") + 1
    if start == 0:
        return ()
    for i in range(start, len(head) + 1):
        if i < len(head) and head[i] == '"':
            quoted = not quoted
        elif i == len(head) or (head[i] == ";" and not quoted):
            pieces.append(head[start:i])
            start = i + 1
    merged: dict[str, list[str]] = {}
    for piece in pieces:
        parsed = Parameters.from_ical(piece)  # type: ignore[no-untyped-call]  # untyped upstream
        for name, values in parsed.items():
            listed = values if isinstance(values, list) else [values]
            merged.setdefault(str(name).upper(), []).extend(str(v) for v in listed)
    return tuple((n, tuple(vs)) for n, vs in merged.items())


def _line(raw: str, path: tuple[str, ...]) -> Line:
    unfolded = _FOLD.sub("", raw).rstrip("\r\n")
    if not unfolded.strip():
        return Line(raw, "", (), "", path)
    try:
        line = Contentline(unfolded)  # type: ignore[no-untyped-call]  # untyped upstream
        name, _, value = line.raw_parts()
        params = _params(unfolded[: len(unfolded) - len(value) - 1])
    except (ValueError, TypeError) as exc:
        raise ContentError(f"a line is not a content line ({str(exc)[:80]})") from exc
    known = property_name(name)
    if known is None or (known != ungrouped(known) and ungrouped(known) in STRUCTURAL):
        raise ContentError(f"{name[:40]!r} is not a property name")
    return Line(raw, known, params, value, path)


def content_lines(text: str) -> list[Line]:
    """Every logical line, with the components it is in.

    Raises:
        ContentError: a line that is not a content line; components that do not nest;
            a property outside every component.
    """
    lines: list[Line] = []
    stack: list[str] = []
    for raw in _logical(text):
        line = _line(raw, tuple(stack))
        if line.name == "BEGIN":
            stack.append(line.value.upper())
        elif line.name == "END":
            if not stack or stack[-1] != line.value.upper():
                raise ContentError(f"END:{line.value[:40]} closes nothing that is open")
            stack.pop()
            line = Line(line.raw, line.name, line.params, line.value, tuple(stack))
        elif line.name and not stack:
            raise ContentError(f"{line.name} stands outside every component")
        lines.append(line)
    if stack:
        raise ContentError(f"BEGIN:{stack[-1]} is never closed")
    return lines


def is_verbatim(fmt: Format, name: str, params: ParamItems) -> bool:
    """Whether a property's value is kept as written: not TEXT (a date, a structured
    value, a list, a URI, a number), by its name or its ``VALUE`` parameter."""
    typed = next((vs for n, vs in params if n == "VALUE"), ())
    return ungrouped(name) in fmt.verbatim or any(v.upper() != "TEXT" for v in typed)


def instance_of(fmt: Format, line: Line) -> Instance:
    verbatim = is_verbatim(fmt, line.name, line.params)
    return Instance(line.value if verbatim else unescape_backslash(line.value), line.params)


@dataclass(frozen=True)
class Document:
    """A document of one object: its lines, and where the object's own properties are
    (``where``: the components around them, ``("VCALENDAR", "VEVENT")``)."""

    text: str
    lines: tuple[Line, ...]
    where: tuple[str, ...]

    @property
    def newline(self) -> str:
        first = self.lines[0].raw if self.lines else ""
        return "\r\n" if first.endswith("\r\n") or "\r\n" in self.text else "\n"

    def own(self) -> Iterator[Line]:
        """The object's own property lines (not those of a component nested in it)."""
        for line in self.lines:
            if line.path == self.where and line.name not in ("", "BEGIN", "END"):
                yield line

    def properties(self, fmt: Format) -> Properties:
        found: dict[str, list[Instance]] = {}
        for line in self.own():
            found.setdefault(line.name, []).append(instance_of(fmt, line))
        return {name: tuple(instances) for name, instances in found.items()}

    def timezones(self) -> tuple[str, ...]:
        """The TZIDs the document's VTIMEZONE components define."""
        return tuple(
            line.value
            for line in self.lines
            if line.name == "TZID" and line.path[-1:] == ("VTIMEZONE",)
        )


def _format_lines(text: str, fmt: Format) -> list[Line]:
    """Every logical line, where only a format with groups (vCard) may have them.

    Raises: ContentError."""
    lines = content_lines(text)
    if not fmt.groups:
        grouped = next((line for line in lines if line.group), None)
        if grouped is not None:
            raise ContentError(f"{grouped.name[:40]!r} is not a property name")
    return lines


def parse_document(text: str, fmt: Format) -> Document:
    """The one object of ``fmt`` that ``text`` holds.

    Raises:
        NoObject: well formed, but no object of the kind.
        ContentError: not a document of ``fmt``, or one of several objects.
    """
    lines = _format_lines(text, fmt)
    roots = [line for line in lines if line.name == "BEGIN" and not line.path]
    if len(roots) != 1 or not roots[0].opens(fmt.root):
        names = ", ".join(r.value.upper()[:20] for r in roots[:3]) or "nothing"
        raise ContentError(f"a {fmt.name} document holds one {fmt.root}, not {names}")
    where = (fmt.root,) if fmt.component == fmt.root else (fmt.root, fmt.component)
    objects = [line for line in lines if line.opens(fmt.component) and line.path == where[:-1]]
    if not objects:
        raise NoObject(f"it holds no {fmt.component}")
    if len(objects) > 1:
        raise ContentError(
            f"it holds {len(objects)} {fmt.component}s (a recurring event with changed "
            f"instances, or several objects); undogate changes one {fmt.component} per resource"
        )
    return Document(text, tuple(lines), where)


def values_of(text: str, fmt: Format, name: str) -> list[Instance]:
    """Every instance of ``name``, in any group, on every object of ``fmt`` in a
    document, however many it holds (identity evidence is read so: a recurring event's
    instances share a UID; a contact's ``item1.EMAIL`` is an ``EMAIL``).

    Raises: ContentError."""
    found: list[Instance] = []
    for line in _format_lines(text, fmt):
        if ungrouped(line.name) == name and line.path[-1:] == (fmt.component,):
            found.append(instance_of(fmt, line))
    return found


def serialize(fmt: Format, name: str, instance: Instance, newline: str) -> str:
    """One content line, escaped (TEXT) and folded by icalendar, in ``newline``."""
    params = Parameters({n: list(vs) if len(vs) > 1 else vs[0] for n, vs in instance.params})
    value = (
        vUnknown(instance.value)
        if is_verbatim(fmt, name, instance.params)
        else vText(instance.value)
    )
    folded = str(Contentline.from_parts(name, params, value).to_ical().decode("utf-8"))
    return folded.replace("\r\n", newline) + newline


def rewrite(doc: Document, fmt: Format, goal: Mapping[str, Sequence[Instance]]) -> str:
    """The document with every instance of each property in ``goal`` on its object
    replaced by ``goal``'s (none: removed). The new lines take the place of the first old
    one; a property that was absent goes after the object's own properties (before a
    nested component, or its END). Every other line is kept exactly, and a replaced
    line's group is spelled as the document spells it (its label's line keeps it)."""
    out: list[str] = []
    spelled: dict[str, str] = {}
    for line in doc.own():
        if line.group:
            spelled.setdefault(line.name.partition(".")[0], line.group)
    # A property the object has keeps its place (a server may have put it after a
    # nested component); only an absent one needs a new place.
    present = {line.name for line in doc.own()}
    written: set[str] = set()
    pending = True
    newline = doc.newline
    for line in doc.lines:
        own = line.path == doc.where
        closes = (
            line.name == "END"
            and line.path == doc.where[:-1]
            and line.value.upper() == fmt.component
        )
        if pending and ((own and line.name == "BEGIN") or closes):
            for name, instances in goal.items():
                if name not in present:
                    written_as = _spelled(name, spelled)
                    out.extend(serialize(fmt, written_as, i, newline) for i in instances)
            pending = False
        if own and line.name in goal:
            if line.name not in written:
                written_as = _spelled(line.name, spelled)
                out.extend(serialize(fmt, written_as, i, newline) for i in goal[line.name])
                written.add(line.name)
            continue
        out.append(line.raw)
    return "".join(out)


def _spelled(name: str, groups: Mapping[str, str]) -> str:
    group, dot, rest = name.partition(".")
    return f"{groups.get(group, group)}.{rest}" if dot else name


def new_document(fmt: Format, uid: str, props: Mapping[str, Sequence[Instance]], stamp: str) -> str:
    """A new document of one object: its frame, a PRODID, ``uid``, for an event its
    DTSTAMP (``stamp``), then ``props``. A TZID an event names gets its VTIMEZONE from
    icalendar (built from the time-zone database), never by hand."""
    newline = "\r\n"
    own = [serialize(fmt, "UID", Instance(uid), newline)]
    if fmt.component != fmt.root:
        own.append(serialize(fmt, "DTSTAMP", Instance(stamp), newline))
    for name, instances in props.items():
        own.extend(serialize(fmt, name, i, newline) for i in instances)
    if fmt.component == fmt.root:
        head = ["BEGIN:VCARD", "VERSION:4.0", f"PRODID:{PRODUCT_ID}"]
        return newline.join(head) + newline + "".join(own) + "END:VCARD" + newline
    head = ["BEGIN:VCALENDAR", "VERSION:2.0", f"PRODID:{PRODUCT_ID}", "BEGIN:VEVENT"]
    text = newline.join(head) + newline + "".join(own) + "END:VEVENT\r\nEND:VCALENDAR\r\n"
    zoned = [i for instances in props.values() for i in instances if i.param("TZID")]
    if zoned:
        # Only the years the event's times fall in: the zone's rules over 1970-2038 (the
        # default) would make a VTIMEZONE of several kilobytes.
        years = [int(i.value[:4]) for i in zoned if i.value[:4].isdigit()] or [1970]
        calendar = Calendar.from_ical(text)
        calendar.add_missing_timezones(date(min(years) - 1, 1, 1), date(max(years) + 2, 1, 1))
        text = str(calendar.to_ical().decode("utf-8"))
    return text


LineKey = tuple[tuple[str, ...], str, tuple[str, ParamItems]]


def _within(doc: Document, fmt: Format) -> dict[str, list[LineKey]]:
    """The components inside the object (an event's VALARMs), by name: each one's lines
    as comparison sees them, in one order."""
    depth = len(doc.where)
    found: dict[str, list[LineKey]] = {}
    for line in doc.lines:
        if not line.name or line.path[:depth] != doc.where:
            continue
        if len(line.path) > depth:
            component = line.path[depth]
        elif line.name in ("BEGIN", "END"):
            component = line.value.upper()
        else:
            continue
        found.setdefault(component, []).append((line.path, line.name, instance_of(fmt, line).key()))
    return {name: sorted(keys) for name, keys in found.items()}


def object_differences(a: Document, b: Document, fmt: Format) -> tuple[str, ...]:
    """What makes two objects differ, by name: their own properties, then the components
    inside them (``VALARM``). None: the same object, whatever its order, line endings or
    folding, and whatever surrounds it (a calendar's VTIMEZONEs)."""
    props_a, props_b = a.properties(fmt), b.properties(fmt)
    names = sorted({*props_a, *props_b})
    differ = [n for n in names if not same(props_a.get(n, ()), props_b.get(n, ()))]
    within_a, within_b = _within(a, fmt), _within(b, fmt)
    components = sorted({*within_a, *within_b})
    differ += [c for c in components if within_a.get(c) != within_b.get(c)]
    return tuple(differ)


def every_property(
    doc: Document, fmt: Format
) -> list[tuple[tuple[str, ...], str, tuple[str, ParamItems]]]:
    """Every line of the document as comparison sees it, in one order: what the
    endpoint check compares to tell whether a test copy is back at its start."""
    found = [
        (line.path, line.name, instance_of(fmt, line).key()) for line in doc.lines if line.name
    ]
    return sorted(found)


__all__ = [
    "ContentError",
    "Document",
    "Instance",
    "Line",
    "NoObject",
    "Properties",
    "content_lines",
    "every_property",
    "instance_from_json",
    "instance_of",
    "is_verbatim",
    "new_document",
    "object_differences",
    "parse_document",
    "properties_from_json",
    "properties_to_json",
    "property_name",
    "rewrite",
    "same",
    "serialize",
    "ungrouped",
    "values_of",
]
