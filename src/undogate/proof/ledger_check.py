"""``undogate ledger verify``: recompute the whole chain from the stored rows, then hold
the rows the gateway acts on to it, and name the first row that does not match."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..chain import GENESIS, row_hash
from ..ledger.chain_source import ChainSource
from ..ledger.sql_chain import StoredLink
from .assertions import Approvals
from .vouched_rows import ChainedRecords


@dataclass(frozen=True)
class ChainVerdict:
    """The outcome of one walk: ``bad_row`` (an event's id) or ``record`` (another row,
    named: ``job job_…``, ``credential op_…``) says what did not match."""

    rows: int
    head: str
    bad_row: int | None = None
    reason: str = ""
    record: str = ""

    @property
    def ok(self) -> bool:
        return self.bad_row is None and not self.record

    @property
    def where(self) -> str:
        """The row that did not match, as a person reads it."""
        return self.record or f"event {self.bad_row}"


def check_links(
    links: Iterable[StoredLink], *, start: str = GENESIS, records: ChainedRecords | None = None
) -> ChainVerdict:
    """Walk ``links`` in order from ``start``: each row must name the hash before it
    and carry the hash of its own content after it, and each passkey approval must
    verify against the passkey registered before it. ``records`` gathers, from the
    rows that verified, what the rows outside the chain are held to."""
    expected_prev = start
    rows = 0
    approvals = Approvals()
    for stored in links:
        rows += 1
        problem = link_problem(stored, expected_prev) or approvals.problem(stored.row)
        if problem:
            return ChainVerdict(rows=rows, head=expected_prev, bad_row=stored.id, reason=problem)
        if records is not None:
            records.see(stored.row)
        assert stored.hash is not None
        expected_prev = stored.hash
    return ChainVerdict(rows=rows, head=expected_prev)


def verify_ledger(source: ChainSource) -> ChainVerdict:
    """The whole chain of one ledger snapshot, every row of it whatever its id: every
    link and every passkey approval, in one walk; then, where the ledger counts the ids
    it issued, that its last rows are all there; then every job, change, credential and
    endpoint check against what the chain recorded of it (``vouched_rows``)."""
    records = ChainedRecords()
    verdict = check_links(source.links(), records=records)
    if not verdict.ok:
        return verdict
    issued = source.issued
    if issued and next(source.links(from_id=issued), None) is None:
        return replace(
            verdict,
            bad_row=issued,
            reason=(
                f"the ledger issued event ids up to {issued}, and its last rows are gone: "
                "rows at the end of the chain were deleted"
            ),
        )
    found = records.problem(source)
    if found is not None:
        return replace(verdict, record=found[0], reason=found[1])
    return verdict


def link_problem(stored: StoredLink, expected_prev: str) -> str:
    """Why ``stored`` does not follow a row whose hash is ``expected_prev`` ("" if it does)."""
    if stored.id <= 0:
        return (
            "its id is not one the ledger issues (they start at 1): the row was inserted "
            "behind the ledger"
        )
    if stored.prev_hash != expected_prev:
        return (
            "its prev_hash does not match the hash of the row before it: a row before it "
            "was deleted, inserted or reordered, or this row's link was edited"
        )
    if stored.hash != row_hash(expected_prev, stored.row):
        return "its content does not match its hash: the row was edited"
    return ""


__all__ = ["ChainVerdict", "check_links", "link_problem", "verify_ledger"]
