"""The endpoint check of an address book's or a calendar's test copy
(docs/remote-contract.md, docs/collections.md): whether undoing a create works there,
and whether a deleted member can be put back.

Every request is one the gateway itself would send (the kind's adapter builds it):

1. the production collection is listed (``PROPFIND``, never written);
2. every member of the test copy is listed with its ETag: the start;
3. a probe is created as the gateway creates (``PUT`` + ``If-None-Match: *``), a minimal
   object carrying an ``X-UNDOGATE-CHECK`` marker;
4. it reads back with a strong ETag and the properties written;
5. a good write to the probe succeeds first (so its content is one the server takes);
   then a ``PUT`` with the tag from before it is refused with 412 and no effect, and a
   412 that names a content precondition (``valid-calendar-data``) does not count;
6. a ``DELETE`` with that stale tag is refused with 412 and no effect;
7. a ``DELETE`` with the current tag removes the probe: the undo of a create;
8. every member of the copy is as at the start: the collateral guard;
9. (not required) the deleted name is re-created from its pre-image with
   ``If-None-Match: *`` and reads back whole, the undo of a delete; the check deletes it
   again and the collateral guard runs once more.

A passing check verifies ``UNDO_OF_CREATE``; step 9 adds ``RECREATE``. If the probe may
be left behind, the check deletes it (only its own probe) or says what to delete by
hand. Evidence: statuses, counts and digests, never values.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, replace

from ...digests import sha256_label
from ...errors import UndogateError
from ...jobs import ABSENT, Change, ChangeRequest
from ...jsonvalue import dumps
from ...net import RemoteResponse, TransportFailure
from ...resources import Resource
from ..base import RECREATE, UNDO_OF_CREATE, Adapter, Prober, Side, Snapshot
from ..checks.steps import MARKER_PREFIX, CheckRun, Evidence, Step, StepFailed, error_step
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
_OK = (200, 201, 204)


def _digest_of(listing: dict[str, str]) -> str:
    return sha256_label(dumps({k: listing[k] for k in sorted(listing)}))


def _why(answer: RemoteResponse) -> str:
    named = content_refusal(answer)
    suffix = f", naming {named}: the server refused the content" if named else ""
    return f"answered HTTP {answer.status}{suffix}"


@dataclass
class MemberProbe:
    adapter: Adapter
    fmt: Format
    remote: Prober
    copy: Resource
    timeout_s: float
    start: dict[str, str] = field(default_factory=dict)
    probe: str | None = None  # the probe's name, once planned
    gone: bool = True  # the probe is not in the copy (never made, or deleted again)
    made: Change | None = None  # the probe's create, once planned

    @property
    def change(self) -> Change:
        assert self.made is not None, "create() plans the probe first"
        return self.made

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout_s

    def listing(self, res: Resource, name: str) -> dict[str, str]:
        try:
            members = list_members(self.remote, res, self.fmt, self._deadline())
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None
        return {m.name: m.etag for m in members}

    def _send(self, change: Change, snap: Snapshot, target: Side, name: str) -> RemoteResponse:
        write = self.adapter.build_write(self.copy, change, snap, target)
        try:
            return self.remote.send_write(self.copy, write, self._deadline())
        except (UndogateError, TransportFailure) as exc:
            raise StepFailed(error_step(name, exc)) from None

    def _read(self, change: Change, name: str) -> Snapshot:
        try:
            return self.adapter.read_change(self.remote, self.copy, change, self._deadline())
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None

    def _edit(self, snap: Snapshot, name: str) -> Change:
        """A change of the probe's marker only the check would make."""
        request = ChangeRequest(
            self.copy.id, set={CHECK_PROPERTY: MARKER_PREFIX + secrets.token_hex(8)}
        )
        try:
            return self.adapter.plan(self.copy, request, snap, self.remote.limits).change(
                0, self.copy, snap
            )
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None

    # -- the probes, in order --------------------------------------------------------

    def snapshot(self) -> Step:
        self.start = self.listing(self.copy, "collection_snapshot")
        evidence: Evidence = {"members": len(self.start), "digest": _digest_of(self.start)}
        return Step("collection_snapshot", True, f"{len(self.start)} member(s) listed", evidence)

    def create(self) -> Step:
        name = "probe_created"
        marker = MARKER_PREFIX + secrets.token_hex(8)
        required = {"FN": "undogate check probe", "DTSTART": time.strftime("%Y%m%dT000000Z")}
        values = {n: required[n] for n in self.fmt.required} | {CHECK_PROPERTY: marker}
        request = ChangeRequest(self.copy.id, create=values)
        try:
            plan, before = self.adapter.prepare(
                self.remote, self.copy, request, self.remote.limits, self._deadline()
            )
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None
        self.made = plan.change(0, self.copy, before)
        self.probe = self.made.target
        self.gone = False  # from here on the probe may exist
        answer = self._send(self.change, before, Side.AFTER, name)
        evidence: Evidence = {"status": answer.status}
        if answer.status not in _OK:
            self.gone = 400 <= answer.status < 500
            raise StepFailed(Step(name, False, _why(answer), evidence))
        return Step(name, True, f"PUT answered {answer.status}", evidence)

    def read_back(self) -> tuple[Step, Snapshot]:
        name = "probe_read_back"
        snap = self._read(self.change, name)
        shows = snap.exists and self.adapter.shows(self.change, snap, Side.AFTER)
        evidence: Evidence = {"exists": snap.exists, "desired_values": shows}
        if not shows:
            raise StepFailed(Step(name, False, "the probe does not read back as written", evidence))
        evidence["digest"] = snap.digest
        return Step(name, True, "one strong ETag, properties in place", evidence), snap

    def stale_write(self, snap: Snapshot) -> tuple[Step, Snapshot]:
        """A good write to the probe first; then one with the tag from before it."""
        name = "stale_write_refused"
        good = self._send(self._edit(snap, name), snap, Side.AFTER, name)
        now = self._read(self.change, name)
        if good.status not in _OK or not now.exists or now.etag.strong_equals(snap.etag):
            why = f"the good write to the probe {_why(good)} without a new tag"
            raise StepFailed(Step(name, False, why, {"status": good.status}))
        stale = replace(now, etag=snap.etag)
        answer = self._send(self._edit(now, name), stale, Side.AFTER, name)
        after = self._read(self.change, name)
        unchanged = after.exists and after.etag.strong_equals(now.etag)
        named = content_refusal(answer)
        evidence: Evidence = {"status": answer.status, "unchanged": unchanged}
        if answer.status == 412 and unchanged and named is None:
            return Step(name, True, "HTTP 412, nothing changed", evidence), after
        if named is not None:
            evidence["content_refused"] = named
        why = _why(answer) + ("" if unchanged else ": the probe changed")
        raise StepFailed(Step(name, False, why, evidence))

    def stale_delete(self, snap: Snapshot, stale_tag: str) -> tuple[Step, Snapshot]:
        name = "stale_delete_refused"
        status = self._send(replace(self.change, applied_etag=stale_tag), snap, Side.BEFORE, name)
        after = self._read(self.change, name)
        unchanged = after.exists and after.etag.strong_equals(snap.etag)
        evidence: Evidence = {"status": status.status, "unchanged": unchanged}
        if status.status == 412 and unchanged:
            return Step(name, True, "HTTP 412, nothing changed", evidence), after
        self.gone = not after.exists
        why = f"answered HTTP {status.status}" + (
            "" if unchanged else ": the probe changed or vanished"
        )
        raise StepFailed(Step(name, False, why, evidence))

    def good_delete(self, snap: Snapshot) -> tuple[Step, str]:
        name = "good_delete"
        current = replace(self.change, applied_etag=snap.etag.header)
        status = self._send(current, snap, Side.BEFORE, name).status
        after = self._read(self.change, name)
        self.gone = not after.exists
        evidence: Evidence = {"status": status, "absent_after": self.gone}
        if status in _OK and self.gone:
            return Step(name, True, f"HTTP {status}, the probe is gone", evidence), text_of(snap)
        raise StepFailed(Step(name, False, f"answered HTTP {status}", evidence))

    def collateral(self) -> Step:
        name = "collateral_guard"
        now = self.listing(self.copy, name)
        evidence: Evidence = {"members": len(now), "digest": _digest_of(now)}
        if now != self.start:
            changed = len(set(now.items()) ^ set(self.start.items()))
            evidence["differing"] = changed
            return Step(name, False, "the test copy is not as at the start", evidence)
        return Step(name, True, f"all {len(now)} member(s) as at the start", evidence)

    def recreate(self, pre_image: str, snap: Snapshot) -> Step:
        """The undo of a delete, on the probe's name: PUT + If-None-Match: * of the whole
        pre-image. A refusal is an answer (RECREATE is not verified), not a failure."""
        name = "recreate_deleted_id"
        props = snapshot_properties(snap, self.fmt)
        deleted = replace(
            self.change,
            before=properties_side(props, document=pre_image),
            after=ABSENT,
            fields=tuple(props),
        )
        try:
            answer = self._send(deleted, snap, Side.BEFORE, name)
        except StepFailed as failed:
            return failed.step
        self.gone = 400 <= answer.status < 500
        if answer.status not in _OK:
            why = f"{_why(answer)}: a deleted name cannot be re-created here"
            return Step(name, False, why, {"status": answer.status})
        back = self._read(deleted, name)
        whole = back.exists and self.adapter.shows(deleted, back, Side.BEFORE)
        evidence: Evidence = {"status": answer.status, "restored": whole}
        self.remove_probe()
        if whole:
            return Step(name, True, "re-created whole from its pre-image", evidence)
        return Step(name, False, "re-created, but not as it was", evidence)

    def remove_probe(self) -> bool:
        """Delete the check's own probe (with its current tag); True when it is gone."""
        try:
            snap = self._read(self.change, "restore_test_copy")
            if snap.exists:
                made = replace(self.change, applied_etag=snap.etag.header)
                self._send(made, snap, Side.BEFORE, "restore_test_copy")
                snap = self._read(self.change, "restore_test_copy")
        except StepFailed:
            return False
        self.gone = not snap.exists
        return self.gone

    def restore(self) -> Step:
        name = "restore_test_copy"
        if self.made is not None and self.remove_probe():
            return Step(name, True, "the probe was removed", {"needed": True, "restored": True})
        where = member_url(self.copy, self.probe) if self.probe else self.copy.url
        what = (
            f"delete the probe {where}"
            if self.probe
            else f"look for a member with an {CHECK_PROPERTY} property in {where} and delete it"
        )
        return Step(name, False, "the probe may remain", {"needed": True, "restored": False}, what)


def run_member_check(probe: MemberProbe, production: Resource) -> CheckRun:
    """Every step, in order, the verdict, and the undos this run verified."""
    steps: list[Step] = []
    undos: list[str] = []
    prod_before: dict[str, str] | None = None
    try:
        prod_before = probe.listing(production, "production_read")
        prod: Evidence = {"members": len(prod_before), "digest": _digest_of(prod_before)}
        steps.append(Step("production_read", True, "listed", prod))
        steps.append(probe.snapshot())
        steps.append(probe.create())
        step, first = probe.read_back()
        steps.append(step)
        step, snap = probe.stale_write(first)
        steps.append(step)
        step, snap = probe.stale_delete(snap, first.etag.header)
        steps.append(step)
        step, pre_image = probe.good_delete(snap)
        steps.append(step)
        guard = probe.collateral()
        steps.append(guard)
        if guard.passed:
            undos.append(UNDO_OF_CREATE)
            recreated = probe.recreate(pre_image, snap)
            steps.append(recreated)
            again = probe.collateral()
            if recreated.passed and again.passed:
                undos.append(RECREATE)
            elif not again.passed:
                steps.append(again)
    except StepFailed as failed:
        steps.append(failed.step)
    if not probe.gone:
        steps.append(probe.restore())
    if prod_before is not None:
        try:
            prod_after = probe.listing(production, "production_unchanged")
        except StepFailed as failed:
            steps.append(failed.step)
        else:
            same = prod_after == prod_before
            why = "every member as before" if same else "the production collection changed"
            steps.append(Step("production_unchanged", same, why, {"unchanged": same}))
    names = {s.name for s in steps}
    # Re-creating a deleted name is an answer either way: it decides RECREATE only.
    passed = set(MEMBER_REQUIRED) <= names and all(
        s.passed for s in steps if s.name != "recreate_deleted_id"
    )
    verified = tuple(undos) if passed else ()
    return CheckRun(tuple(steps), passed, MEMBER_REQUIRED, MEMBER_STEP_TITLES, verified)


__all__ = ["MEMBER_REQUIRED", "MEMBER_STEP_TITLES", "MemberProbe", "run_member_check"]
