"""The endpoint check (docs/remote-contract.md) of a kind whose resource is one object at one URL
(``WholeResourceAdapter``): ``json_record``, ``webdav_text``, and any outside kind
that is one too. Each probe is one request against the test copy:

1. the production resource is read (never written);
2. the test copy's GET carries its version (one strong ETag, or the version in the body
   where the kind keeps it there) and valid data;
3. a good conditional write answers a success the kind documents (``Adapter.classify``)
   and a read-back shows a new version and the desired values;
4. a write with the version from before that write (one the endpoint itself issued, now
   stale), in the place the kind's writes carry it, is refused with a status the
   resource's guard names for a stale version (412 for ``If-Match``) and changes
   nothing; that status is the check's evidence (``CheckRun.stale_statuses``);
5. a write with the weak form of the current tag is refused and changes nothing (only
   where the version travels in ``If-Match``: a version in the body is no entity-tag);
6. a conditional write to a URL beside the copy, where nothing exists, creates nothing;
7. the undo write restores the start exactly (as the kind defines "the start");
8. the production resource is unchanged.

A refusal probe that fails does not stop the others; a failure that leaves the copy's
state unknown does. Whenever the copy may not be at its start, the check puts it back
(only over one of its own writes) or says exactly what to restore by hand.

``CopyProbe`` holds what one check knows about its test copy: the start snapshot and
every value the check wrote there, so that it only ever puts back its own writes. The
refusal probes use only tags the endpoint itself issued for this copy (endpoints may
validate a tag's syntax: Kinto answers 400 to a tag that is not a quoted integer), and
each carries a change that would otherwise succeed, so that only the comparison of
the version (in ``If-Match`` or in the body) can refuse it.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ...errors import InvalidRequest, UndogateError
from ...jobs import Change, ChangeRequest
from ...net import RemoteResponse, TransportFailure
from ...net.etag import ETag
from ...resources import Resource
from ..base import Adapter, ConditionalWrite, Prober, Side, Snapshot, Verdict
from .steps import MARKER_PREFIX, CheckRun, Evidence, Step, StepFailed, error_step

ABSENT_PREFIX = "undogate-absent-"
_ABSENT = (404, 410)

STEP_TITLES: dict[str, str] = {
    "production_read": "read the production resource (never written)",
    "strong_etag": "GET of the test copy has its version (one strong ETag, or the "
    "version in the body) and valid data",
    "good_write": "a good conditional write gives a new version and the desired values",
    "stale_write_refused": "a write with a version the endpoint issued earlier (now stale) "
    "is refused as stale, with no effect",
    "weak_if_match_refused": 'the weak form of the current tag (W/"...") is refused with no effect',
    "missing_not_created": "a write conditional on a version, to a resource that does not "
    "exist, creates nothing",
    "undo_restores": "the undo write restores the start exactly",
    "restore_test_copy": "put the test copy back after a failure",
    "production_unchanged": "the production resource is unchanged",
}
# Every step a passing check has, in order (restore_test_copy only follows a failure;
# the weak tag only where the version travels in If-Match).
REQUIRED_STEPS = tuple(name for name in STEP_TITLES if name != "restore_test_copy")
WEAK_STEP = "weak_if_match_refused"


def same_version(a: Snapshot, b: Snapshot) -> bool:
    return a.etag.strong_equals(b.etag) and a.digest == b.digest


class WholeResourceAdapter(Adapter):
    """A kind whose resource is one object at one URL, and what its endpoint check asks
    of it: a change only the check would make (a marker), how to tell the start, and
    what to restore by hand."""

    def may_be_absent(self, resource: Resource) -> bool:
        """The resource need not exist yet (a document the gateway may create)."""
        return False

    def endpoint_check(
        self,
        wire: Prober,
        copy: Resource,
        production: Resource,
        timeout_s: float,
        keep: Callable[[bytes], Path | None],
    ) -> CheckRun:
        guard = self.guard(copy)
        probe = CopyProbe(self, wire, copy, timeout_s, keep)
        steps = run_copy_check(probe, production, self.may_be_absent(production), guard.in_body)
        required = tuple(
            name for name in REQUIRED_STEPS if not (guard.in_body and name == WEAK_STEP)
        )
        passed = tuple(s.name for s in steps) == required and all(s.passed for s in steps)
        stale = tuple(
            status
            for s in steps
            if s.name == "stale_write_refused"
            and s.passed
            and isinstance(status := s.evidence["status"], int)
        )
        return CheckRun(
            tuple(steps),
            passed,
            required,
            STEP_TITLES,
            stale_statuses=stale if passed else (),
            mode=guard.mode,
        )

    def sibling_url(self, url: str, name: str) -> str:
        """A URL beside ``url``, made with ``name``, where nothing should exist: unless
        a kind knows better, ``url`` with ``-{name}`` after its path."""
        parts = urlsplit(url)
        path = parts.path
        stem = path.rstrip("/")
        return urlunsplit(parts._replace(path=f"{stem}-{name}{path[len(stem) :]}"))

    def content_refusal(self, response: RemoteResponse) -> str | None:
        """What a refusal names as wrong with the content it carried (a CalDAV server's
        412 naming ``valid-calendar-data``), or ``None``. Such a 412 says nothing about
        the ``If-Match`` tag, so it never counts as the stale tag's refusal."""
        return None

    @abstractmethod
    def marker_request(self, copy: Resource, start: Snapshot, marker: str) -> ChangeRequest:
        """A change only the check would make: ``marker`` written into the copy."""

    @abstractmethod
    def shows_marker(
        self, copy: Resource, start: Snapshot, now: Snapshot, markers: Sequence[str]
    ) -> bool:
        """The copy shows one of the check's own marker writes (so writing the start back
        loses nothing)."""

    @abstractmethod
    def restored(self, copy: Resource, start: Snapshot, now: Snapshot) -> bool:
        """The copy is as it was at the start, as far as the gateway may change it."""

    @abstractmethod
    def restore_request(self, copy: Resource, start: Snapshot) -> ChangeRequest:
        """The change that puts the start back (planned against the copy as it is now)."""

    @abstractmethod
    def create_attempt(
        self, copy: Resource, start: Snapshot, url: str, tag: ETag, marker: str
    ) -> ConditionalWrite:
        """A write conditional on ``tag`` to ``url``, where nothing exists: it must be
        refused and create nothing."""

    @abstractmethod
    def restore_evidence(
        self, copy: Resource, start: Snapshot, back: Snapshot, ok: bool
    ) -> tuple[Evidence, str]:
        """What the undo step records beyond status and digest, and its summary."""

    @abstractmethod
    def restore_by_hand(
        self,
        copy: Resource,
        start: Snapshot,
        now: Snapshot | None,
        keep: Callable[[bytes], Path | None],
    ) -> str:
        """Exactly what a person must restore by hand (``now``: the copy as last read,
        if it could be). ``keep`` saves bytes privately and says where (None: it could
        not)."""


def run_copy_check(
    probe: CopyProbe, production: Resource, maybe_absent: bool, version_in_body: bool
) -> list[Step]:
    """Every step, in order (``maybe_absent``: the production resource need not exist;
    ``version_in_body``: the writes carry no ``If-Match``, so no weak tag is probed)."""
    steps: list[Step] = []
    prod_before = None
    wrote = restored = False
    try:
        prod_before = probe.read(production, "production_read", absent_ok=maybe_absent)
        read: Evidence = {"digest": prod_before.digest, "bytes": prod_before.size}
        steps.append(Step("production_read", True, "read", read))
        steps.append(probe.begin())
        wrote = True
        step, current = probe.good_write()
        steps.append(step)
        step, current = probe.stale_write(current)
        steps.append(step)
        if not version_in_body:
            step, current = probe.weak_write(current)
            steps.append(step)
        steps.append(probe.missing_resource(current))
        steps.append(probe.undo(current))
        restored = True
    except StepFailed as failed:
        steps.append(failed.step)
    if wrote and not restored:
        steps.append(probe.restore())
    if prod_before is not None:
        try:
            prod_after = probe.read(production, "production_unchanged", absent_ok=maybe_absent)
        except StepFailed as failed:
            steps.append(failed.step)
        else:
            same = same_version(prod_after, prod_before)
            why = "same ETag and bytes" if same else "the production resource changed"
            evidence: Evidence = {"unchanged": same, "digest": prod_after.digest}
            steps.append(Step("production_unchanged", same, why, evidence))
    return steps


@dataclass
class CopyProbe:
    adapter: WholeResourceAdapter
    remote: Prober
    copy: Resource
    timeout_s: float
    keep: Callable[[bytes], Path | None]  # saves the copy's original bytes privately
    start: Snapshot | None = None
    ours: list[str] = field(default_factory=list)  # the markers the check wrote

    # -- shared ---------------------------------------------------------------------

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout_s

    def read(self, res: Resource, name: str, *, absent_ok: bool = False) -> Snapshot:
        try:
            return self.remote.read(res, self._deadline(), absent_ok=absent_ok)
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None

    def send(self, write: ConditionalWrite, name: str) -> RemoteResponse:
        try:
            return self.remote.send_write(self.copy, write, self._deadline())
        except (UndogateError, TransportFailure) as exc:
            raise StepFailed(error_step(name, exc)) from None

    def succeeded(self, write: ConditionalWrite, answer: RemoteResponse) -> bool:
        """The answer is one the kind documents as success (its read-back decides)."""
        return self.adapter.classify(write, answer) is Verdict.READ_BACK

    def _start(self) -> Snapshot:
        assert self.start is not None, "begin() reads the start first"
        return self.start

    def _marker_change(self, current: Snapshot, name: str) -> Change:
        """A change only the check would make, from ``current``: a fresh marker."""
        marker = MARKER_PREFIX + secrets.token_hex(8)
        request = self.adapter.marker_request(self.copy, self._start(), marker)
        self.ours.append(marker)
        return self._planned(request, current, name)

    def _planned(self, request: ChangeRequest, current: Snapshot, name: str) -> Change:
        try:
            plan = self.adapter.plan(self.copy, request, current, self.remote.limits)
        except UndogateError as exc:  # e.g. a document at the size limit has no room
            raise StepFailed(error_step(name, exc)) from None
        return plan.change(0, self.copy, current)

    def at_start(self, now: Snapshot) -> bool:
        """As at the start, as far as the gateway may change it (records: every
        allow-listed field; text: the exact bytes and media type)."""
        return self.adapter.restored(self.copy, self._start(), now)

    def shows_ours(self, now: Snapshot) -> bool:
        """The copy shows one of the check's own writes (so writing back loses nothing)."""
        return self.adapter.shows_marker(self.copy, self._start(), now, self.ours)

    def _write_back(self, current: Snapshot, name: str) -> ConditionalWrite | None:
        """The conditional write from ``current`` back to the start (``None``: already
        there)."""
        request = self.adapter.restore_request(self.copy, self._start())
        try:
            plan = self.adapter.plan(self.copy, request, current, self.remote.limits)
        except InvalidRequest:
            return None  # a no-op: the touched part is already at the start
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None
        change = plan.change(0, self.copy, current)
        return self.adapter.build_write(self.copy, change, current, Side.AFTER)

    # -- the probes, in order --------------------------------------------------------

    def begin(self) -> Step:
        self.start = self.read(self.copy, "strong_etag")
        evidence: Evidence = {"digest": self.start.digest, "bytes": self.start.size}
        in_body = self.adapter.guard(self.copy).in_body
        where = "the version in the body" if in_body else "one strong ETag"
        return Step("strong_etag", True, f"{where}, valid data", evidence)

    def good_write(self) -> tuple[Step, Snapshot]:
        name, start = "good_write", self._start()
        change = self._marker_change(start, name)
        write = self.adapter.build_write(self.copy, change, start, Side.AFTER)
        answer = self.send(write, name)
        if not self.succeeded(write, answer):
            why = f"answered HTTP {answer.status}"
            named = self.adapter.content_refusal(answer)
            if named is not None:
                why += f", naming {named}: the server refused the content"
            raise StepFailed(Step(name, False, why, {"status": answer.status}))
        after = self.read(self.copy, name)
        new_etag = not after.etag.strong_equals(start.etag)
        desired = self.adapter.shows(change, after, Side.AFTER)
        evidence: Evidence = {
            "status": answer.status,
            "new_etag": new_etag,
            "desired_values": desired,
            "digest": after.digest,
        }
        if not (new_etag and desired):
            why = "the read-back shows " + (
                "the same ETag" if not new_etag else "other values than written"
            )
            raise StepFailed(Step(name, False, why, evidence))
        summary = f"HTTP {answer.status}, new version, values in place"
        return Step(name, True, summary, evidence), after

    def stale_write(self, current: Snapshot) -> tuple[Step, Snapshot]:
        """The version the endpoint issued before the good write, where the kind's writes
        carry it: refused with a stale status of the resource's guard."""
        return self._refusal("stale_write_refused", current, self._start().etag)

    def weak_write(self, current: Snapshot) -> tuple[Step, Snapshot]:
        """If-Match with ``W/`` + the current tag: RFC 9110 compares strongly, so no
        match; any 4xx with no effect passes (Kinto refuses the syntax with 400)."""
        return self._refusal("weak_if_match_refused", current, ETag(current.etag.opaque, True))

    def _refusal(self, name: str, current: Snapshot, tag: ETag) -> tuple[Step, Snapshot]:
        change = self._marker_change(current, name)
        stale = dataclasses.replace(current, etag=tag)
        answer = self.send(self.adapter.build_write(self.copy, change, stale, Side.AFTER), name)
        now = self.read(self.copy, name)
        unchanged = same_version(now, current)
        status = answer.status
        # A 412 that names what is wrong with the content was not decided by the tag.
        named = self.adapter.content_refusal(answer)
        stale_statuses = self.adapter.guard(self.copy).stale_statuses
        refused = status in stale_statuses if name == "stale_write_refused" else 400 <= status < 500
        evidence: Evidence = {"status": status, "unchanged": unchanged}
        if refused and unchanged and named is None:
            return Step(name, True, f"HTTP {status}, nothing changed", evidence), now
        why = f"answered HTTP {status}"
        if named is not None:
            evidence["content_refused"] = named
            why += f" naming {named}: the server refused the content, not the tag"
        elif self.adapter.shows(change, now, Side.AFTER):
            why += " and the write landed: " + (
                "the endpoint does not compare " + self._condition()
                if name == "stale_write_refused"
                else "the endpoint matches a weak tag (RFC 9110: If-Match compares strongly)"
            )
        elif not unchanged:
            why += "; the test copy changed"
        elif not refused:
            why += ", nothing changed, but " + (
                "only a status declared in stale_status ("
                + ", ".join(str(s) for s in sorted(stale_statuses))
                + ") shows that the version was compared"
                if name == "stale_write_refused"
                else "a refusal is a 4xx"
            )
        return Step(name, False, why, evidence), now

    def missing_resource(self, current: Snapshot) -> Step:
        """A conditional write (a tag the endpoint issued) to a URL beside the copy where
        nothing exists must be refused and create nothing."""
        name = "missing_not_created"
        url = self.adapter.sibling_url(self.copy.url, ABSENT_PREFIX + secrets.token_hex(6))
        status: int | None
        try:
            status = self.send(self._create_attempt(url, current.etag), name).status
        except StepFailed:
            status = None
        presence = self._presence(url)
        evidence: Evidence = {"status": status or 0, "absent_after": presence == "absent"}
        answered = "no HTTP answer" if status is None else f"HTTP {status}"
        if status is not None and 400 <= status < 500 and presence == "absent":
            return Step(name, True, f"{answered}, nothing was created", evidence)
        if presence == "absent":
            return Step(name, False, f"{answered}, not a refusal (nothing exists there)", evidence)
        if presence == "unknown":
            return Step(
                name,
                False,
                f"{answered}; whether something was created is unknown",
                evidence,
                f"check {url} by hand, and delete it if it exists",
            )
        deleted = self._delete(url)
        evidence.update(created=True, deleted=deleted)
        message = (
            f"the probe created {url}; the check deleted it again"
            if deleted
            else f"the probe created {url} and the check could not delete it: delete {url} by hand"
        )
        summary = f"{answered}: CREATED a resource under {self._condition()}"
        return Step(name, False, summary, evidence, message)

    def _condition(self) -> str:
        """Where the copy's writes carry their version, as a report says it."""
        return "the version in the body" if self.adapter.guard(self.copy).in_body else "If-Match"

    def _create_attempt(self, url: str, tag: ETag) -> ConditionalWrite:
        marker = MARKER_PREFIX + secrets.token_hex(8)
        return self.adapter.create_attempt(self.copy, self._start(), url, tag, marker)

    def _plain(self, method: str, url: str) -> int | None:
        """A GET or DELETE of ``url`` with the copy's credentials; its status or None."""
        try:
            return self.remote.send_bare(self.copy, method, url, self._deadline()).status
        except (UndogateError, TransportFailure):
            return None

    def _presence(self, url: str) -> str:
        status = self._plain("GET", url)
        return "absent" if status in _ABSENT else "present" if status == 200 else "unknown"

    def _delete(self, url: str) -> bool:
        self._plain("DELETE", url)
        return self._presence(url) == "absent"

    def undo(self, current: Snapshot) -> Step:
        """The undo write, from whatever the check last left: the start, exactly."""
        name = "undo_restores"
        write = self._write_back(current, name)
        status = 0
        if write is not None:
            answer = self.send(write, name)
            status = answer.status
            if not self.succeeded(write, answer):
                raise StepFailed(Step(name, False, f"answered HTTP {status}", {"status": status}))
        back = self.read(self.copy, name)
        ok = self.at_start(back)
        evidence: Evidence = {"status": status, "restored": ok, "digest": back.digest}
        extra, summary = self.adapter.restore_evidence(self.copy, self._start(), back, ok)
        evidence.update(extra)
        step = Step(name, ok, f"HTTP {status}, {summary}", evidence)
        if not ok:
            raise StepFailed(step)
        return step

    def restore(self) -> Step:
        """After a failure: write the start back, but only over one of the check's own
        writes; otherwise (or if that fails) say exactly what to restore by hand."""
        name = "restore_test_copy"
        try:
            now = self.read(self.copy, name)
        except StepFailed as failed:
            told = f"{failed.step.message}; " if failed.step.message else ""
            return dataclasses.replace(failed.step, message=told + self.by_hand(None))
        if self.at_start(now):
            return Step(name, True, "the test copy is at its start", {"needed": False})
        if not self.shows_ours(now):
            return Step(
                name,
                False,
                "the test copy shows neither its start nor the check's write",
                {"needed": True, "restored": False},
                self.by_hand(now),
            )
        try:
            write = self._write_back(now, name)
            status = self.send(write, name).status if write is not None else 0
            back = self.read(self.copy, name)
        except StepFailed as failed:
            evidence: Evidence = {**failed.step.evidence, "needed": True, "restored": False}
            why = f"not restored ({failed.step.summary})"
            return Step(name, False, why, evidence, self.by_hand(None))
        ok = self.at_start(back)
        evidence = {"needed": True, "restored": ok, "status": status}
        if ok:
            return Step(name, True, "restored", evidence)
        why = f"not restored (HTTP {status})"
        return Step(name, False, why, evidence, self.by_hand(back))

    # -- restoring by hand -------------------------------------------------------------

    def by_hand(self, now: Snapshot | None) -> str:
        """Exactly what to restore by hand: the URL and the original values or bytes."""
        return self.adapter.restore_by_hand(self.copy, self._start(), now, self.keep)
