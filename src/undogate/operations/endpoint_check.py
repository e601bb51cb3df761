"""Earning the attestation: check an endpoint on a disposable test copy (docs/remote-contract.md).

``conditional_writes: true`` is the operator's word that an endpoint honours the remote
contract. ``check_endpoint`` tests that word against a resource declared as a test
copy (``test_copy_of``) of a production resource: the resource's kind runs its probes
(``Adapter.endpoint_check``: every request the gateway would send, each refusal it
relies on, the copy put back or exactly what to restore by hand), and this module
records the evidence (statuses, digests, counts, outcomes; never values) in the ledger,
one append-only row and one event per check.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..adapters import MARKER_PREFIX, CheckRun, Step, adapter_for
from ..config import Resource
from ..errors import Conflict, InvalidRequest, NotFound
from ..jsonvalue import JsonNumber, JsonObject, JsonValue, dumps, from_python
from ..ledger import Reader, Store
from ..net.urls import normalised_url
from .context import Context

__all__ = [
    "MARKER_PREFIX",
    "CheckResult",
    "Step",
    "check_endpoint",
    "latest_verification",
    "report_lines",
    "result_view",
    "stale_statuses_seen",
]

# Where a test copy's original bytes are kept, beside the ledger, when the check cannot
# put them back itself.
ORIGINALS_DIR = "endpoint-check-originals"


@dataclass(frozen=True)
class CheckResult:
    check_id: int
    resource_id: str
    test_copy_id: str
    passed: bool
    steps: tuple[Step, ...]
    undos: tuple[str, ...] = ()  # what it verified of undos offered only once verified
    required: tuple[str, ...] = ()
    titles: Mapping[str, str] = field(default_factory=dict)
    stale_statuses: tuple[int, ...] = ()  # what it saw a stale write refused with
    mode: str | None = None  # how the kind writes the resource (CheckRun.mode)


_running: set[str] = set()
_running_lock = threading.Lock()


@contextmanager
def _only_check_of(copy_id: str) -> Iterator[None]:
    """Two checks of one copy at once would fail each other: refuse the second."""
    with _running_lock:
        if copy_id in _running:
            raise Conflict(f"an endpoint check of {copy_id!r} is already running")
        _running.add(copy_id)
    try:
        yield
    finally:
        with _running_lock:
            _running.discard(copy_id)


def check_endpoint(
    gw: Context,
    test_copy_id: str,
    *,
    actor: str = "operator",
    access_path: str = "cli",
) -> CheckResult:
    """Run the endpoint check against the test copy ``test_copy_id`` and record the evidence.

    Raises:
        NotFound: no such resource.
        InvalidRequest: the resource is not declared a test copy (nothing is sent).
        Conflict: a check of this test copy is already running in this process.
        LedgerError: the evidence could not be recorded.
    """
    config, ledger, wire = gw.config, gw.ledger, gw.wire
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
    adapter = adapter_for(copy.kind)
    timeout = config.server.operation_timeout_s
    keep = _keeper(config.server.data_dir, copy.id)
    with _only_check_of(copy.id):
        ledger.write(
            lambda tx: tx.add_event(
                job_id=None,
                actor=actor,
                access_path=access_path,
                operation="endpoint_check_started",
                target=production.id,
                detail={"test_copy": copy.id},
            )
        )
        run = adapter.endpoint_check(wire, copy, production, timeout, keep)
    return _record(ledger, production, copy, run, actor, access_path)


def _keeper(data_dir: Path, copy_id: str) -> Callable[[bytes], Path | None]:
    """Saves a copy's start bytes (mode 0600) beside the ledger; None on failure."""

    def keep(original: bytes) -> Path | None:
        folder = data_dir / ORIGINALS_DIR
        path = folder / f"{copy_id}-{time.time_ns()}.original"
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(original)
        except OSError:
            return None
        return path

    return keep


def _record(
    ledger: Store,
    production: Resource,
    copy: Resource,
    run: CheckRun,
    actor: str,
    access_path: str,
) -> CheckResult:
    passed, steps = run.passed, run.steps
    undos = run.undos if passed else ()
    stale = run.stale_statuses if passed else ()
    steps_json: list[JsonValue] = [
        from_python({"name": s.name, "passed": s.passed, "summary": s.summary, **s.evidence})
        for s in steps
    ]
    record: JsonObject = {"kind": copy.kind, "steps": steps_json}
    if undos:
        record["undos"] = [*undos]
    if stale:
        record["stale_statuses"] = [from_python(status) for status in stale]
    if run.mode is not None:
        record["mode"] = run.mode
    evidence = dumps(record, sort_keys=False)

    check_id = ledger.write(
        lambda tx: tx.record_endpoint_check(
            resource_id=production.id,
            test_copy_id=copy.id,
            production_fingerprint=production.fingerprint,
            test_copy_fingerprint=copy.fingerprint,
            passed=passed,
            evidence=evidence,
            actor=actor,
            access_path=access_path,
        )
    )
    return CheckResult(
        check_id,
        production.id,
        copy.id,
        passed,
        steps,
        undos,
        run.required,
        run.titles,
        stale,
        run.mode,
    )


def latest_verification(ledger: Store, resource: Resource) -> bool:
    """True when the latest check of ``resource`` under its current identity passed."""
    return ledger.read(lambda tx: tx.latest_check_passed(resource.id, resource.fingerprint))


def stale_statuses_seen(tx: Reader, resource: Resource) -> frozenset[int]:
    """The statuses with which the latest check of ``resource`` under its current
    identity saw its endpoint refuse a stale write and change nothing (none unless that
    check passed): what lets such an answer count as a refusal (``Adapter.verdict``)."""
    check = tx.latest_check(resource.id, resource.fingerprint)
    if check is None or not check.passed:
        return frozenset()
    seen = check.evidence.get("stale_statuses")
    listed = seen if isinstance(seen, list) else []
    return frozenset(int(s.text) for s in listed if isinstance(s, JsonNumber))


def result_view(result: CheckResult) -> JsonObject:
    """The check as the API answers it and the CLI prints it (messages included: they
    are for the operator, never for the ledger)."""
    return {
        "check_id": from_python(result.check_id),
        "resource": result.resource_id,
        "test_copy": result.test_copy_id,
        "passed": result.passed,
        "verified_undos": [*result.undos],
        "stale_statuses": [from_python(status) for status in result.stale_statuses],
        "mode": result.mode,
        "required_steps": [*result.required],
        "step_titles": {name: title for name, title in result.titles.items()},
        "steps": [
            {
                "name": s.name,
                "title": result.titles.get(s.name, s.name),
                "passed": s.passed,
                "summary": s.summary,
                "evidence": from_python(s.evidence),
                "message": s.message,
            }
            for s in result.steps
        ],
    }


def report_lines(view: JsonObject) -> list[str]:
    """A check (``result_view``) as lines: one pass/FAIL line per step with its reason,
    the message that goes with it, the probes that did not run, and the verdict."""
    listed = view.get("steps")
    steps = [s for s in listed if isinstance(s, dict)] if isinstance(listed, list) else []
    lines = [f"checking {view.get('resource')} on its test copy {view.get('test_copy')}"]
    for step in steps:
        mark = "pass" if step.get("passed") is True else "FAIL"
        lines.append(f"  [{mark}] {step.get('title')}: {step.get('summary')}")
        if isinstance(step.get("message"), str):
            lines.append(f"         {step.get('message')}")
    ran = {step.get("name") for step in steps}
    required = view.get("required_steps")
    titles = view.get("step_titles")
    titled = titles if isinstance(titles, dict) else {}
    lines.extend(
        f"  [ -- ] {titled.get(str(name), str(name))}: not run (an earlier step failed)"
        for name in (required if isinstance(required, list) else [])
        if name not in ran
    )
    verdict = "verified on a test copy" if view.get("passed") is True else "not verified"
    if isinstance(view.get("mode"), str):
        verdict += f" as {view.get('mode')}"
    undos = view.get("verified_undos")
    if isinstance(undos, list) and undos:
        lines.append(
            "  verified undos: "
            + ", ".join(str(u) for u in undos)
            + " (offered once a reviewer accepts them: undogate accept-undo)"
        )
    check_id = view.get("check_id")
    number = check_id.text if isinstance(check_id, JsonNumber) else check_id
    lines.append(f"{view.get('resource')}: {verdict} (check {number} in the ledger)")
    return lines
