"""The endpoint check (docs/collections.md) of a kind whose resource is a collection of
members that appear and disappear: the JSON collection, an address book, a calendar.
One sequence, each step a request the gateway itself would send (the kind's adapter
builds it):

1. the production collection is listed (never written);
2. every member of the test copy is listed: the start;
3. a probe member is created the way the gateway creates;
4. it reads back with its version and the values written;
5. after a good write to the probe, a write carrying the version from before it (now
   stale) is refused with no effect;
6. so is a ``DELETE`` with that stale version;
7. a ``DELETE`` with the current version removes the probe: the undo of a create;
8. every member of the copy is as at the start: the collateral guard;
9. (not required) the deleted member is re-created from its pre-image with
   ``If-None-Match: *`` and reads back whole, the undo of a delete; the check deletes it
   again and the collateral guard runs once more.

A passing check verifies ``UNDO_OF_CREATE``; step 9 adds ``RECREATE``. If the probe may
be left behind, the check deletes it (only its own probe) or says what to delete by
hand. Evidence: statuses, counts and digests, never values.

``CollectionProbe`` holds the sequence and the steps every kind takes alike; a kind's
probe gives what differs: how it lists a collection, the probe it creates, how its
endpoint refuses a stale write, the pre-image it re-creates, and the words it counts
members in.
"""

from __future__ import annotations

import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import ClassVar

from ...digests import sha256_label
from ...errors import UndogateError
from ...jobs import ABSENT, Change, ChangeRequest
from ...jsonvalue import JsonObject, dumps
from ...net import RemoteResponse, TransportFailure
from ...resources import Resource
from ..base import RECREATE, UNDO_OF_CREATE, Adapter, Prober, Side, Snapshot
from .steps import MARKER_PREFIX, CheckRun, Evidence, Step, StepFailed, error_step

OK = (200, 201, 204)


def digest_of(listing: dict[str, str]) -> str:
    """One digest of a listing (member → its tag or digest), whatever its order."""
    return sha256_label(dumps({k: listing[k] for k in sorted(listing)}))


@dataclass
class CollectionProbe(ABC):
    adapter: Adapter
    remote: Prober
    copy: Resource
    timeout_s: float
    _: KW_ONLY
    start: dict[str, str] = field(default_factory=dict)
    made: Change | None = None  # the probe's create, once the kind knows its target
    gone: bool = True  # the probe is not in the copy (never made, or deleted again)

    titles: ClassVar[Mapping[str, str]]
    required: ClassVar[tuple[str, ...]]  # every step a passing check has, in order
    member: ClassVar[str]  # what the evidence counts: "member", "record"
    listed: ClassVar[str]  # how the start was taken: "listed", "read"
    named: ClassVar[str]  # what a deleted member is re-created by: "name", "id"
    read_back_summary: ClassVar[str]

    # -- what each kind gives --------------------------------------------------------

    @abstractmethod
    def list_collection(self, res: Resource, deadline: float) -> dict[str, str]:
        """Every member of ``res``, each with what shows it changed (a tag, a digest)."""

    @abstractmethod
    def marked_field(self) -> str:
        """The field or property a write of the check's own marks."""

    @abstractmethod
    def create(self) -> Step:
        """Step 3; sets ``made`` and ``gone``."""

    @abstractmethod
    def stale_write(self, first: Snapshot) -> tuple[Step, Snapshot]:
        """Step 5, from the probe as ``first`` read it; the probe as it is now."""

    @abstractmethod
    def stale_delete(self, now: Snapshot, stale_tag: str) -> tuple[Step, Snapshot]:
        """Step 6, where ``now`` is current; the probe as it is after it."""

    @abstractmethod
    def collateral(self) -> Step:
        """Step 8: the copy's listing against ``start``."""

    @abstractmethod
    def recreation(self, deleted: Snapshot) -> tuple[Change, Snapshot]:
        """Step 9's change (the probe's delete, from the pre-image ``deleted`` read) and
        the snapshot its undo is written over."""

    @abstractmethod
    def by_hand(self) -> str:
        """What to delete by hand when the probe may remain."""

    def why(self, answer: RemoteResponse) -> str:
        """A refusal, as the kind can tell it."""
        return f"answered HTTP {answer.status}"

    def check_run(self, steps: tuple[Step, ...], passed: bool, undos: tuple[str, ...]) -> CheckRun:
        return CheckRun(steps, passed, self.required, self.titles, undos)

    # -- requests, each failure a failed step ---------------------------------------

    @property
    def change(self) -> Change:
        assert self.made is not None, "create() plans the probe first"
        return self.made

    def deadline(self) -> float:
        return time.monotonic() + self.timeout_s

    def listing(self, res: Resource, name: str) -> dict[str, str]:
        try:
            return self.list_collection(res, self.deadline())
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None

    def send(self, change: Change, snap: Snapshot, target: Side, name: str) -> RemoteResponse:
        write = self.adapter.build_write(self.copy, change, snap, target)
        try:
            return self.remote.send_write(self.copy, write, self.deadline())
        except (UndogateError, TransportFailure) as exc:
            raise StepFailed(error_step(name, exc)) from None

    def read(self, change: Change, name: str) -> Snapshot:
        try:
            return self.adapter.read_change(self.remote, self.copy, change, self.deadline())
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None

    def planned_create(self, values: JsonObject, name: str) -> tuple[Change, Snapshot]:
        """The probe's create, planned as the gateway plans one, and the copy before it."""
        request = ChangeRequest(self.copy.id, create=values)
        try:
            plan, before = self.adapter.prepare(
                self.remote, self.copy, request, self.remote.limits, self.deadline()
            )
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None
        return plan.change(0, self.copy, before), before

    def edit(self, snap: Snapshot, name: str) -> Change:
        """A write of the probe planned on ``snap`` only the check would make: a fresh
        marker in its marked field."""
        request = ChangeRequest(
            self.copy.id, set={self.marked_field(): MARKER_PREFIX + secrets.token_hex(8)}
        )
        try:
            return self.adapter.plan(self.copy, request, snap, self.remote.limits).change(
                0, self.copy, snap
            )
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None

    # -- the steps every kind takes alike -------------------------------------------

    def snapshot(self) -> Step:
        self.start = self.listing(self.copy, "collection_snapshot")
        evidence: Evidence = {f"{self.member}s": len(self.start), "digest": digest_of(self.start)}
        summary = f"{len(self.start)} {self.member}(s) {self.listed}"
        return Step("collection_snapshot", True, summary, evidence)

    def read_back(self) -> tuple[Step, Snapshot]:
        name = "probe_read_back"
        snap = self.read(self.change, name)
        shows = snap.exists and self.adapter.shows(self.change, snap, Side.AFTER)
        evidence: Evidence = {"exists": snap.exists, "desired_values": shows}
        if not shows:
            raise StepFailed(Step(name, False, "the probe does not read back as written", evidence))
        evidence["digest"] = snap.digest
        return Step(name, True, self.read_back_summary, evidence), snap

    def good_delete(self, snap: Snapshot) -> Step:
        name = "good_delete"
        current = replace(self.change, applied_etag=snap.etag.header)
        status = self.send(current, snap, Side.BEFORE, name).status
        after = self.read(self.change, name)
        self.gone = not after.exists
        evidence: Evidence = {"status": status, "absent_after": self.gone}
        if status in OK and self.gone:
            return Step(name, True, f"HTTP {status}, the probe is gone", evidence)
        raise StepFailed(Step(name, False, f"answered HTTP {status}", evidence))

    def recreate(self, deleted_snap: Snapshot) -> Step:
        """The undo of a delete, on the probe's own name: PUT + If-None-Match: * of the
        whole pre-image. A refusal is an answer (RECREATE is not verified), not a failure."""
        name = "recreate_deleted_id"
        deleted, over = self.recreation(deleted_snap)
        try:
            answer = self.send(deleted, over, Side.BEFORE, name)
        except StepFailed as failed:
            return failed.step
        # A refusal (4xx) left nothing; any other answer may have made the member.
        self.gone = 400 <= answer.status < 500
        if answer.status not in OK:
            why = f"{self.why(answer)}: a deleted {self.named} cannot be re-created here"
            return Step(name, False, why, {"status": answer.status})
        back = self.read(deleted, name)
        whole = back.exists and self.adapter.shows(deleted, back, Side.BEFORE)
        evidence: Evidence = {"status": answer.status, "restored": whole}
        self.remove_probe(deleted)
        if whole:
            return Step(name, True, "re-created whole from its pre-image", evidence)
        return Step(name, False, "re-created, but not as it was", evidence)

    def remove_probe(self, change: Change) -> bool:
        """Delete the check's own probe (``change`` names it) with its current tag; True
        when it is gone."""
        try:
            snap = self.read(change, "restore_test_copy")
            if snap.exists:
                made = replace(change, before=ABSENT, applied_etag=snap.etag.header)
                self.send(made, snap, Side.BEFORE, "restore_test_copy")
                snap = self.read(change, "restore_test_copy")
        except StepFailed:
            return False
        self.gone = not snap.exists
        return self.gone

    def restore(self) -> Step:
        name = "restore_test_copy"
        if self.made is not None and self.remove_probe(self.made):
            return Step(name, True, "the probe was removed", {"needed": True, "restored": True})
        evidence: Evidence = {"needed": True, "restored": False}
        return Step(name, False, "the probe may remain", evidence, self.by_hand())


def run_collection_check(probe: CollectionProbe, production: Resource) -> CheckRun:
    """Every step, in order, the verdict, and the undos this run verified."""
    steps: list[Step] = []
    undos: list[str] = []
    prod_before: dict[str, str] | None = None
    counted = f"{probe.member}s"
    try:
        prod_before = probe.listing(production, "production_read")
        prod: Evidence = {counted: len(prod_before), "digest": digest_of(prod_before)}
        steps.append(Step("production_read", True, "listed", prod))
        steps.append(probe.snapshot())
        steps.append(probe.create())
        step, first = probe.read_back()
        steps.append(step)
        step, now = probe.stale_write(first)
        steps.append(step)
        step, now = probe.stale_delete(now, first.etag.header)
        steps.append(step)
        steps.append(probe.good_delete(now))
        guard = probe.collateral()
        steps.append(guard)
        if guard.passed:
            undos.append(UNDO_OF_CREATE)
            recreated = probe.recreate(now)
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
            why = f"every {probe.member} as before" if same else "the production collection changed"
            steps.append(Step("production_unchanged", same, why, {"unchanged": same}))
    names = {s.name for s in steps}
    # Re-creating a deleted member is an answer either way: it decides RECREATE only.
    passed = set(probe.required) <= names and all(
        s.passed for s in steps if s.name != "recreate_deleted_id"
    )
    return probe.check_run(tuple(steps), passed, tuple(undos) if passed else ())


__all__ = ["OK", "CollectionProbe", "digest_of", "run_collection_check"]
