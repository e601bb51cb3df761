"""The probes of the endpoint check (SPEC §11), each one request against a test copy.

``CopyProbe`` holds what one check knows about its test copy: the start snapshot and
every value the check wrote there, so that it only ever puts back its own writes. The
refusal probes use only tags the endpoint itself issued for this copy (endpoints may
validate a tag's syntax: Kinto answers 400 to a tag that is not a quoted integer), and
each carries a change whose JSON Patch ``test`` operations hold, so that only the
``If-Match`` comparison can refuse it.

A probe that got an answer returns a ``Step`` (passed or not); a failure that leaves the
copy's state unknown (no answer, an unreadable copy) raises ``StepFailed``.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit, urlunsplit

from ..adapters import Adapter, ConditionalWrite, Side, Snapshot
from ..adapters.json_record import PATCH_MEDIA_TYPE
from ..config import Resource
from ..errors import InvalidRequest, UndogateError
from ..etag import ETag
from ..jobs import Change, ChangeRequest, ResourceKind
from ..jsonvalue import JsonValue, dumps, escape_token
from ..net import RemoteResponse, TransportFailure

MARKER_PREFIX = "undogate-check-"
ABSENT_PREFIX = "undogate-absent-"
ORIGINALS_DIR = "endpoint-check-originals"
_WRITE_OK = (200, 204)
_ABSENT = (404, 410)

Evidence = dict[str, bool | int | str]


@dataclass(frozen=True)
class Step:
    """One step's outcome. ``evidence`` goes to the ledger; ``message`` is only shown
    (it may name URLs and the copy's original values, for restoring by hand)."""

    name: str
    passed: bool
    summary: str
    evidence: Evidence = field(default_factory=dict)
    message: str | None = None


class StepFailed(Exception):
    def __init__(self, step: Step) -> None:
        super().__init__(step.name)
        self.step = step


def error_step(name: str, exc: UndogateError | TransportFailure) -> Step:
    if isinstance(exc, TransportFailure):
        return Step(name, False, "no HTTP answer", {"error": "transport"}, exc.reason)
    evidence: Evidence = {"error": exc.code}
    status = exc.details.get("status")
    if isinstance(status, int):
        evidence["status"] = status
    return Step(name, False, f"refused: {exc.code}", evidence, exc.message)


def same_version(a: Snapshot, b: Snapshot) -> bool:
    return a.etag.strong_equals(b.etag) and a.digest == b.digest


def sibling_url(copy: Resource, token: str) -> str:
    """A URL beside the test copy that nothing should exist at: the record's URL with a
    random suffix, or a random file name (same extension) in the document's folder."""
    parts = urlsplit(copy.url)
    path = parts.path
    if copy.kind is ResourceKind.WEBDAV_TEXT and not path.endswith("/"):
        folder, _, name = path.rpartition("/")
        path = f"{folder}/{ABSENT_PREFIX}{token}{PurePosixPath(name).suffix}"
    else:
        stem = path.rstrip("/")
        path = f"{stem}-{ABSENT_PREFIX}{token}{path[len(stem) :]}"
    return urlunsplit(parts._replace(path=path))


@dataclass
class CopyProbe:
    adapter: Adapter
    copy: Resource
    timeout_s: float
    originals_dir: Path  # where a document's original bytes are kept if it cannot be put back
    start: Snapshot | None = None
    ours: list[str] = field(default_factory=list)  # marker values (records) or texts written

    # -- shared ---------------------------------------------------------------------

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout_s

    def read(self, res: Resource, name: str) -> Snapshot:
        try:
            return self.adapter.read(res, self._deadline())
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None

    def send(self, write: ConditionalWrite, name: str) -> RemoteResponse:
        try:
            return self.adapter.send_write(self.copy, write, self._deadline())
        except (UndogateError, TransportFailure) as exc:
            raise StepFailed(error_step(name, exc)) from None

    def _start(self) -> Snapshot:
        assert self.start is not None, "begin() reads the start first"
        return self.start

    def _marker_change(self, current: Snapshot, name: str) -> Change:
        """A change only the check would make, from ``current``: a fresh marker in the
        first allow-listed field (records) or a marker line after the start text."""
        marker = MARKER_PREFIX + secrets.token_hex(8)
        if self.copy.kind is ResourceKind.JSON_RECORD:
            request = ChangeRequest(resource_id=self.copy.id, set={self.copy.fields[0]: marker})
            self.ours.append(marker)
        else:
            text = self._start().text or ""
            sep = "" if not text or text.endswith("\n") else "\n"
            request = ChangeRequest(resource_id=self.copy.id, text=f"{text}{sep}{marker}\n")
            self.ours.append(request.text or "")
        try:
            return self.adapter.plan(self.copy, request, current).change(0, self.copy, current)
        except UndogateError as exc:  # e.g. a document at the size limit has no room
            raise StepFailed(error_step(name, exc)) from None

    def at_start(self, now: Snapshot) -> bool:
        """Records: every allow-listed field as at the start; text: the exact bytes and
        media type."""
        start = self._start()
        if self.copy.kind is ResourceKind.WEBDAV_TEXT:
            return now.digest == start.digest and now.media_type == start.media_type
        return not self._differing_fields(now)

    def _differing_fields(self, now: Snapshot | None) -> list[str]:
        """The allow-listed fields not as at the start (all of them when unknown)."""
        before = self._start().fields or {}
        if now is None:
            return list(self.copy.fields)
        current = now.fields or {}
        return [
            f
            for f in self.copy.fields
            if (f in before) != (f in current) or (f in before and before[f] != current[f])
        ]

    def shows_ours(self, now: Snapshot) -> bool:
        """The copy shows one of the check's own writes (so writing back loses nothing)."""
        if self.copy.kind is ResourceKind.WEBDAV_TEXT:
            return now.text in self.ours and now.media_type == self._start().media_type
        value = (now.fields or {}).get(self.copy.fields[0])
        return isinstance(value, str) and value in self.ours

    def _write_back(self, current: Snapshot, name: str) -> ConditionalWrite | None:
        """The conditional write from ``current`` back to the start (``None``: already
        there). For records it is the gateway's own undo: ``test`` the current value,
        then put the start value back (or remove a field that did not exist)."""
        start = self._start()
        if self.copy.kind is ResourceKind.JSON_RECORD:
            touched, fields = self.copy.fields[0], start.fields or {}
            request = (
                ChangeRequest(resource_id=self.copy.id, set={touched: fields[touched]})
                if touched in fields
                else ChangeRequest(resource_id=self.copy.id, remove=(touched,))
            )
        else:
            request = ChangeRequest(resource_id=self.copy.id, text=start.text)
        try:
            change = self.adapter.plan(self.copy, request, current).change(0, self.copy, current)
        except InvalidRequest:
            return None  # a no-op: the touched field (or text) is already at the start
        except UndogateError as exc:
            raise StepFailed(error_step(name, exc)) from None
        return self.adapter.build_write(self.copy, change, current, Side.AFTER)

    # -- the probes, in order --------------------------------------------------------

    def begin(self) -> Step:
        self.start = self.read(self.copy, "strong_etag")
        evidence: Evidence = {"digest": self.start.digest, "bytes": self.start.size}
        return Step("strong_etag", True, "one strong ETag, valid data", evidence)

    def good_write(self) -> tuple[Step, Snapshot]:
        name, start = "good_write", self._start()
        change = self._marker_change(start, name)
        answer = self.send(self.adapter.build_write(self.copy, change, start, Side.AFTER), name)
        if answer.status not in _WRITE_OK:
            why = f"answered HTTP {answer.status}"
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
        summary = f"HTTP {answer.status}, new strong ETag, values in place"
        return Step(name, True, summary, evidence), after

    def stale_write(self, current: Snapshot) -> tuple[Step, Snapshot]:
        """If-Match with the tag the endpoint issued before the good write: 412."""
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
        refused = status == 412 if name == "stale_write_refused" else 400 <= status < 500
        evidence: Evidence = {"status": status, "unchanged": unchanged}
        if refused and unchanged:
            return Step(name, True, f"HTTP {status}, nothing changed", evidence), now
        why = f"answered HTTP {status}"
        if self.adapter.shows(change, now, Side.AFTER):
            why += " and the write landed: " + (
                "the endpoint does not compare If-Match"
                if name == "stale_write_refused"
                else "the endpoint matches a weak tag (RFC 9110: If-Match compares strongly)"
            )
        elif not unchanged:
            why += "; the test copy changed"
        elif not refused:
            why += ", nothing changed, but " + (
                "only 412 shows that the tag was compared"
                if name == "stale_write_refused"
                else "a refusal is a 4xx"
            )
        return Step(name, False, why, evidence), now

    def missing_resource(self, current: Snapshot) -> Step:
        """A conditional write (a tag the endpoint issued) to a URL beside the copy where
        nothing exists must be refused and create nothing."""
        name = "missing_not_created"
        url = sibling_url(self.copy, secrets.token_hex(6))
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
        summary = f"{answered}: CREATED a resource under If-Match"
        return Step(name, False, summary, evidence, message)

    def _create_attempt(self, url: str, tag: ETag) -> ConditionalWrite:
        marker = MARKER_PREFIX + secrets.token_hex(8)
        if self.copy.kind is ResourceKind.JSON_RECORD:
            first, pointer = self.copy.fields[0], self.copy.record_pointer
            op: JsonValue = (
                {"op": "add", "path": pointer, "value": {first: marker}}
                if pointer
                else {"op": "add", "path": "/" + escape_token(first), "value": marker}
            )
            method, media_type, body = "PATCH", PATCH_MEDIA_TYPE, dumps([op]).encode("utf-8")
        else:
            method, media_type = "PUT", self._start().media_type
            body = f"{marker}\n".encode()
        headers = {"Content-Type": media_type, "If-Match": tag.header}
        return ConditionalWrite(method, url, headers, body, tag.header)

    def _plain(self, method: str, url: str) -> int | None:
        """A GET or DELETE of ``url`` with the copy's credentials; its status or None."""
        try:
            return self.adapter.http.send(
                method,
                url,
                headers={"Accept": self.adapter.accept, **self.adapter.auth_headers(self.copy)},
                flags=self.adapter.flags(self.copy),
                deadline=self._deadline(),
                fresh_connection=method != "GET",
                max_body=self.adapter.limits.max_document_bytes * 4,
            ).status
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
            status = self.send(write, name).status
            if status not in _WRITE_OK:
                raise StepFailed(Step(name, False, f"answered HTTP {status}", {"status": status}))
        back = self.read(self.copy, name)
        ok = self.at_start(back)
        evidence: Evidence = {"status": status, "restored": ok, "digest": back.digest}
        if self.copy.kind is ResourceKind.JSON_RECORD:
            before, after = self._start().fields or {}, back.fields or {}
            outside = set(before) ^ set(after) | {
                k for k in set(before) & set(after) if before[k] != after[k]
            }
            others = len(outside - set(self.copy.fields))
            evidence.update(fields_checked=len(self.copy.fields), other_fields_changed=others)
            summary = (
                "every allow-listed field is back to its start value"
                if ok
                else "an allow-listed field differs from the start"
            )
            if ok and others:
                summary += f" ({others} field(s) outside the allowlist changed: server-kept)"
        else:
            summary = "the bytes and media type are exactly the start" if ok else "not the start"
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
        start, url = self._start(), self.copy.url
        if self.copy.kind is ResourceKind.JSON_RECORD:
            fields = start.fields or {}
            what = [
                f"set {f!r} to {dumps(fields[f])}" if f in fields else f"remove {f!r}"
                for f in self._differing_fields(now)
            ]
            inside = f" (the fields inside {self.copy.record_pointer})"
            where = inside if self.copy.record_pointer else ""
            return (
                f"restore the test copy by hand: at {url}{where}, "
                + "; ".join(what or ["check every allow-listed field"])
                + f" (its version at the start was {start.etag.header})"
            )
        original = f"{start.size} bytes, {start.media_type}, {start.digest}"
        saved = self._keep_original(start)
        if saved is None:
            return (
                f"restore the test copy by hand: PUT the original {original} back to {url}; "
                f"the exact text as a JSON string: {dumps(start.text)}"
            )
        return (
            f"restore the test copy by hand: PUT the original {original} back to {url}; "
            f"the exact bytes are saved in {saved}"
        )

    def _keep_original(self, start: Snapshot) -> Path | None:
        """Save the document's start bytes (mode 0600) beside the ledger; None on failure."""
        folder = self.originals_dir / ORIGINALS_DIR
        path = folder / f"{self.copy.id}-{time.time_ns()}.original"
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write((start.text or "").encode("utf-8"))
        except OSError:
            return None
        return path
