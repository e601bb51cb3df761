"""The registry of kinds: the one place core code meets them.

Built-in kinds register themselves when ``undogate.adapters`` is imported (``register``).
Kinds from outside are Python distributions that declare an entry point in the group
``undogate.kinds`` (kind name → its ``Adapter`` subclass); they are found with
``importlib.metadata`` the first time the registry is asked, and loaded one by one: a
kind that fails to import, or is not a proper kind, is recorded with its distribution
and the reason, and every other kind is served as if it were not there.

Every question core code asks about kinds goes through here: ``adapter_for(kind)``,
``kind_names()``, ``installed_kinds()`` (``undogate kinds``), ``kind_problem(name)``
(the config's refusal of a kind it cannot use), ``change_member(name)`` (the API's
check of one member of a change) and ``digest_defaults()``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TypeVar

from .. import __version__
from ..errors import InvalidRequest
from ..jsonvalue import JsonValue
from .base import Adapter
from .shapes import ChangeMember

ENTRY_POINT_GROUP = "undogate.kinds"
BUILTIN_DISTRIBUTION = "undogate"


@dataclass(frozen=True)
class InstalledKind:
    """One kind as ``undogate kinds`` lists it. ``adapter`` is None when its
    distribution could not provide it; ``problem`` then says why."""

    name: str
    distribution: str
    version: str
    builtin: bool
    adapter: Adapter | None
    problem: str | None = None


_builtin: dict[str, InstalledKind] = {}
_outside: dict[str, InstalledKind] | None = None
# Entry points naming a kind another distribution (or undogate) already provides.
_duplicates: list[InstalledKind] = []
_lock = threading.Lock()
_A = TypeVar("_A", bound=type[Adapter])


def register(cls: _A) -> _A:
    """Class decorator of a built-in kind: one stateless instance serves it from now on."""
    key = str(cls.kind)
    if key in _builtin:
        raise RuntimeError(f"two adapters for the kind {key}")
    _builtin[key] = InstalledKind(key, BUILTIN_DISTRIBUTION, __version__, True, cls())
    return cls


def _kinds() -> dict[str, InstalledKind]:
    """Every installed kind by name: the built-in ones, then the outside ones (loaded
    once, on first use)."""
    global _outside
    with _lock:
        if _outside is None:
            _outside = _load_outside()
        return {**_builtin, **_outside}


def _load_outside() -> dict[str, InstalledKind]:
    found: dict[str, InstalledKind] = {}
    members = {m.name: m for kind in _builtin.values() if kind.adapter for m in _members(kind)}
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=_order):
        dist = point.dist
        name, version = (dist.name, dist.version) if dist is not None else ("(unknown)", "")
        taken = _builtin.get(point.name) or found.get(point.name)
        if taken is not None:
            why = f"the kind {point.name} is already provided by {taken.distribution}"
            _duplicates.append(InstalledKind(point.name, name, version, False, None, why))
            continue
        adapter, problem = _load(point, members)
        found[point.name] = InstalledKind(point.name, name, version, False, adapter, problem)
        if adapter is not None:
            members.update({m.name: m for m in adapter.change_members})
    return found


def _order(point: EntryPoint) -> tuple[str, str]:
    return (point.name, point.value)


def _load(point: EntryPoint, members: dict[str, ChangeMember]) -> tuple[Adapter | None, str | None]:
    """The kind an entry point names, or why it cannot be served. Whatever its import
    raises is caught here: one broken distribution never takes the other kinds down."""
    try:
        cls = point.load()
    except Exception as exc:  # whatever foreign code raises is reported, never raised
        return None, f"importing {point.value} failed: {type(exc).__name__}: {exc}"
    if not (isinstance(cls, type) and issubclass(cls, Adapter)):
        return None, f"{point.value} is not an undogate.adapters.Adapter subclass"
    if getattr(cls, "kind", None) != point.name:
        return (
            None,
            f"{point.value} serves the kind {getattr(cls, 'kind', None)!r}, not {point.name!r}",
        )
    try:
        adapter = cls()
    except Exception as exc:  # as above
        return None, f"{point.value} could not be created: {type(exc).__name__}: {exc}"
    for member in adapter.change_members:
        if member.in_every_digest:
            return None, f"its change member {member.name} claims a place in every digest"
        known = members.get(member.name)
        if known is not None and known != member:
            return None, (
                f"its change member {member.name} differs from the one another kind "
                "declares (a member means one thing across kinds)"
            )
    return adapter, None


def _members(kind: InstalledKind) -> tuple[ChangeMember, ...]:
    return kind.adapter.change_members if kind.adapter is not None else ()


def installed_kinds() -> tuple[InstalledKind, ...]:
    """Every installed kind, the ones that could not be loaded included, by name."""
    found = [*_kinds().values(), *_duplicates]
    return tuple(sorted(found, key=lambda k: (k.name, not k.builtin, k.distribution)))


def adapters() -> tuple[Adapter, ...]:
    """Every kind this gateway serves, by name."""
    served = sorted(_kinds().values(), key=lambda k: k.name)
    return tuple(k.adapter for k in served if k.adapter is not None)


def kind_names() -> tuple[str, ...]:
    """The names of every kind this gateway serves, sorted."""
    return tuple(a.kind for a in adapters())


def adapter_for(kind: str) -> Adapter:
    """The adapter of ``kind``.

    Raises:
        InvalidRequest: no adapter serves that kind.
    """
    found = _kinds().get(kind)
    if found is None or found.adapter is None:
        raise InvalidRequest(f"resources of kind {kind} are not supported")
    return found.adapter


def kind_problem(kind: str) -> str | None:
    """Why a config cannot name ``kind`` (``None``: it can): not installed, with the
    installed kinds listed, or installed by a distribution that failed to load it."""
    found = _kinds().get(kind)
    if found is None:
        return f"unknown kind {kind!r}; the installed kinds are {_listed(kind_names())}"
    if found.adapter is None:
        return (
            f"the kind {kind!r} comes from {found.distribution} {found.version}, which could "
            f"not be loaded: {found.problem}"
        )
    return None


def _listed(names: tuple[str, ...]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if not names:
        return "none"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def change_members() -> dict[str, ChangeMember]:
    """Every member a change may carry, across the kinds served, by name."""
    return {m.name: m for adapter in adapters() for m in adapter.change_members}


def change_member(name: str) -> ChangeMember | None:
    return change_members().get(name)


def member_takers() -> dict[str, tuple[ChangeMember, tuple[str, ...]]]:
    """Every member a change may carry, with the kinds that take it (what the request
    schemas and the docs show)."""
    found: dict[str, tuple[ChangeMember, tuple[str, ...]]] = {}
    for adapter in adapters():
        for member in adapter.change_members:
            known, kinds = found.get(member.name, (member, ()))
            found[member.name] = (known, (*kinds, adapter.kind))
    return found


def digest_defaults() -> dict[str, JsonValue]:
    """The members every prepare's idempotency digest holds even where absent (with
    what absent means): the first release's, so that its digests stay what they were."""
    return {
        m.name: m.default for kind in _builtin.values() for m in _members(kind) if m.in_every_digest
    }


__all__ = [
    "BUILTIN_DISTRIBUTION",
    "ENTRY_POINT_GROUP",
    "InstalledKind",
    "adapter_for",
    "adapters",
    "change_member",
    "change_members",
    "digest_defaults",
    "installed_kinds",
    "kind_names",
    "kind_problem",
    "member_takers",
    "register",
]
