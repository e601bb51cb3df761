"""The endpoint check of an address book's or a calendar's test copy
(docs/remote-contract.md, docs/collections.md): the sequence every collection kind runs
(``checks.collection``), with what is an address book's or a calendar's own:

- the copy is listed with one ``PROPFIND``, each member with its ETag;
- the probe is a minimal object with the format's required properties and an
  ``X-UNDOGATE-CHECK`` marker, created with ``PUT`` + ``If-None-Match: *``;
- a stale ``PUT`` or ``DELETE`` is refused with 412, and a 412 that names a content
  precondition (``valid-calendar-data``) does not count: the server refused the content,
  not the tag;
- a deleted name is re-created from the probe's document as it was.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, replace

from ...jobs import ABSENT, Change
from ...jsonvalue import JsonObject
from ...net import RemoteResponse
from ...resources import Resource
from ..base import Side, Snapshot
from ..checks.collection import OK, CollectionProbe, digest_of
from ..checks.steps import MARKER_PREFIX, Evidence, Step, StepFailed
from .changes import properties_side, snapshot_properties, text_of
from .formats import CHECK_PROPERTY, Format
from .listing import list_members, member_url
from .preconditions import content_refusal

MEMBER_STEP_TITLES: dict[str, str] = {
    "production_read": "list the production collection (never written)",
    "collection_snapshot": "every member of the test copy listed with its ETag (one PROPFIND)",
    "probe_created": "a probe is created the way the gateway creates (PUT with If-None-Match: *)",
    "probe_read_back": "the probe reads back with a strong ETag and its properties",
    "stale_write_refused": "after a good write to the probe, a PUT with the tag from before "
    "it is refused with 412 (not a refusal of its content) and no effect",
    "stale_delete_refused": "DELETE with that stale tag is refused with 412 and no effect",
    "good_delete": "DELETE with the current tag removes the probe (the undo of a create)",
    "collateral_guard": "every member of the test copy is as at the start",
    "recreate_deleted_id": "the deleted name is re-created from its pre-image with "
    "If-None-Match: * (the undo of a delete)",
    "restore_test_copy": "remove the probe after a failure",
    "production_unchanged": "the production collection is unchanged",
}
MEMBER_REQUIRED = tuple(
    name for name in MEMBER_STEP_TITLES if name not in ("recreate_deleted_id", "restore_test_copy")
)


def _why(answer: RemoteResponse) -> str:
    named = content_refusal(answer)
    suffix = f", naming {named}: the server refused the content" if named else ""
    return f"answered HTTP {answer.status}{suffix}"


@dataclass
class MemberProbe(CollectionProbe):
    """An address book's or a calendar's steps: members are told apart by ETag, and a
    stale tag is refused with 412 that names no content precondition."""

    fmt: Format

    titles = MEMBER_STEP_TITLES
    required = MEMBER_REQUIRED
    member = "member"
    listed = "listed"
    named = "name"
    read_back_summary = "one strong ETag, properties in place"

    def list_collection(self, res: Resource, deadline: float) -> dict[str, str]:
        return {m.name: m.etag for m in list_members(self.remote, res, self.fmt, deadline)}

    def marked_field(self) -> str:
        return CHECK_PROPERTY

    def why(self, answer: RemoteResponse) -> str:
        return _why(answer)

    def create(self) -> Step:
        name = "probe_created"
        marker = MARKER_PREFIX + secrets.token_hex(8)
        required = {"FN": "undogate check probe", "DTSTART": time.strftime("%Y%m%dT000000Z")}
        values: JsonObject = {n: required[n] for n in self.fmt.required}
        values[CHECK_PROPERTY] = marker
        self.made, before = self.planned_create(values, name)
        self.gone = False  # from here on the probe may exist
        answer = self.send(self.change, before, Side.AFTER, name)
        evidence: Evidence = {"status": answer.status}
        if answer.status not in OK:
            self.gone = 400 <= answer.status < 500
            raise StepFailed(Step(name, False, _why(answer), evidence))
        return Step(name, True, f"PUT answered {answer.status}", evidence)

    def stale_write(self, first: Snapshot) -> tuple[Step, Snapshot]:
        """A good write to the probe first; then one with the tag from before it."""
        name = "stale_write_refused"
        good = self.send(self.edit(first, name), first, Side.AFTER, name)
        now = self.read(self.change, name)
        if good.status not in OK or not now.exists or now.etag.strong_equals(first.etag):
            why = f"the good write to the probe {_why(good)} without a new tag"
            raise StepFailed(Step(name, False, why, {"status": good.status}))
        stale = replace(now, etag=first.etag)
        answer = self.send(self.edit(now, name), stale, Side.AFTER, name)
        after = self.read(self.change, name)
        unchanged = after.exists and after.etag.strong_equals(now.etag)
        named = content_refusal(answer)
        evidence: Evidence = {"status": answer.status, "unchanged": unchanged}
        if answer.status == 412 and unchanged and named is None:
            return Step(name, True, "HTTP 412, nothing changed", evidence), after
        if named is not None:
            evidence["content_refused"] = named
        why = _why(answer) + ("" if unchanged else ": the probe changed")
        raise StepFailed(Step(name, False, why, evidence))

    def stale_delete(self, now: Snapshot, stale_tag: str) -> tuple[Step, Snapshot]:
        name = "stale_delete_refused"
        answer = self.send(replace(self.change, applied_etag=stale_tag), now, Side.BEFORE, name)
        after = self.read(self.change, name)
        unchanged = after.exists and after.etag.strong_equals(now.etag)
        evidence: Evidence = {"status": answer.status, "unchanged": unchanged}
        if answer.status == 412 and unchanged:
            return Step(name, True, "HTTP 412, nothing changed", evidence), after
        self.gone = not after.exists
        why = f"answered HTTP {answer.status}" + (
            "" if unchanged else ": the probe changed or vanished"
        )
        raise StepFailed(Step(name, False, why, evidence))

    def collateral(self) -> Step:
        name = "collateral_guard"
        now = self.listing(self.copy, name)
        evidence: Evidence = {"members": len(now), "digest": digest_of(now)}
        if now != self.start:
            changed = len(set(now.items()) ^ set(self.start.items()))
            evidence["differing"] = changed
            return Step(name, False, "the test copy is not as at the start", evidence)
        return Step(name, True, f"all {len(now)} member(s) as at the start", evidence)

    def recreation(self, deleted: Snapshot) -> tuple[Change, Snapshot]:
        props = snapshot_properties(deleted, self.fmt)
        change = replace(
            self.change,
            before=properties_side(props, document=text_of(deleted)),
            after=ABSENT,
            fields=tuple(props),
        )
        return change, deleted

    def by_hand(self) -> str:
        probe = self.made.target if self.made is not None else None
        where = member_url(self.copy, probe) if probe else self.copy.url
        if probe:
            return f"delete the probe {where}"
        return f"look for a member with an {CHECK_PROPERTY} property in {where} and delete it"


__all__ = ["MEMBER_REQUIRED", "MEMBER_STEP_TITLES", "MemberProbe"]
