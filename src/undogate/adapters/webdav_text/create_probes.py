"""The endpoint check's probes of creating a document (SPEC §12), for a test copy of a
document declared with ``create: true``: whether undoing a create works there.

Beside the copy, where nothing exists, with exactly the requests the gateway sends:

1. a probe document is created (``PUT`` with ``If-None-Match: *``) and reads back with a
   strong ETag and its bytes;
2. after a good write to it, a ``DELETE`` with the tag the endpoint issued before that
   write (now stale) is refused with 412 and no effect;
3. a ``DELETE`` with the current tag removes it: the undo of a create.

All three passing verifies ``UNDO_OF_CREATE``. A probe left behind is deleted again (only
the check's own), or named for deleting by hand. Evidence: statuses and digests.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import replace

from ...errors import UndogateError
from ...jobs import Change, ChangeRequest
from ...net import TransportFailure
from ...resources import Resource
from ..base import Prober, Side, Snapshot
from ..checks.steps import MARKER_PREFIX, Evidence, Step, StepFailed, error_step
from ..checks.whole_resource import WholeResourceAdapter

CREATE_TITLES = {
    "probe_document_created": "a probe document is created beside the copy with "
    "If-None-Match: * and reads back with a strong ETag",
    "stale_delete_refused": "DELETE with a tag the endpoint issued earlier (now stale) "
    "is refused with 412 and no effect",
    "good_delete": "DELETE with the current tag removes the probe (the undo of a create)",
    "remove_probe_document": "remove the probe document after a failure",
}
_OK = (200, 201, 204)


def run_create_probes(
    adapter: WholeResourceAdapter, remote: Prober, copy: Resource, timeout_s: float
) -> tuple[list[Step], bool]:
    """The steps, and whether they verified the undo of a create."""
    url = adapter.sibling_url(copy.url, "undogate-create-" + secrets.token_hex(6))
    probe = copy.model_copy(update={"url": url})

    def deadline() -> float:
        return time.monotonic() + timeout_s

    def read(name: str) -> Snapshot:
        try:
            return remote.read(probe, deadline(), absent_ok=True)
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None

    def send(change: Change, snap: Snapshot, target: Side, name: str) -> int:
        write = adapter.build_write(probe, change, snap, target)
        try:
            return remote.send_write(probe, write, deadline()).status
        except (UndogateError, TransportFailure) as exc:
            raise StepFailed(error_step(name, exc)) from None

    def text() -> ChangeRequest:
        return ChangeRequest(copy.id, text=f"{MARKER_PREFIX}{secrets.token_hex(8)}\n")

    steps: list[Step] = []
    made = False
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
        status = send(change, before, Side.AFTER, name)
        first = read(name)
        shows = first.exists and adapter.shows(change, first, Side.AFTER)
        evidence: Evidence = {"status": status, "desired_values": shows}
        if status not in _OK or not shows:
            raise StepFailed(Step(name, False, f"HTTP {status}, not created as sent", evidence))
        steps.append(Step(name, True, f"HTTP {status}, created and read back", evidence))

        name = "stale_delete_refused"
        edit = adapter.plan(probe, text(), first, remote.limits).change(0, probe, first)
        status = send(edit, first, Side.AFTER, name)
        now = read(name)
        if status not in _OK or not now.exists or now.etag.strong_equals(first.etag):
            why = f"the write to the probe answered HTTP {status} without a new tag"
            raise StepFailed(Step(name, False, why, {"status": status}))
        status = send(replace(change, applied_etag=first.etag.header), now, Side.BEFORE, name)
        after = read(name)
        unchanged = after.exists and after.etag.strong_equals(now.etag)
        evidence = {"status": status, "unchanged": unchanged}
        if status != 412 or not unchanged:
            made = after.exists
            raise StepFailed(Step(name, False, f"answered HTTP {status}", evidence))
        steps.append(Step(name, True, "HTTP 412, nothing changed", evidence))

        name = "good_delete"
        status = send(replace(change, applied_etag=now.etag.header), now, Side.BEFORE, name)
        made = read(name).exists
        evidence = {"status": status, "absent_after": not made}
        if status not in _OK or made:
            raise StepFailed(Step(name, False, f"answered HTTP {status}", evidence))
        steps.append(Step(name, True, f"HTTP {status}, the probe is gone", evidence))
    except StepFailed as failed:
        steps.append(failed.step)
    if made:
        steps.append(_remove(remote, probe, deadline()))
    names = [s.name for s in steps]
    verified = names == ["probe_document_created", "stale_delete_refused", "good_delete"]
    return steps, verified and all(s.passed for s in steps)


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
