"""A property's values as a change names them, checked; and as every surface shows them.

An agent gives each property a string, ``{"value": ..., "params": {"TYPE": "work"}}``,
or a list of those for a property that occurs several times. A TEXT value is the text
itself (the writer escapes it); any other value is given as the format writes it (a
structured ``N`` with its ``;``, a date as ``20261204T150000Z``). Dates are checked
before anything is planned: a DATE-TIME with a ``TZID`` the document defines (or, for a
new event, a zone of the time-zone database), or in UTC, or floating; a DATE needs
``VALUE=DATE``.

A reviewer sees each instance as one line: its value (a time with its zone) and its
parameters.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Collection, Sequence

from ...errors import InvalidRequest
from ...jsonvalue import JsonValue
from .content import Instance, is_verbatim
from .formats import Format

# Instances of one property a change may give.
MAX_INSTANCES = 32
_PARAM_NAME = re.compile(r"[A-Za-z0-9-]{1,64}")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_DATE_TIME = re.compile(r"(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(Z?)")
_DATE = re.compile(r"(\d{4})(\d{2})(\d{2})")


def _refuse(where: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"{where}: {message}", member=where)


def _params(given: JsonValue, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if given is None:
        return ()
    if not isinstance(given, dict):
        raise _refuse(where, "params is an object of parameter name -> value (or list)")
    items: list[tuple[str, tuple[str, ...]]] = []
    for name, value in given.items():
        if not _PARAM_NAME.fullmatch(name):
            raise _refuse(where, f"{name[:40]!r} is not a parameter name")
        listed = value if isinstance(value, list) else [value]
        if not listed or not all(isinstance(v, str) for v in listed):
            raise _refuse(where, f"parameter {name} takes a string or a list of strings")
        texts = [v for v in listed if isinstance(v, str)]
        if any('"' in v or _CONTROL.search(v) or "\n" in v for v in texts):
            raise _refuse(
                where, f"a value of parameter {name} holds a quote or a control character"
            )
        items.append((name.upper(), tuple(texts)))
    return tuple(items)


def _instance(fmt: Format, name: str, given: JsonValue, where: str) -> Instance:
    params: tuple[tuple[str, tuple[str, ...]], ...] = ()
    if isinstance(given, str):
        value = given
    elif isinstance(given, dict):
        unknown = sorted(set(given) - {"value", "params"})
        if unknown:
            raise _refuse(where, f"an instance takes value and params, not {unknown[0][:40]}")
        value_given = given.get("value")
        if not isinstance(value_given, str):
            raise _refuse(where, "an instance's value is a string")
        value, params = value_given, _params(given.get("params"), where)
    else:
        raise _refuse(where, 'give a string, {"value": ..., "params": {...}}, or a list of them')
    verbatim = is_verbatim(fmt, name, params)
    if _CONTROL.search(value) or ("\r" in value) or (verbatim and "\n" in value):
        raise _refuse(
            where,
            "the value holds a control character"
            + ("" if verbatim else " (a TEXT value may hold line breaks, nothing else)"),
        )
    return Instance(value, params)


def wanted(fmt: Format, name: str, given: JsonValue, where: str) -> tuple[Instance, ...]:
    """The instances a change gives ``name``.

    Raises:
        InvalidRequest: not a string, an instance or a list of them; a control
            character; a malformed parameter; an empty list (use ``remove``).
    """
    listed = given if isinstance(given, list) else [given]
    if not listed:
        raise _refuse(where, "an empty list removes nothing here: use remove to remove it")
    if len(listed) > MAX_INSTANCES:
        raise _refuse(where, f"at most {MAX_INSTANCES} instances")
    return tuple(_instance(fmt, name, item, f"{where}[{i}]") for i, item in enumerate(listed))


def check_dates(
    fmt: Format,
    name: str,
    instances: Sequence[Instance],
    zones: Collection[str] | None,
    where: str,
) -> None:
    """A date property's instances are dates a calendar reads as meant. ``zones``: the
    TZIDs the document defines (``None``: a new event, any zone of the database).

    Raises:
        InvalidRequest: not a DATE or DATE-TIME; a TZID with a UTC time, or one the
            document does not define; a DATE without VALUE=DATE.
    """
    if name not in fmt.dates:
        return
    for instance in instances:
        value, tzid = instance.value, instance.param("TZID")
        kind = tuple(v.upper() for v in instance.param("VALUE"))
        timed = _DATE_TIME.fullmatch(value)
        if timed is None and not (_DATE.fullmatch(value) and kind == ("DATE",)):
            raise _refuse(
                where,
                f"{name} is a date-time like 20261204T150000Z (UTC), 20261204T150000 with "
                'params {"TZID": "Europe/Paris"}, or a date 20261204 with params '
                '{"VALUE": "DATE"}',
            )
        if tzid and (timed is None or timed.group(7) or len(tzid) != 1):
            raise _refuse(where, f"{name}: a TZID goes with one local date-time, without Z")
        if tzid and zones is not None and tzid[0] not in zones:
            known = ", ".join(sorted(zones)) or "none"
            raise _refuse(
                where,
                f"{name}: TZID {tzid[0][:60]!r} is not a time zone this calendar object "
                f"defines ({known}); give one of those, or the time in UTC (…Z)",
            )
        if tzid and zones is None:
            try:
                zoneinfo.ZoneInfo(tzid[0])
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise _refuse(
                    where, f"{name}: TZID {tzid[0][:60]!r} is not a time zone of the database"
                ) from None


def _shown_time(instance: Instance) -> str | None:
    """A DATE or DATE-TIME as a person reads it, with its zone (None: not one)."""
    value = instance.value
    timed = _DATE_TIME.fullmatch(value)
    if timed is not None:
        year, month, day, hour, minute, second, utc = timed.groups()
        clock = f"{hour}:{minute}" + (f":{second}" if second != "00" else "")
        tzid = instance.param("TZID")
        zone = "UTC" if utc else tzid[0] if tzid else "(floating: no time zone)"
        return f"{year}-{month}-{day} {clock} {zone}"
    dated = _DATE.fullmatch(value)
    if dated is not None:
        return "-".join(dated.groups()) + " (all day)"
    return None


def shown_instance(fmt: Format, name: str, instance: Instance) -> str:
    """One instance as one line: its value (a time with its zone), then its
    parameters (those a time already says aside)."""
    time = _shown_time(instance) if name in fmt.dates else None
    params = instance.params
    if time is not None:
        params = tuple((n, vs) for n, vs in params if n not in ("TZID", "VALUE"))
    text = time if time is not None else instance.value
    if params:
        text += " (" + "; ".join(f"{n}={','.join(vs)}" for n, vs in params) + ")"
    return text


def shown(fmt: Format, name: str, instances: Sequence[Instance]) -> JsonValue:
    """A property as the property table shows it: one line, or a list of lines."""
    lines = [shown_instance(fmt, name, i) for i in instances]
    return lines[0] if len(lines) == 1 else list(lines)


__all__ = ["MAX_INSTANCES", "check_dates", "shown", "shown_instance", "wanted"]
