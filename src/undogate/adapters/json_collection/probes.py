"""The endpoint check of a collection's test copy (docs/collections.md): whether undoing a
create works there, and whether a deleted id can be re-created.

Every request is the one the gateway itself would send (the kind's adapter builds it):

1. the production collection is listed (never written);
2. every record of the test copy is read (one bounded listing): the start;
3. a probe record is created, as the collection creates (``PUT`` + ``If-None-Match: *``
   or ``POST``);
4. it reads back with its version and the values written;
5. after a good update of the probe, an update carrying the version the endpoint issued
   before it (now stale), in the place the resource's writes carry it (``If-Match``, or
   the body), is refused with a status the resource's guard names for a stale version
   and no effect;
6. so is a ``DELETE`` with that stale version (``If-Match``, or ``?{delete_query}=``);
7. a ``DELETE`` with the current version removes the probe: the undo of a create;
8. every record of the copy equals the start: the collateral guard;
9. (not required) the deleted id is re-created from its pre-image with
   ``If-None-Match: *`` and reads back whole, the undo of a delete; the check deletes it
   again and the collateral guard runs once more.

A passing check verifies ``UNDO_OF_CREATE``; step 9 adds ``RECREATE``. The statuses of
steps 5 and 6 are its evidence of how the endpoint refuses a stale version
(``CheckRun.stale_statuses``). If the probe may be left behind, the check deletes it
(only its own probe) or says what to delete by hand. Evidence: statuses, counts and
digests, never values.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, replace

from ...digests import sha256_label
from ...errors import UndogateError
from ...jobs import ABSENT, Change, ChangeRequest
from ...jsonvalue import JsonObject, dumps
from ...net import RemoteResponse, TransportFailure
from ...resources import Resource
from ..base import RECREATE, UNDO_OF_CREATE, Adapter, Prober, Side, Snapshot, absent_snapshot
from ..checks.steps import MARKER_PREFIX, CheckRun, Evidence, Step, StepFailed, error_step
from .lookup import list_records, listing_url, record_id_of, record_url
from .settings import collection_settings

COLLECTION_STEP_TITLES: dict[str, str] = {
    "production_read": "list the production collection (never written)",
    "collection_snapshot": "every record of the test copy read (one bounded listing)",
    "probe_created": "a probe record is created the way the gateway creates",
    "probe_read_back": "the probe reads back with its version and its values",
    "stale_update_refused": "an update with a version the endpoint issued earlier (now "
    "stale) is refused as stale, with no effect",
    "stale_delete_refused": "DELETE with a version the endpoint issued earlier (now stale) "
    "is refused as stale, with no effect",
    "good_delete": "DELETE with the current version removes the probe (the undo of a create)",
    "collateral_guard": "every record of the test copy equals the start",
    "recreate_deleted_id": "a deleted id is re-created from its pre-image with "
    "If-None-Match: * (the undo of a delete)",
    "restore_test_copy": "remove the probe after a failure",
    "production_unchanged": "the production collection is unchanged",
}
# A passing check has these; recreate_deleted_id only says whether RECREATE is verified.
COLLECTION_REQUIRED = (
    "production_read",
    "collection_snapshot",
    "probe_created",
    "probe_read_back",
    "stale_update_refused",
    "stale_delete_refused",
    "good_delete",
    "collateral_guard",
    "production_unchanged",
)
_OK = (200, 201, 204)


def listing_digests(records: list[JsonObject], copy: Resource) -> dict[str, str]:
    """Record id → digest of the record's canonical JSON."""
    return {record_id_of(copy, r): sha256_label(dumps(r)) for r in records}


def _digest_of(digests: dict[str, str]) -> str:
    return sha256_label(dumps({k: digests[k] for k in sorted(digests)}))


@dataclass
class CollectionProbe:
    adapter: Adapter
    remote: Prober
    copy: Resource
    timeout_s: float
    start: dict[str, str] = field(default_factory=dict)
    probe_id: str | None = None  # where the probe landed, once known
    gone: bool = True  # the probe is not in the copy (never made, or deleted again)

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout_s

    def listing(self, res: Resource, name: str) -> dict[str, str]:
        try:
            records = list_records(self.remote, res, listing_url(res), self._deadline())
            return listing_digests(records, res)
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None

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

    # -- the probes, in order --------------------------------------------------------

    def snapshot(self) -> Step:
        self.start = self.listing(self.copy, "collection_snapshot")
        evidence: Evidence = {"records": len(self.start), "digest": _digest_of(self.start)}
        return Step("collection_snapshot", True, f"{len(self.start)} record(s) read", evidence)

    def _probe_values(self) -> JsonObject:
        marker = MARKER_PREFIX + secrets.token_hex(8)
        settings = collection_settings(self.copy)
        values: JsonObject = {settings.fields[0]: marker}
        for rule in settings.identity:  # a POST create needs evidence to be found by
            shaped = {"email": f"{marker}@undogate.invalid", "domain": f"{marker}.invalid"}
            values[rule.field] = shaped.get(rule.evidence, marker)
        return values

    def create(self) -> tuple[Step, Change]:
        name = "probe_created"
        request = ChangeRequest(self.copy.id, create=self._probe_values())
        try:
            plan, before = self.adapter.prepare(
                self.remote, self.copy, request, self.remote.limits, self._deadline()
            )
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None
        change = plan.change(0, self.copy, before)
        write = self.adapter.build_write(self.copy, change, before, Side.AFTER)
        self.gone = False  # from here on the probe may exist
        answer = self._send(change, before, Side.AFTER, name)
        landed = self.adapter.written_target(self.copy, change, write, answer)
        self.probe_id = landed
        evidence: Evidence = {"status": answer.status, "method": write.method}
        if answer.status not in _OK or landed is None:
            why = f"answered HTTP {answer.status}" + ("" if landed else ", no record id")
            self.gone = answer.status in (400, 401, 403, 404, 405, 409, 412, 415, 422)
            raise StepFailed(Step(name, False, why, evidence))
        return Step(name, True, f"{write.method} answered {answer.status}", evidence), replace(
            change, target=landed
        )

    def read_back(self, change: Change) -> tuple[Step, Snapshot]:
        name = "probe_read_back"
        snap = self._read(change, name)
        shows = snap.exists and self.adapter.shows(change, snap, Side.AFTER)
        evidence: Evidence = {"exists": snap.exists, "desired_values": shows}
        if not shows:
            raise StepFailed(Step(name, False, "the probe does not read back as written", evidence))
        evidence["digest"] = snap.digest
        return Step(name, True, "its version, values in place", evidence), snap

    def _edit(self, change: Change, snap: Snapshot, name: str) -> Change:
        """An update of the probe planned on ``snap``: a fresh marker in its first field."""
        marker = MARKER_PREFIX + secrets.token_hex(8)
        first = collection_settings(self.copy).fields[0]
        update = ChangeRequest(self.copy.id, set={first: marker})
        try:
            return self.adapter.plan(self.copy, update, snap, self.remote.limits).change(
                0, self.copy, snap
            )
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None

    def stale_update(self, change: Change, snap: Snapshot) -> tuple[Step, Snapshot, Snapshot]:
        """A good update of the probe makes its first version stale; an update carrying
        that version is refused. Returns the step, the probe after the good update, and
        the stale read."""
        name = "stale_update_refused"
        wrote = self._send(self._edit(change, snap, name), snap, Side.AFTER, name).status
        now = self._read(change, name)
        if wrote not in _OK or not now.exists or now.etag.strong_equals(snap.etag):
            why = f"the update of the probe answered HTTP {wrote} without a new version"
            raise StepFailed(Step(name, False, why, {"status": wrote}))
        edit = self._edit(change, now, name)
        status = self._send(edit, replace(now, etag=snap.etag), Side.AFTER, name).status
        return self._refused(name, change, now, status), now, snap

    def stale_delete(self, change: Change, now: Snapshot, stale: Snapshot) -> Step:
        """A DELETE carrying the version ``stale`` read, where ``now`` is current."""
        name = "stale_delete_refused"
        status = self._send(replace(change, applied_etag=stale.etag.header), now, Side.BEFORE, name)
        return self._refused(name, change, now, status.status)

    def _refused(self, name: str, change: Change, now: Snapshot, status: int) -> Step:
        """The stale write answered ``status``: a stale status of the guard, and the probe
        as ``now`` (its version and bytes), or the step fails."""
        after = self._read(change, name)
        unchanged = (
            after.exists and after.etag.strong_equals(now.etag) and after.digest == now.digest
        )
        evidence: Evidence = {"status": status, "unchanged": unchanged}
        stale = self.adapter.guard(self.copy).stale_statuses
        if status in stale and unchanged:
            return Step(name, True, f"HTTP {status}, nothing changed", evidence)
        why = f"answered HTTP {status}" + ("" if unchanged else ": the probe changed or vanished")
        if unchanged and status not in stale:
            listed = ", ".join(str(s) for s in sorted(stale))
            why += f", not a stale status of this resource ({listed})"
        if not after.exists:
            self.gone = True
        raise StepFailed(Step(name, False, why, evidence))

    def good_delete(self, change: Change, snap: Snapshot) -> tuple[Step, JsonObject]:
        name = "good_delete"
        pre_image = snap.content if isinstance(snap.content, dict) else {}
        status = self._send(replace(change, applied_etag=snap.etag.header), snap, Side.BEFORE, name)
        after = self._read(change, name)
        self.gone = not after.exists
        evidence: Evidence = {"status": status.status, "absent_after": self.gone}
        if status.status in _OK and self.gone:
            return Step(name, True, f"HTTP {status.status}, the probe is gone", evidence), pre_image
        raise StepFailed(Step(name, False, f"answered HTTP {status.status}", evidence))

    def collateral(self, name: str = "collateral_guard") -> Step:
        now = self.listing(self.copy, name)
        differing = sorted(k for k in set(now) | set(self.start) if now.get(k) != self.start.get(k))
        evidence: Evidence = {"records": len(now), "differing": len(differing)}
        if differing:
            return Step(name, False, f"{len(differing)} record(s) differ from the start", evidence)
        return Step(name, True, f"all {len(now)} record(s) as at the start", evidence)

    def recreate(self, change: Change, pre_image: JsonObject) -> Step:
        """The undo of a delete, on the probe's id: PUT + If-None-Match: * of the whole
        pre-image. A refusal is an answer (RECREATE is not verified), not a failure."""
        name = "recreate_deleted_id"
        settings = collection_settings(self.copy)
        kept = settings.rewritten_fields()
        record = {k: v for k, v in pre_image.items() if k not in kept}
        deleted = replace(
            change,
            before={"record": record, "server_fields": [*kept]},
            after=ABSENT,
            fields=tuple(f for f in settings.fields if f in record),
        )
        try:
            answer = self._send(deleted, absent_snapshot(), Side.BEFORE, name)
        except StepFailed as failed:
            return failed.step
        # A refusal (4xx) left nothing; any other answer may have made the record.
        self.gone = 400 <= answer.status < 500
        if answer.status not in _OK:
            why = f"answered HTTP {answer.status}: a deleted id cannot be re-created here"
            return Step(name, False, why, {"status": answer.status})
        back = self._read(deleted, name)
        whole = back.exists and self.adapter.shows(deleted, back, Side.BEFORE)
        evidence: Evidence = {"status": answer.status, "restored": whole}
        self.remove_probe(deleted)
        if whole:
            return Step(name, True, "re-created whole from its pre-image", evidence)
        return Step(name, False, "re-created, but not as it was", evidence)

    def remove_probe(self, change: Change) -> bool:
        """Delete the check's own probe (with its current tag); True when it is gone."""
        try:
            snap = self._read(change, "restore_test_copy")
            if snap.exists:
                made = replace(change, before=ABSENT, applied_etag=snap.etag.header)
                self._send(made, snap, Side.BEFORE, "restore_test_copy")
                snap = self._read(change, "restore_test_copy")
        except StepFailed:
            return False
        self.gone = not snap.exists
        return self.gone

    def restore(self, change: Change | None) -> Step:
        name = "restore_test_copy"
        if change is not None and self.remove_probe(change):
            return Step(name, True, "the probe was removed", {"needed": True, "restored": True})
        where = record_url(self.copy, self.probe_id) if self.probe_id else self.copy.url
        what = (
            f"delete the probe record {where}"
            if self.probe_id
            else f"look for a record with a {MARKER_PREFIX}… value in {where} and delete it"
        )
        return Step(name, False, "the probe may remain", {"needed": True, "restored": False}, what)


def run_collection_check(probe: CollectionProbe, production: Resource) -> CheckRun:
    """Every step, in order, the verdict, and the undos this run verified."""
    steps: list[Step] = []
    change: Change | None = None
    undos: list[str] = []
    prod_before: dict[str, str] | None = None
    try:
        prod_before = probe.listing(production, "production_read")
        prod: Evidence = {"records": len(prod_before), "digest": _digest_of(prod_before)}
        steps.append(Step("production_read", True, "listed", prod))
        steps.append(probe.snapshot())
        step, change = probe.create()
        steps.append(step)
        step, snap = probe.read_back(change)
        steps.append(step)
        step, snap, stale = probe.stale_update(change, snap)
        steps.append(step)
        steps.append(probe.stale_delete(change, snap, stale))
        step, pre_image = probe.good_delete(change, snap)
        steps.append(step)
        guard = probe.collateral()
        steps.append(guard)
        if guard.passed:
            undos.append(UNDO_OF_CREATE)
            recreated = probe.recreate(change, pre_image)
            steps.append(recreated)
            again = probe.collateral()
            if recreated.passed and again.passed:
                undos.append(RECREATE)
            elif not again.passed:
                steps.append(again)
    except StepFailed as failed:
        steps.append(failed.step)
    if not probe.gone:
        steps.append(probe.restore(change))
    if prod_before is not None:
        try:
            prod_after = probe.listing(production, "production_unchanged")
        except StepFailed as failed:
            steps.append(failed.step)
        else:
            same = prod_after == prod_before
            why = "every record as before" if same else "the production collection changed"
            steps.append(Step("production_unchanged", same, why, {"unchanged": same}))
    names = {s.name for s in steps}
    # Re-creating a deleted id is an answer either way: it decides RECREATE only.
    passed = set(COLLECTION_REQUIRED) <= names and all(
        s.passed for s in steps if s.name != "recreate_deleted_id"
    )
    verified = tuple(undos) if passed else ()
    seen = sorted(
        {
            status
            for s in steps
            if s.name in ("stale_update_refused", "stale_delete_refused")
            and s.passed
            and isinstance(status := s.evidence["status"], int)
        }
    )
    return CheckRun(
        tuple(steps),
        passed,
        COLLECTION_REQUIRED,
        COLLECTION_STEP_TITLES,
        verified,
        stale_statuses=tuple(seen) if passed else (),
        mode=probe.adapter.guard(probe.copy).mode,
    )
