"""What an endpoint check records of each step, and what a kind's check hands back.

A probe that got an answer returns a ``Step`` (passed or not); a failure that leaves the
copy's state unknown (no answer, an unreadable copy) raises ``StepFailed``. Evidence is
digests, counts, statuses and outcomes, never values: it goes to the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ...errors import UndogateError
from ...net import TransportFailure

# What the endpoint check records of a step: digests, counts, statuses, never values.
Evidence = dict[str, bool | int | str]

# Every value a check writes starts so: a person who finds one knows where it came from.
MARKER_PREFIX = "undogate-check-"


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
    """The failed step ``name``, from the error that ended it."""
    if isinstance(exc, TransportFailure):
        return Step(name, False, "no HTTP answer", {"error": "transport"}, exc.reason)
    evidence: Evidence = {"error": exc.code}
    status = exc.details.get("status")
    if isinstance(status, int):
        evidence["status"] = status
    return Step(name, False, f"refused: {exc.code}", evidence, exc.message)


@dataclass(frozen=True)
class CheckRun:
    """A kind's endpoint check, run: every step in order, and its verdict."""

    steps: tuple[Step, ...]
    passed: bool
    required: tuple[str, ...]  # every step a passing check has, in order
    titles: Mapping[str, str]  # step name -> what the step checks, for the report
    # What it verified of the undos offered only once verified (docs/collections.md); empty unless
    # it passed.
    undos: tuple[str, ...] = ()
    # The statuses with which the endpoint refused a stale write and changed nothing:
    # the evidence that lets such an answer count as a refusal (docs/remote-contract.md).
    stale_statuses: tuple[int, ...] = ()
    # How the kind writes the copy, where it can write in more than one way (the verdict
    # names it).
    mode: str | None = None


__all__ = ["MARKER_PREFIX", "CheckRun", "Evidence", "Step", "StepFailed", "error_step"]
