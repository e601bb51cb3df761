"""A job's receipt as one self-contained JSON file that someone without the ledger can
check: ``undogate export-receipt JOB`` writes it, ``undogate verify-receipt FILE``
checks it.

The bundle holds the stretch of the chain from the job's first event to its last: the
job's own rows whole (every column the chain covers, the stored detail text byte for
byte), the rows of other jobs between them as their job id and body digest only, each
with its ``prev_hash`` and ``hash``; and the passkeys whose assertions the job's
confirmations carry, each with the chain row that registered it. The verifier
recomputes every link, re-checks every assertion against its public key and the
preview digest, and refuses anything else in the file: so an edit anywhere fails.

What it proves and what not: docs/proof.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..chain import ChainedRow, body_digest, link
from ..errors import InvalidRequest, NotFound
from ..ledger.chain_source import ChainSource
from ..ledger.sql_chain import StoredLink
from .assertions import APPROVED, REGISTERED
from .ledger_check import link_problem

FORMAT = "undogate.receipt/1"
#: The event that records a rewind plan and lists its steps (operations/rewind.py).
PLANNED = "rewind_planned"
CONFIRMED = "rewind_confirmed"  # lists the jobs the confirm ran
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_ROW_FIELDS = (
    "job_id",
    "at",
    "actor",
    "access_path",
    "operation",
    "target",
    "from_state",
    "to_state",
    "detail",
)

#: Checks the assertions a job's rows carry against the bundle's passkeys: returns the
#: problems found, one sentence each (see ``proof.assertions``).
AssertionCheck = Callable[[list[ChainedRow], dict[str, Any]], list[str]]


@dataclass(frozen=True)
class ReceiptVerdict:
    job_id: str
    events: int
    first_prev: str
    last_hash: str
    problems: tuple[str, ...]
    #: (passkey id, hash of its registration row): the receipt carries those rows but
    #: outside its chained stretch, so only the ledger (or an anchor) can vouch for them.
    registrations: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def export_receipt(
    source: ChainSource, job_id: str, passkeys: Callable[[list[ChainedRow]], dict[str, Any]]
) -> dict[str, Any]:
    """The receipt bundle of ``job_id`` from one snapshot of the ledger. ``passkeys``
    gives the public keys (and their registration rows) the job's assertions name.

    Raises:
        NotFound: the ledger holds no event of that job.
    """
    span = source.job_span(job_id)
    if span is None:
        raise NotFound(f"the ledger holds no event of job {job_id}", job=job_id)
    segment: list[dict[str, Any]] = []
    own: list[ChainedRow] = []
    for stored in source.links(from_id=span[0], to_id=span[1]):
        segment.append(_row_entry(stored, whole=stored.row.job_id == job_id))
        if stored.row.job_id == job_id:
            own.append(stored.row)
    return {"format": FORMAT, "job_id": job_id, "segment": segment, "passkeys": passkeys(own)}


def export_rewind_receipt(
    source: ChainSource, rewind_id: str, passkeys: Callable[[list[ChainedRow]], dict[str, Any]]
) -> dict[str, Any]:
    """The receipt bundle of a rewind plan (docs/rewind.md): the stretch of the chain
    from the plan's first event to its last, the plan's own rows (its passkey approval
    among them) and those of the jobs its ``rewind_planned`` row lists whole (their undo
    steps), the rest as digests.

    Raises:
        NotFound: the ledger holds no plan of that id.
    """
    span = source.target_span(rewind_id)
    planned = source.first_event(PLANNED, rewind_id)
    if span is None or planned is None:
        raise NotFound(f"the ledger holds no rewind plan {rewind_id}", rewind=rewind_id)
    confirmed = source.first_event(CONFIRMED, rewind_id)
    jobs = _plan_jobs([planned.row, *([confirmed.row] if confirmed else [])])
    segment: list[dict[str, Any]] = []
    own: list[ChainedRow] = []
    for stored in source.links(from_id=span[0], to_id=span[1]):
        mine = _of_plan(stored.row, rewind_id, jobs)
        segment.append(_row_entry(stored, whole=mine))
        if mine:
            own.append(stored.row)
    return {
        "format": FORMAT,
        "job_id": rewind_id,
        "jobs": sorted(jobs),
        "segment": segment,
        "passkeys": passkeys(own),
    }


def _plan_jobs(rows: list[ChainedRow]) -> set[str]:
    """The jobs a plan's rows list: its ``rewind_planned`` row's steps', and the jobs its
    ``rewind_confirmed`` row ran."""
    found: set[str] = set()
    for row in rows:
        detail = json.loads(row.detail) if isinstance(row.detail, str) else {}
        if not isinstance(detail, dict):
            continue
        steps = detail.get("steps") if row.operation == PLANNED else None
        found |= {str(s["job"]) for s in steps or [] if isinstance(s, dict) and "job" in s}
        if row.operation == CONFIRMED and isinstance(detail.get("jobs"), list):
            found |= {str(j) for j in detail["jobs"]}
    return found


def _of_plan(row: ChainedRow, rewind_id: str, jobs: set[str]) -> bool:
    """A row of the plan's receipt: one of its jobs', or one outside any job that is the
    plan's own (on its id) or the passkey approval of its preview (on the passkey's id,
    its preview document naming the plan)."""
    if row.job_id is not None:
        return row.job_id in jobs
    return row.target == rewind_id or (row.operation == APPROVED and _approved(row) == rewind_id)


def _approved(row: ChainedRow) -> str | None:
    """The id the preview document of a ``passkey_approved`` row names (None: none)."""
    try:
        detail = json.loads(row.detail) if isinstance(row.detail, str) else None
    except ValueError:
        return None
    preview = detail.get("preview") if isinstance(detail, dict) else None
    named = preview.get("job_id") if isinstance(preview, dict) else None
    return named if isinstance(named, str) else None


def passkeys_for(source: ChainSource, rows: list[ChainedRow]) -> dict[str, Any]:
    """The registration rows (whole, with their links) of the passkeys the approvals
    in ``rows`` name."""
    found: dict[str, Any] = {}
    for row in rows:
        if row.operation == APPROVED and row.target and row.target not in found:
            stored = source.first_event(REGISTERED, row.target)
            if stored is not None:
                found[row.target] = _row_entry(stored, whole=True)
    return found


def _row_entry(stored: StoredLink, *, whole: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": stored.id, "prev_hash": stored.prev_hash, "hash": stored.hash}
    if whole:
        entry["event"] = {name: getattr(stored.row, name) for name in _ROW_FIELDS}
    else:
        entry["job_id"] = stored.row.job_id
        entry["body_digest"] = body_digest(stored.row)
    return entry


def verify_receipt(bundle: Any, check_assertions: AssertionCheck) -> ReceiptVerdict:
    """Check a bundle without the ledger.

    Raises:
        InvalidRequest: it is not a receipt at all (not an object, another format).
    """
    if not isinstance(bundle, dict) or bundle.get("format") != FORMAT:
        raise InvalidRequest(f"not an undogate receipt (expected format {FORMAT})")
    job_id = bundle.get("job_id")
    segment = bundle.get("segment")
    passkeys = bundle.get("passkeys")
    problems: list[str] = []
    extra = sorted(set(bundle) - {"format", "job_id", "jobs", "segment", "passkeys"})
    if extra:
        problems.append(f"the receipt carries fields no receipt has: {', '.join(extra)}")
    if not isinstance(job_id, str) or not isinstance(segment, list) or not segment:
        raise InvalidRequest("the receipt names no job or carries no events")
    if not isinstance(passkeys, dict):
        problems.append("the receipt's passkeys are not an object")
        passkeys = {}
    listed = bundle.get("jobs")
    # A rewind plan's receipt: its own rows (outside any job, on its id) and its jobs'.
    plan_jobs = {str(j) for j in listed} if isinstance(listed, list) else None

    def owned(row: ChainedRow) -> bool:
        if plan_jobs is None:
            return row.job_id == job_id
        return _of_plan(row, str(job_id), plan_jobs)

    own: list[ChainedRow] = []
    first_prev = str(segment[0].get("prev_hash")) if isinstance(segment[0], dict) else ""
    prev = first_prev
    for position, entry in enumerate(segment):
        try:
            stored, digest = _read_entry(entry)
        except (TypeError, ValueError, KeyError) as exc:
            problems.append(f"entry {position} of the segment is malformed ({exc})")
            break
        where = f"event {stored.id}"
        if not _HEX64.match(prev):
            problems.append(f"{where}: the hash before it is not a SHA-256")
            break
        if stored.row is not None:
            problem = link_problem(
                StoredLink(stored.id, stored.prev_hash, stored.hash, stored.row), prev
            )
            if not owned(stored.row):
                problem = problem or f"it belongs to job {stored.row.job_id}, not {job_id}"
            else:
                own.append(stored.row)
        elif (plan_jobs is None and stored.job_id == job_id) or stored.job_id in (plan_jobs or ()):
            problem = "it is one of the job's own events, shown only as a digest"
        elif stored.prev_hash != prev:
            problem = "its prev_hash does not match the hash of the entry before it"
        elif stored.hash != link(prev, stored.job_id, digest):
            problem = "its digest does not match its hash"
        else:
            problem = ""
        if problem:
            problems.append(f"{where}: {problem}")
            break
        prev = str(stored.hash)
    if not problems and plan_jobs is not None:
        listing = [r for r in own if r.operation in (PLANNED, CONFIRMED) and r.job_id is None]
        if not any(r.operation == PLANNED for r in listing) or _plan_jobs(listing) != plan_jobs:
            problems.append("the jobs the receipt lists are not the ones its plan's row lists")
    if not problems:
        problems.extend(check_assertions(own, passkeys))
    registrations = tuple(
        (str(name), str(entry.get("hash")))
        for name, entry in sorted(passkeys.items())
        if isinstance(entry, dict)
    )
    return ReceiptVerdict(job_id, len(own), first_prev, prev, tuple(problems), registrations)


@dataclass(frozen=True)
class _Entry:
    id: int
    prev_hash: str
    hash: str
    job_id: str | None
    row: ChainedRow | None


def _read_entry(entry: Any) -> tuple[_Entry, str]:
    if not isinstance(entry, dict):
        raise TypeError("not an object")
    ident, prev, own = entry["id"], entry["prev_hash"], entry["hash"]
    if not isinstance(ident, int) or not isinstance(prev, str) or not isinstance(own, str):
        raise TypeError("id, prev_hash and hash must be a number and two strings")
    event = entry.get("event")
    if event is not None:
        if set(entry) != {"id", "prev_hash", "hash", "event"} or set(event) != set(_ROW_FIELDS):
            raise ValueError("an event entry carries other fields than a chain row's")
        row = ChainedRow(**{name: event[name] for name in _ROW_FIELDS})
        if not isinstance(row.at, float):
            raise TypeError("the event's time is not a number")
        return _Entry(ident, prev, own, row.job_id, row), ""
    if set(entry) != {"id", "prev_hash", "hash", "job_id", "body_digest"}:
        raise ValueError("a digest entry carries other fields than id, links, job and digest")
    digest = entry["body_digest"]
    if not isinstance(digest, str) or not _HEX64.match(digest):
        raise ValueError("body_digest is not a SHA-256")
    return _Entry(ident, prev, own, entry["job_id"], None), digest


__all__ = [
    "FORMAT",
    "AssertionCheck",
    "ReceiptVerdict",
    "export_receipt",
    "passkeys_for",
    "verify_receipt",
]
