"""The second half of ``undogate ledger verify``: the rows outside the chain that the
gateway acts on, held to what the chain recorded of them (``seals``): every job's state
and changes, every credential, every endpoint check.

The walk of the chain feeds each row to ``ChainedRecords.see``, which keeps only what
these checks compare (a job's last state, its prepare event's seals, each endpoint
check's event); ``problem`` then reads the tables once each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..chain import ChainedRow
from ..chain.seals import (
    ENDPOINT_CHECKED,
    changes_problem,
    check_problem,
    credential_problem,
    state_problem,
)
from ..jobs import JOB_MOVES
from ..jsonvalue import JsonObject, JsonValue, loads_object
from ..ledger.chain_source import ChainSource


@dataclass
class ChainedRecords:
    """What the chain says of the rows outside it, gathered in one walk."""

    states: dict[str, str] = field(default_factory=dict)  # job -> last state moved to
    seals: dict[str, JsonValue] = field(default_factory=dict)  # job -> its prepare's seals
    checks: dict[tuple[str, str], JsonObject] = field(default_factory=dict)

    def see(self, row: ChainedRow) -> None:
        if row.job_id is not None and row.operation in JOB_MOVES and row.to_state is not None:
            self.states[row.job_id] = row.to_state
        if row.job_id is not None and row.operation == "prepare":
            self.seals.setdefault(row.job_id, _detail(row).get("seals"))
        elif row.job_id is None and row.operation == ENDPOINT_CHECKED and row.target:
            detail = _detail(row)
            self.checks[(row.target, str(detail.get("check")))] = detail

    def problem(self, source: ChainSource) -> tuple[str, str] | None:
        """The first row that disagrees with the chain: (which row, why), or None."""
        for job_id, state in source.job_states():
            problem = state_problem(state, self.states.get(job_id))
            if problem:
                return f"job {job_id}", problem
        seen: set[str] = set()
        for job_id, changes in source.changes():
            seen.add(job_id)
            problem = changes_problem(changes, self.seals.get(job_id))
            if problem:
                return f"job {job_id}", problem
        for job_id, seals in self.seals.items():
            if job_id not in seen and seals:
                return f"job {job_id}", changes_problem([], seals)
        for credential in source.credentials():
            problem = credential_problem(credential, credential.issued, credential.revoked_in_chain)
            if problem:
                return f"credential {credential.id}", problem
        for check_id, resource_id, passed, evidence in source.endpoint_checks():
            chained = self.checks.get((resource_id, str(check_id)))
            problem = check_problem(passed=passed, evidence=evidence, chained=chained)
            if problem:
                return f"endpoint check {check_id}", problem
        return None


def _detail(row: ChainedRow) -> JsonObject:
    try:
        return loads_object(row.detail) if row.detail else {}
    except ValueError:  # not JSON: the chain vouches for the text, a seal is not in it
        return {}


__all__ = ["ChainedRecords"]
