"""Fair shares: quotas of unresolved jobs, and a prepare rate, per agent and per owner.

The ledger-wide limits (``max_jobs``, ``max_receipt_bytes``) protect the disk; they do
not stop one agent from using them all up, after which every other owner's agents are
refused too. Two checks stand in front of every new job (docs/limits.md):

- **Quotas of unresolved jobs** (``jobs.UNRESOLVED_STATES``): per agent, where an agent is
  one agent id as one owner's tokens speak for it (another owner's tokens for the same id
  have their own share), and per owner, over all its agents. The binding count runs
  inside the write transaction that inserts the job, so concurrent prepares can never
  overshoot; the partial index ``jobs_unresolved`` keeps it to that owner's unresolved
  jobs, however long the history.
- **A prepare rate per agent**: a token bucket held in each process (so N processes
  allow an agent up to N times the rate); it starts full again at a restart.

Both are checked after the idempotency lookup: a replay creates nothing, so it costs
nothing and is never refused by either.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..config import Limits
from ..errors import QuotaExceeded, RateLimited
from ..ledger import Reader


@dataclass
class _Bucket:
    tokens: float
    at: float


class PrepareRate:
    """One token bucket per (owner, agent): ``burst`` prepares at once, then
    ``per_minute`` a minute. A refusal takes no token.

    Buckets are kept per authenticated pair of an owner and a configured agent, so their
    number is bounded by the credentials an operator issued.
    """

    def __init__(
        self, per_minute: int, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_minute = per_minute
        self.burst = burst
        self._per_second = per_minute / 60.0
        self._clock = clock
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, owner_id: str, agent_id: str) -> None:
        """Take one prepare from the agent's bucket.

        Raises:
            RateLimited: the bucket is empty; ``retry_after_s`` says when it holds one.
        """
        with self._lock:
            now = self._clock()
            bucket = self._buckets.get((owner_id, agent_id))
            if bucket is None:
                bucket = self._buckets[(owner_id, agent_id)] = _Bucket(self.burst, now)
            elapsed = max(0.0, now - bucket.at)
            bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self._per_second)
            bucket.at = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return
            wait = max(1, math.ceil((1.0 - bucket.tokens) / self._per_second))
        raise RateLimited(
            f"agent {agent_id!r} is preparing faster than its rate of {self.per_minute} a "
            f"minute (bursts of {self.burst}); nothing was prepared. Try again in {wait} s",
            retry_after_s=wait,
            limit="max_prepares_per_minute",
            maximum=self.per_minute,
        )


class PrepareQuotas:
    """The fair-share checks of ``operations.prepare.prepare_job``."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.rate = PrepareRate(limits.max_prepares_per_minute, limits.prepare_burst, clock)

    def check_unresolved(self, tx: Reader, owner_id: str, agent_id: str) -> None:
        """Refuse a new job when the agent's or the owner's unresolved jobs fill a quota,
        as of what ``tx`` reads (a pre-check: the binding one is ``refuse_over`` on the
        counts ``Transaction.admit_job`` takes in the write that inserts the job).

        Raises:
            QuotaExceeded: naming the quota (``limit``) and its size (``maximum``).
        """
        limits = self.limits
        self.refuse_over(
            agent_id,
            tx.count_unresolved(owner_id, agent_id, stop_at=limits.max_unresolved_jobs_per_agent),
            tx.count_unresolved(owner_id, None, stop_at=limits.max_unresolved_jobs_per_owner),
        )

    def refuse_over(self, agent_id: str, agent_held: int, owner_held: int) -> None:
        """Refuse a new job when the agent already holds its quota of unresolved jobs,
        or the owner's agents together hold theirs (counts without the new job).

        Raises:
            QuotaExceeded: naming the quota (``limit``) and its size (``maximum``).
        """
        per_agent = self.limits.max_unresolved_jobs_per_agent
        if agent_held >= per_agent:
            raise QuotaExceeded(
                f"agent {agent_id!r} already holds {per_agent} unresolved jobs, its quota; "
                "nothing was prepared. A person has to review its jobs (apply or reject "
                "them) before it can prepare more",
                limit="max_unresolved_jobs_per_agent",
                maximum=per_agent,
            )
        per_owner = self.limits.max_unresolved_jobs_per_owner
        if owner_held >= per_owner:
            raise QuotaExceeded(
                f"the owner's agents together already hold {per_owner} unresolved jobs, the "
                "owner's quota; nothing was prepared. A person has to review jobs (apply or "
                "reject them) before any of the owner's agents can prepare more",
                limit="max_unresolved_jobs_per_owner",
                maximum=per_owner,
            )


__all__ = ["PrepareQuotas", "PrepareRate"]
