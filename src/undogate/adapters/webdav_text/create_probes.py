"""The endpoint check's probes of creating a document (docs/collections.md), for a test copy of a
document declared with ``create: true``: whether undoing a create works there.

Beside the copy, where nothing exists, with exactly the requests the gateway sends:

1. a probe document is created (``PUT`` with ``If-None-Match: *``) and reads back with a
   strong ETag and its bytes;
2. a second create of it (``If-None-Match: *`` where it now exists) is refused with
   no effect: 412, or whatever 4xx this endpoint answers (Azure Blob: 409
   ``BlobAlreadyExists``), counted a refusal only because the probe saw the document
   unchanged;
3. after a good write to it, a ``DELETE`` with the tag the endpoint issued before that
   write (now stale) is refused with 412 and no effect;
4. a ``DELETE`` with the current tag removes it: the undo of a create.

All four passing verifies ``UNDO_OF_CREATE``. A create that overwrote the probe fails the
whole check: the gateway's creates rely on ``If-None-Match: *``. A probe left behind is
deleted again (only the check's own), or named for deleting by hand. Evidence: statuses
and digests.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, replace

from ...errors import UndogateError
from ...jobs import Change, ChangeRequest
from ...net import TransportFailure
from ...resources import Resource
from ..base import Prober, Side, Snapshot, Verdict
from ..checks.steps import MARKER_PREFIX, Evidence, Step, StepFailed, error_step
from ..checks.whole_resource import WholeResourceAdapter, same_version

CREATE_TITLES = {
    "probe_document_created": "a probe document is created beside the copy with "
    "If-None-Match: * and reads back with a strong ETag",
    "existing_not_overwritten": "a create (If-None-Match: *) where the probe now exists "
    "is refused with no effect",
    "stale_delete_refused": "DELETE with a tag the endpoint issued earlier (now stale) "
    "is refused with 412 and no effect",
    "good_delete": "DELETE with the current tag removes the probe (the undo of a create)",
    "remove_probe_document": "remove the probe document after a failure",
}
CREATE_STEPS = (
    "probe_document_created",
    "existing_not_overwritten",
    "stale_delete_refused",
    "good_delete",
)


@dataclass(frozen=True)
class CreateProbes:
    steps: tuple[Step, ...]
    verified: bool  # the undo of a create works here
    overwrote: bool  # a create replaced what existed: creates are unsafe here


def run_create_probes(
    adapter: WholeResourceAdapter, remote: Prober, copy: Resource, timeout_s: float
) -> CreateProbes:
    """The steps, whether they verified the undo of a create, and whether a create
    overwrote the probe."""
    url = adapter.sibling_url(copy.url, "undogate-create-" + secrets.token_hex(6))
    probe = copy.model_copy(update={"url": url})

    def deadline() -> float:
        return time.monotonic() + timeout_s

    def read(name: str) -> Snapshot:
        try:
            return remote.read(probe, deadline(), absent_ok=True)
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None

    def send(change: Change, snap: Snapshot, target: Side, name: str) -> tuple[int, bool]:
        """The answer's status, and whether the kind counts it a success."""
        write = adapter.build_write(probe, change, snap, target)
        try:
            answer = remote.send_write(probe, write, deadline())
        except (UndogateError, TransportFailure) as exc:
            raise StepFailed(error_step(name, exc)) from None
        return answer.status, adapter.classify(write, answer) is Verdict.READ_BACK

    def text() -> ChangeRequest:
        return ChangeRequest(copy.id, text=f"{MARKER_PREFIX}{secrets.token_hex(8)}\n")

    steps: list[Step] = []
    made = overwrote = False
    try:
        name = "probe_document_created"
        try:
            plan, before = adapter.prepare(remote, probe, text(), remote.limits, deadline())
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None
        if before.exists:
            raise StepFailed(Step(name, False, "something exists where the probe would go"))
        change = plan.change(0, probe, before)
        made = True
        status, ok = send(change, before, Side.AFTER, name)
        first = read(name)
        shows = first.exists and adapter.shows(change, first, Side.AFTER)
        evidence: Evidence = {"status": status, "desired_values": shows}
        if not ok or not shows:
            raise StepFailed(Step(name, False, f"HTTP {status}, not created as sent", evidence))
        steps.append(Step(name, True, f"HTTP {status}, created and read back", evidence))

        name = "existing_not_overwritten"
        again = replace(change, after=adapter.plan(probe, text(), first, remote.limits).after)
        status, _ = send(again, before, Side.AFTER, name)
        now = read(name)
        unchanged = now.exists and same_version(now, first)
        overwrote = now.exists and adapter.shows(again, now, Side.AFTER)
        evidence = {"status": status, "unchanged": unchanged}
        if not (400 <= status < 500 and unchanged):
            why = f"HTTP {status}: " + (
                "the create REPLACED the existing document (If-None-Match: * ignored)"
                if overwrote
                else "not a refusal with no effect"
            )
            raise StepFailed(Step(name, False, why, evidence))
        steps.append(Step(name, True, f"HTTP {status}, nothing changed", evidence))

        name = "stale_delete_refused"
        edit = adapter.plan(probe, text(), first, remote.limits).change(0, probe, first)
        status, ok = send(edit, first, Side.AFTER, name)
        now = read(name)
        if not ok or not now.exists or now.etag.strong_equals(first.etag):
            why = f"the write to the probe answered HTTP {status} without a new tag"
            raise StepFailed(Step(name, False, why, {"status": status}))
        status, _ = send(replace(change, applied_etag=first.etag.header), now, Side.BEFORE, name)
        after = read(name)
        unchanged = after.exists and after.etag.strong_equals(now.etag)
        evidence = {"status": status, "unchanged": unchanged}
        if status != 412 or not unchanged:
            made = after.exists
            raise StepFailed(Step(name, False, f"answered HTTP {status}", evidence))
        steps.append(Step(name, True, "HTTP 412, nothing changed", evidence))

        name = "good_delete"
        status, ok = send(replace(change, applied_etag=now.etag.header), now, Side.BEFORE, name)
        made = read(name).exists
        evidence = {"status": status, "absent_after": not made}
        if not ok or made:
            raise StepFailed(Step(name, False, f"answered HTTP {status}", evidence))
        steps.append(Step(name, True, f"HTTP {status}, the probe is gone", evidence))
    except StepFailed as failed:
        steps.append(failed.step)
    if made:
        steps.append(_remove(remote, probe, deadline()))
    verified = tuple(s.name for s in steps) == CREATE_STEPS and all(s.passed for s in steps)
    return CreateProbes(tuple(steps), verified, overwrote)


def _remove(remote: Prober, probe: Resource, deadline: float) -> Step:
    """Delete the check's own probe document (it made it: no condition needed)."""
    name = "remove_probe_document"
    try:
        status = remote.send_bare(probe, "DELETE", probe.url, deadline).status
        gone = remote.send_bare(probe, "GET", probe.url, deadline).status in (404, 410)
    except (UndogateError, TransportFailure):
        status, gone = 0, False
    if gone:
        return Step(name, True, "the probe document was removed", {"status": status})
    return Step(
        name,
        False,
        "the probe document may remain",
        {"status": status},
        f"delete {probe.url} by hand",
    )
