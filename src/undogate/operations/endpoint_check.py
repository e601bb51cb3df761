"""Earning the attestation: check an endpoint on a disposable test copy (SPEC §11).

``conditional_writes: true`` is the operator's word that an endpoint honours the remote
contract (§6). ``check_endpoint`` tests that word against a resource declared as a test
copy (``test_copy_of``) of a production resource, one probe per step
(``endpoint_probes``):

1. the production resource is read (never written);
2. the test copy's GET carries one strong ETag and valid data;
3. a good conditional write answers 200/204 and a read-back shows a new strong ETag and
   the desired values;
4. a write with the tag from before that write (one the endpoint itself issued, now
   stale) is refused with 412 and changes nothing;
5. a write with the weak form of the current tag is refused and changes nothing;
6. a conditional write to a URL beside the copy, where nothing exists, creates nothing;
7. the undo write restores the start exactly (records: every allow-listed field; text:
   the bytes and media type);
8. the production resource is unchanged.

A refusal probe that fails does not stop the others; a failure that leaves the copy's
state unknown does. Whenever the copy may not be at its start, the check puts it back
(only over one of its own writes) or says exactly what to restore by hand. Evidence
(statuses, digests, counts, outcomes; never values) goes to the ledger, one append-only
row and one event per check.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..adapters import UNDO_OF_CREATE, Evidence, WholeResourceAdapter, adapter_for
from ..config import Resource
from ..errors import Conflict, InvalidRequest, NotFound
from ..jsonvalue import JsonNumber, JsonObject, JsonValue, dumps, from_python
from ..ledger import Store, Transaction
from ..urls import normalised_url
from .collection_probes import (
    COLLECTION_REQUIRED,
    COLLECTION_STEP_TITLES,
    CollectionProbe,
    run_collection_check,
)
from .context import Context
from .document_create_probes import DOCUMENT_CREATE_TITLES, run_document_create_probes
from .endpoint_probes import MARKER_PREFIX, CopyProbe, Step, StepFailed, same_version

__all__ = [
    "MARKER_PREFIX",
    "STEP_TITLES",
    "CheckResult",
    "Step",
    "check_endpoint",
    "latest_verification",
    "report_lines",
    "result_view",
]

STEP_TITLES: dict[str, str] = {
    "production_read": "read the production resource (never written)",
    "strong_etag": "GET of the test copy has one strong ETag and valid data",
    "good_write": "a good conditional write gives a new strong ETag and the desired values",
    "stale_write_refused": "If-Match with a tag the endpoint issued earlier (now stale) "
    "is refused with 412 and no effect",
    "weak_if_match_refused": 'the weak form of the current tag (W/"...") is refused with no effect',
    "missing_not_created": "If-Match on a resource that does not exist creates nothing",
    "undo_restores": "the undo write restores the start exactly",
    "restore_test_copy": "put the test copy back after a failure",
    "production_unchanged": "the production resource is unchanged",
}
# Every step a passing check has, in order (restore_test_copy only follows a failure).
REQUIRED_STEPS = tuple(name for name in STEP_TITLES if name != "restore_test_copy")
# A collection's check (SPEC §12) names its own steps.
TITLES = {**STEP_TITLES, **COLLECTION_STEP_TITLES, **DOCUMENT_CREATE_TITLES}


@dataclass(frozen=True)
class CheckResult:
    check_id: int
    resource_id: str
    test_copy_id: str
    passed: bool
    steps: tuple[Step, ...]
    undos: tuple[str, ...] = ()  # what it verified of undos offered only once verified
    required: tuple[str, ...] = REQUIRED_STEPS


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
    """Run the §11 check against the test copy ``test_copy_id`` and record the evidence.

    Raises:
        NotFound: no such resource.
        InvalidRequest: the resource is not declared a test copy (nothing is sent).
        Conflict: a check of this test copy is already running in this process.
        LedgerError: the evidence could not be recorded.
    """
    config, ledger, remote = gw.config, gw.ledger, gw.remote
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
        if not isinstance(adapter, WholeResourceAdapter):
            # Records that appear and disappear: its own probes (SPEC §12).
            collection = CollectionProbe(adapter, remote, copy, timeout)
            steps, undos = run_collection_check(collection, production)
            required: tuple[str, ...] = COLLECTION_REQUIRED
            names = {s.name for s in steps}
            # Re-creating a deleted id is an answer either way: it decides RECREATE only.
            passed = set(required) <= names and all(
                s.passed for s in steps if s.name != "recreate_deleted_id"
            )
        else:
            probe = CopyProbe(adapter, remote, copy, timeout, config.server.data_dir)
            steps, undos, required = _run(probe, production), [], REQUIRED_STEPS
            passed = tuple(s.name for s in steps) == required and all(s.passed for s in steps)
            if passed and copy.create is True:
                # A document the gateway may create (SPEC §12): is its undo safe here?
                created, works = run_document_create_probes(adapter, remote, copy, timeout)
                steps += created
                undos = [UNDO_OF_CREATE] if works else []
    verified = tuple(undos) if passed else ()
    return _record(ledger, production, copy, passed, steps, verified, required, actor, access_path)


def _run(probe: CopyProbe, production: Resource) -> list[Step]:
    steps: list[Step] = []
    prod_before = None
    wrote = restored = False
    try:
        # A document the gateway may create need not exist yet (SPEC §12).
        maybe_absent = production.create is True
        prod_before = probe.read(production, "production_read", absent_ok=maybe_absent)
        read: Evidence = {"digest": prod_before.digest, "bytes": prod_before.size}
        steps.append(Step("production_read", True, "read", read))
        steps.append(probe.begin())
        wrote = True
        step, current = probe.good_write()
        steps.append(step)
        step, current = probe.stale_write(current)
        steps.append(step)
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


def _record(
    ledger: Store,
    production: Resource,
    copy: Resource,
    passed: bool,
    steps: list[Step],
    undos: tuple[str, ...],
    required: tuple[str, ...],
    actor: str,
    access_path: str,
) -> CheckResult:
    steps_json: list[JsonValue] = [
        from_python({"name": s.name, "passed": s.passed, "summary": s.summary, **s.evidence})
        for s in steps
    ]
    record: JsonObject = {"kind": copy.kind, "steps": steps_json}
    if undos:
        record["undos"] = [*undos]
    evidence = dumps(record, sort_keys=False)

    def write(tx: Transaction) -> int:
        check_id = tx.record_endpoint_check(
            resource_id=production.id,
            test_copy_id=copy.id,
            production_fingerprint=production.fingerprint,
            test_copy_fingerprint=copy.fingerprint,
            passed=passed,
            evidence=evidence,
        )
        tx.add_event(
            job_id=None,
            actor=actor,
            access_path=access_path,
            operation="endpoint_check",
            target=production.id,
            detail={
                "test_copy": copy.id,
                "check": str(check_id),
                "passed": passed,
                "undos": [*undos],
            },
        )
        return check_id

    check_id = ledger.write(write)
    return CheckResult(check_id, production.id, copy.id, passed, tuple(steps), undos, required)


def latest_verification(ledger: Store, resource: Resource) -> bool:
    """True when the latest check of ``resource`` under its current identity passed."""
    return ledger.read(lambda tx: tx.latest_check_passed(resource.id, resource.fingerprint))


def result_view(result: CheckResult) -> JsonObject:
    """The check as the API answers it and the CLI prints it (messages included: they
    are for the operator, never for the ledger)."""
    return {
        "check_id": from_python(result.check_id),
        "resource": result.resource_id,
        "test_copy": result.test_copy_id,
        "passed": result.passed,
        "verified_undos": [*result.undos],
        "required_steps": [*result.required],
        "steps": [
            {
                "name": s.name,
                "title": TITLES.get(s.name, s.name),
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
    lines.extend(
        f"  [ -- ] {TITLES.get(str(name), str(name))}: not run (an earlier step failed)"
        for name in (required if isinstance(required, list) else REQUIRED_STEPS)
        if name not in ran
    )
    verdict = "verified on a test copy" if view.get("passed") is True else "not verified"
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
