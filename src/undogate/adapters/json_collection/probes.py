"""The endpoint check of a JSON collection's test copy (docs/collections.md): the
sequence every collection kind runs (``checks.collection``), with what is a JSON
collection's own:

- every record of the copy is read (one bounded listing), each told apart by a digest of
  its canonical JSON;
- the probe record is created as the collection creates (``PUT`` + ``If-None-Match: *``
  or ``POST``, which learns the record's id from the answer);
- a stale version is carried where the resource's writes carry it (``If-Match``, the
  body, or ``?{delete_query}=``) and must be refused with a status the resource's guard
  names for a stale version, with the record's version and bytes unchanged; the statuses
  seen are the check's evidence of how the endpoint refuses (``CheckRun.stale_statuses``);
- a deleted id is re-created from the record's pre-image, without the fields the server
  rewrites.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace

from ...digests import sha256_label
from ...jobs import ABSENT, Change
from ...jsonvalue import JsonObject, dumps
from ...resources import Resource
from ..base import Side, Snapshot, absent_snapshot
from ..checks.collection import OK, CollectionProbe
from ..checks.steps import MARKER_PREFIX, CheckRun, Evidence, Step, StepFailed
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


def listing_digests(records: list[JsonObject], copy: Resource) -> dict[str, str]:
    """Record id → digest of the record's canonical JSON."""
    return {record_id_of(copy, r): sha256_label(dumps(r)) for r in records}


@dataclass
class RecordProbe(CollectionProbe):
    """The JSON collection's steps: records are told apart by digest, a probe may be
    POSTed, and a stale version is refused with a status the resource's guard names."""

    probe_id: str | None = None  # where the probe landed, once known

    titles = COLLECTION_STEP_TITLES
    required = COLLECTION_REQUIRED
    member = "record"
    listed = "read"
    named = "id"
    read_back_summary = "its version, values in place"

    def list_collection(self, res: Resource, deadline: float) -> dict[str, str]:
        return listing_digests(list_records(self.remote, res, listing_url(res), deadline), res)

    def marked_field(self) -> str:
        return collection_settings(self.copy).fields[0]

    def _probe_values(self) -> JsonObject:
        marker = MARKER_PREFIX + secrets.token_hex(8)
        settings = collection_settings(self.copy)
        values: JsonObject = {settings.fields[0]: marker}
        for rule in settings.identity:  # a POST create needs evidence to be found by
            shaped = {"email": f"{marker}@undogate.invalid", "domain": f"{marker}.invalid"}
            values[rule.field] = shaped.get(rule.evidence, marker)
        return values

    def create(self) -> Step:
        name = "probe_created"
        change, before = self.planned_create(self._probe_values(), name)
        write = self.adapter.build_write(self.copy, change, before, Side.AFTER)
        self.gone = False  # from here on the probe may exist
        answer = self.send(change, before, Side.AFTER, name)
        landed = self.adapter.written_target(self.copy, change, write, answer)
        self.probe_id = landed
        evidence: Evidence = {"status": answer.status, "method": write.method}
        if answer.status not in OK or landed is None:
            why = f"answered HTTP {answer.status}" + ("" if landed else ", no record id")
            self.gone = answer.status in (400, 401, 403, 404, 405, 409, 412, 415, 422)
            raise StepFailed(Step(name, False, why, evidence))
        self.made = replace(change, target=landed)
        return Step(name, True, f"{write.method} answered {answer.status}", evidence)

    def stale_write(self, first: Snapshot) -> tuple[Step, Snapshot]:
        """A good update of the probe makes its first version stale; an update carrying
        that version is refused."""
        name = "stale_update_refused"
        wrote = self.send(self.edit(first, name), first, Side.AFTER, name).status
        now = self.read(self.change, name)
        if wrote not in OK or not now.exists or now.etag.strong_equals(first.etag):
            why = f"the update of the probe answered HTTP {wrote} without a new version"
            raise StepFailed(Step(name, False, why, {"status": wrote}))
        edit = self.edit(now, name)
        status = self.send(edit, replace(now, etag=first.etag), Side.AFTER, name).status
        return self._refused(name, now, status), now

    def stale_delete(self, now: Snapshot, stale_tag: str) -> tuple[Step, Snapshot]:
        name = "stale_delete_refused"
        answer = self.send(replace(self.change, applied_etag=stale_tag), now, Side.BEFORE, name)
        return self._refused(name, now, answer.status), now

    def _refused(self, name: str, now: Snapshot, status: int) -> Step:
        """The stale write answered ``status``: a stale status of the guard, and the probe
        as ``now`` (its version and bytes), or the step fails."""
        after = self.read(self.change, name)
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

    def collateral(self) -> Step:
        name = "collateral_guard"
        now = self.listing(self.copy, name)
        differing = sorted(k for k in set(now) | set(self.start) if now.get(k) != self.start.get(k))
        evidence: Evidence = {"records": len(now), "differing": len(differing)}
        if differing:
            return Step(name, False, f"{len(differing)} record(s) differ from the start", evidence)
        return Step(name, True, f"all {len(now)} record(s) as at the start", evidence)

    def recreation(self, deleted: Snapshot) -> tuple[Change, Snapshot]:
        pre_image = deleted.content if isinstance(deleted.content, dict) else {}
        settings = collection_settings(self.copy)
        kept = settings.rewritten_fields()
        record = {k: v for k, v in pre_image.items() if k not in kept}
        change = replace(
            self.change,
            before={"record": record, "server_fields": [*kept]},
            after=ABSENT,
            fields=tuple(f for f in settings.fields if f in record),
        )
        return change, absent_snapshot()

    def by_hand(self) -> str:
        where = record_url(self.copy, self.probe_id) if self.probe_id else self.copy.url
        if self.probe_id:
            return f"delete the probe record {where}"
        return f"look for a record with a {MARKER_PREFIX}… value in {where} and delete it"

    def check_run(self, steps: tuple[Step, ...], passed: bool, undos: tuple[str, ...]) -> CheckRun:
        """The statuses of the stale steps are the evidence of how the endpoint refuses
        a stale version."""
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
            steps,
            passed,
            self.required,
            self.titles,
            undos,
            stale_statuses=tuple(seen) if passed else (),
            mode=self.adapter.guard(self.copy).mode,
        )
