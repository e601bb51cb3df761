"""``undogate ledger verify``: recompute the whole chain from the stored rows and name
the first row that does not match."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..ledger.chain_source import ChainSource
from ..ledger.hash_chain import GENESIS, row_hash
from ..ledger.sql_chain import StoredLink
from .assertions import Approvals


@dataclass(frozen=True)
class ChainVerdict:
    """The outcome of one walk: ``bad_row`` is None when every row matched."""

    rows: int
    head: str
    bad_row: int | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.bad_row is None


def check_links(links: Iterable[StoredLink], *, start: str = GENESIS) -> ChainVerdict:
    """Walk ``links`` in order from ``start``: each row must name the hash before it
    and carry the hash of its own content after it, and each passkey approval must
    verify against the passkey registered before it."""
    expected_prev = start
    rows = 0
    approvals = Approvals()
    for stored in links:
        rows += 1
        problem = link_problem(stored, expected_prev) or approvals.problem(stored.row)
        if problem:
            return ChainVerdict(rows=rows, head=expected_prev, bad_row=stored.id, reason=problem)
        assert stored.hash is not None
        expected_prev = stored.hash
    return ChainVerdict(rows=rows, head=expected_prev)


def verify_ledger(source: ChainSource) -> ChainVerdict:
    """The whole chain of one ledger snapshot: every link and every passkey approval,
    in one walk; then, where the ledger counts the ids it issued, that its last rows
    are all there."""
    verdict = check_links(source.links())
    issued = source.issued
    if verdict.ok and issued and next(source.links(from_id=issued), None) is None:
        return ChainVerdict(
            rows=verdict.rows,
            head=verdict.head,
            bad_row=issued,
            reason=(
                f"the ledger issued event ids up to {issued}, and its last rows are gone: "
                "rows at the end of the chain were deleted"
            ),
        )
    return verdict


def link_problem(stored: StoredLink, expected_prev: str) -> str:
    """Why ``stored`` does not follow a row whose hash is ``expected_prev`` ("" if it does)."""
    if stored.prev_hash != expected_prev:
        return (
            "its prev_hash does not match the hash of the row before it: a row before it "
            "was deleted, inserted or reordered, or this row's link was edited"
        )
    if stored.hash != row_hash(expected_prev, stored.row):
        return "its content does not match its hash: the row was edited"
    return ""


__all__ = ["ChainVerdict", "check_links", "link_problem", "verify_ledger"]
