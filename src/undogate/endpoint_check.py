"""Earning the attestation: check an endpoint on a disposable test copy (SPEC §11).

``conditional_writes: true`` is the operator's word that an endpoint honours the remote
contract (§6). ``check_endpoint`` tests that word against a resource declared as a test
copy (``test_copy_of``) of a production resource:

1. the test copy's GET carries one strong ETag;
2. a write with a stale ``If-Match`` is refused with 412 and changes nothing;
3. a good conditional write answers 200/204 and a read-back shows a new strong ETag and
   the desired values;
4. the undo write restores the start (records: the touched fields; text: the bytes);
5. the production resource is unchanged (read before and after; never written).

It stops at the first failed write step, but always tries to put the test copy back when
a write may have landed. Evidence (statuses, digests, counts, outcomes; never values) goes
to the ledger, one append-only row and one event per check.
"""

from __future__ import annotations

import dataclasses
import secrets
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .adapters import Adapter, Side, Snapshot, build_adapters
from .config import Config, Resource, load_config
from .errors import InvalidRequest, NotFound, UndogateError
from .etag import parse_etag
from .jobs import Change, ChangeRequest, ResourceKind
from .jsonvalue import JsonValue, dumps, from_python
from .ledger import Ledger
from .net import RemoteHTTP, RemoteResponse, TransportFailure
from .redact import install_redaction, uninstall_redaction
from .urls import normalised_url

MARKER_PREFIX = "undogate-check-"
_WRITE_OK = (200, 204)

Evidence = dict[str, bool | int | str]


@dataclass(frozen=True)
class Step:
    """One step's outcome. ``evidence`` goes to the ledger; ``message`` is only shown."""

    name: str
    passed: bool
    summary: str
    evidence: Evidence = field(default_factory=dict)
    message: str | None = None


@dataclass(frozen=True)
class CheckResult:
    check_id: int
    resource_id: str
    test_copy_id: str
    passed: bool
    steps: tuple[Step, ...]


STEP_TITLES: dict[str, str] = {
    "production_read": "read the production resource (never written)",
    "strong_etag": "GET of the test copy has one strong ETag",
    "stale_write_refused": "a stale If-Match write is refused with 412 and no effect",
    "good_write": "a good conditional write gives a new strong ETag and the desired values",
    "undo_restores": "the undo write restores the start",
    "restore_test_copy": "put the test copy back after a failure",
    "production_unchanged": "the production resource is unchanged",
}


class _StepFailed(Exception):
    def __init__(self, step: Step) -> None:
        super().__init__(step.name)
        self.step = step


def _error_step(name: str, exc: UndogateError | TransportFailure) -> Step:
    if isinstance(exc, TransportFailure):
        return Step(name, False, "no HTTP answer", {"error": "transport"}, exc.reason)
    evidence: Evidence = {"error": exc.code}
    status = exc.details.get("status")
    if isinstance(status, int):
        evidence["status"] = status
    return Step(name, False, f"refused: {exc.code}", evidence, exc.message)


def _synthetic_change(adapter: Adapter, copy: Resource, start: Snapshot, marker: str) -> Change:
    """A change that only the check would make: a marker in the first allow-listed field
    (records) or a marker line appended (text)."""
    if copy.kind is ResourceKind.JSON_RECORD:
        request = ChangeRequest(resource_id=copy.id, set={copy.fields[0]: marker})
    else:
        text = start.text or ""
        sep = "" if not text or text.endswith("\n") else "\n"
        request = ChangeRequest(resource_id=copy.id, text=f"{text}{sep}{marker}\n")
    return adapter.plan(copy, request, start).change(0, copy, start)


def _same(a: Snapshot, b: Snapshot) -> bool:
    return a.etag.strong_equals(b.etag) and a.digest == b.digest


def check_endpoint(
    config: Config,
    ledger: Ledger,
    http: RemoteHTTP,
    test_copy_id: str,
    environ: Mapping[str, str],
    *,
    actor: str = "operator",
    access_path: str = "cli",
) -> CheckResult:
    """Run the §11 check against the test copy ``test_copy_id`` and record the evidence.

    Raises:
        NotFound: no such resource.
        InvalidRequest: the resource is not declared a test copy (nothing is sent).
        LedgerError: the evidence could not be recorded.
    """
    copy = config.resource(test_copy_id)
    if copy is None:
        raise NotFound(f"unknown resource {test_copy_id!r}", resource=test_copy_id)
    production = config.resource(copy.test_copy_of) if copy.test_copy_of else None
    if (
        production is None
        or production.id == copy.id
        or normalised_url(production.url) == normalised_url(copy.url)
    ):
        raise InvalidRequest(
            f"{copy.id!r} is not declared a test copy (test_copy_of); the endpoint check "
            "writes, so it runs only against a disposable test copy",
            resource=copy.id,
        )
    adapter = build_adapters(http, config.limits, environ)[copy.kind]
    timeout = config.server.operation_timeout_s

    def deadline() -> float:
        return time.monotonic() + timeout

    def read(res: Resource, name: str) -> Snapshot:
        try:
            return adapter.read(res, deadline())
        except UndogateError as exc:
            raise _StepFailed(_error_step(name, exc)) from None

    def send(write_side: Side, change: Change, snap: Snapshot, name: str) -> RemoteResponse:
        try:
            return adapter.send_write(
                copy, adapter.build_write(copy, change, snap, write_side), deadline()
            )
        except (UndogateError, TransportFailure) as exc:
            raise _StepFailed(_error_step(name, exc)) from None

    ledger.write(
        lambda c: Ledger.add_event(
            c,
            job_id=None,
            actor=actor,
            access_path=access_path,
            operation="endpoint_check_started",
            target=production.id,
            detail={"test_copy": copy.id},
        )
    )
    steps: list[Step] = []
    prod_before: Snapshot | None = None
    start: Snapshot | None = None
    change: Change | None = None
    may_have_landed = False
    restored = False
    try:
        prod_before = read(production, "production_read")
        steps.append(
            Step(
                "production_read",
                True,
                "read",
                {"digest": prod_before.digest, "bytes": prod_before.size},
            )
        )
        start = read(copy, "strong_etag")
        steps.append(
            Step(
                "strong_etag",
                True,
                "one strong ETag",
                {"digest": start.digest, "bytes": start.size},
            )
        )
        try:
            change = _synthetic_change(adapter, copy, start, MARKER_PREFIX + secrets.token_hex(8))
        except UndogateError as exc:  # e.g. a document at the size limit has no room
            raise _StepFailed(_error_step("stale_write_refused", exc)) from None

        stale = parse_etag(f'"undogate-stale-{secrets.token_hex(12)}"')
        may_have_landed = True
        answer = send(
            Side.AFTER, change, dataclasses.replace(start, etag=stale), "stale_write_refused"
        )
        after_stale = read(copy, "stale_write_refused")
        unchanged = _same(after_stale, start)
        evidence: Evidence = {"status": answer.status, "unchanged": unchanged}
        if answer.status != 412 or not unchanged:
            why = f"answered HTTP {answer.status}" + (
                "" if unchanged else "; the test copy changed"
            )
            raise _StepFailed(Step("stale_write_refused", False, why, evidence))
        may_have_landed = False
        steps.append(Step("stale_write_refused", True, "HTTP 412, nothing changed", evidence))

        may_have_landed = True
        answer = send(Side.AFTER, change, start, "good_write")
        if answer.status not in _WRITE_OK:
            raise _StepFailed(
                Step(
                    "good_write", False, f"answered HTTP {answer.status}", {"status": answer.status}
                )
            )
        after = read(copy, "good_write")
        new_etag = not after.etag.strong_equals(start.etag)
        desired = adapter.shows(change, after, Side.AFTER)
        evidence = {
            "status": answer.status,
            "new_etag": new_etag,
            "desired_values": desired,
            "digest": after.digest,
        }
        if not (new_etag and desired):
            why = "the read-back shows " + (
                "the same ETag" if not new_etag else "other values than written"
            )
            raise _StepFailed(Step("good_write", False, why, evidence))
        steps.append(
            Step(
                "good_write",
                True,
                f"HTTP {answer.status}, new strong ETag, values in place",
                evidence,
            )
        )

        answer = send(Side.BEFORE, change, after, "undo_restores")
        if answer.status not in _WRITE_OK:
            raise _StepFailed(
                Step(
                    "undo_restores",
                    False,
                    f"answered HTTP {answer.status}",
                    {"status": answer.status},
                )
            )
        back = read(copy, "undo_restores")
        steps.append(_undo_step(adapter, change, start, back, answer.status))
        if not steps[-1].passed:
            raise _StepFailed(steps.pop())
        restored = True
    except _StepFailed as failed:
        steps.append(failed.step)
    if may_have_landed and not restored and start is not None and change is not None:
        steps.append(_restore(adapter, copy, change, start, read, send))
    if prod_before is not None:
        try:
            prod_after = read(production, "production_unchanged")
            same = _same(prod_after, prod_before)
            steps.append(
                Step(
                    "production_unchanged",
                    same,
                    "same ETag and bytes"
                    if same
                    else "the production resource changed during the check",
                    {"unchanged": same, "digest": prod_after.digest},
                )
            )
        except _StepFailed as failed:
            steps.append(failed.step)
    passed = len(steps) == 6 and all(s.passed for s in steps)
    return _record(ledger, production, copy, passed, steps, actor, access_path)


def _undo_step(
    adapter: Adapter, change: Change, start: Snapshot, back: Snapshot, status: int
) -> Step:
    if change.kind is ResourceKind.JSON_RECORD:
        ok = adapter.shows(change, back, Side.BEFORE)
        untouched = {k: v for k, v in (back.fields or {}).items() if k not in change.fields}
        others = untouched == {
            k: v for k, v in (start.fields or {}).items() if k not in change.fields
        }
        evidence: Evidence = {
            "status": status,
            "fields_restored": ok,
            "fields_checked": len(change.fields),
            "other_fields_unchanged": others,
            "new_etag": not back.etag.strong_equals(start.etag),
        }
        summary = (
            "the touched field is back to its start value"
            if ok
            else "the touched field was not restored"
        )
    else:
        ok = back.digest == start.digest and back.media_type == start.media_type
        evidence = {
            "status": status,
            "bytes_restored": ok,
            "digest": back.digest,
            "bytes": back.size,
        }
        summary = "the bytes are exactly the start" if ok else "the bytes differ from the start"
    return Step("undo_restores", ok, f"HTTP {status}, {summary}", evidence)


def _restore(
    adapter: Adapter,
    copy: Resource,
    change: Change,
    start: Snapshot,
    read: Callable[[Resource, str], Snapshot],
    send: Callable[[Side, Change, Snapshot, str], RemoteResponse],
) -> Step:
    """After a failure: if the test copy shows the check's write, write the start back."""
    name = "restore_test_copy"
    try:
        now = read(copy, name)
        if adapter.shows(change, now, Side.BEFORE) and (
            change.kind is ResourceKind.JSON_RECORD or now.digest == start.digest
        ):
            return Step(name, True, "the test copy is at its start", {"needed": False})
        if not adapter.shows(change, now, Side.AFTER):
            return Step(
                name,
                False,
                "the test copy shows neither the start nor the check's write: restore it by hand",
                {"needed": True, "restored": False},
            )
        answer = send(Side.BEFORE, change, now, name)
        back = read(copy, name)
    except _StepFailed as failed:
        return failed.step
    ok = answer.status in _WRITE_OK and adapter.shows(change, back, Side.BEFORE)
    if change.kind is ResourceKind.WEBDAV_TEXT:
        ok = ok and back.digest == start.digest
    return Step(
        name,
        ok,
        "restored" if ok else "not restored: restore the test copy by hand",
        {"needed": True, "restored": ok, "status": answer.status},
    )


def _record(
    ledger: Ledger,
    production: Resource,
    copy: Resource,
    passed: bool,
    steps: list[Step],
    actor: str,
    access_path: str,
) -> CheckResult:
    steps_json: list[JsonValue] = [
        from_python({"name": s.name, "passed": s.passed, "summary": s.summary, **s.evidence})
        for s in steps
    ]
    evidence = dumps({"kind": copy.kind.value, "steps": steps_json}, sort_keys=False)

    def write(c: sqlite3.Connection) -> int:
        cur = c.execute(
            "INSERT INTO endpoint_checks(resource_id, test_copy_id, production_fingerprint, "
            "test_copy_fingerprint, at, passed, evidence) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                production.id,
                copy.id,
                production.fingerprint,
                copy.fingerprint,
                time.time(),
                int(passed),
                evidence,
            ),
        )
        check_id = int(cur.lastrowid or 0)
        Ledger.add_event(
            c,
            job_id=None,
            actor=actor,
            access_path=access_path,
            operation="endpoint_check",
            target=production.id,
            detail={"test_copy": copy.id, "check": str(check_id), "passed": passed},
        )
        return check_id

    check_id = ledger.write(write)
    return CheckResult(check_id, production.id, copy.id, passed, tuple(steps))


def latest_verification(ledger: Ledger, resource: Resource) -> bool:
    """True when the latest check of ``resource`` under its current identity passed."""

    def q(c: sqlite3.Connection) -> bool:
        row = c.execute(
            "SELECT passed FROM endpoint_checks WHERE resource_id = ? "
            "AND production_fingerprint = ? ORDER BY id DESC LIMIT 1",
            (resource.id, resource.fingerprint),
        ).fetchone()
        return bool(row and row[0])

    return ledger.read(q)


def run_endpoint_check(
    config_path: Path, test_copy_id: str, environ: Mapping[str, str]
) -> CheckResult:
    """Load the config, own the ledger for the check, run it, close everything.

    Raises:
        ConfigError, LedgerInUse (a server owns the ledger), LedgerError, and what
        ``check_endpoint`` raises.
    """
    config = load_config(config_path)
    redaction = install_redaction(
        [r.token_env for r in config.resources if r.token_env], environ=environ
    )
    try:
        ledger = Ledger.open(config.server.data_dir)
        try:
            http = RemoteHTTP(
                request_timeout_s=config.server.request_timeout_s,
                ca_bundle=config.server.ca_bundle,
            )
            try:
                return check_endpoint(config, ledger, http, test_copy_id, environ)
            finally:
                http.close()
        finally:
            ledger.close()
    finally:
        uninstall_redaction(redaction)
