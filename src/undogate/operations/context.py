"""What every operation works with: the config, the ledger, the wire, the clock, and the
test-only crash hook (``UNDOGATE_CRASH_AT``, docs/recovery.md) that the dispatch loop fires
at each of ``CRASH_POINTS``."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..adapters import Snapshot, Wire, adapter_for
from ..config import Config, Resource
from ..errors import NotFound
from ..jobs import Change, Job, Operation
from ..ledger import Store
from ..net import PinnedClient
from ..webhooks.events import Notifier
from .quotas import PrepareQuotas
from .recovery import LiveDispatches

CRASH_POINTS = ("after_intent", "after_send", "after_response", "after_readback", "after_outcome")
CRASH_ENV = "UNDOGATE_CRASH_AT"


def crash_point_from_env(environ: Mapping[str, str]) -> str | None:
    """The crash hook a process was started with (``UNDOGATE_CRASH_AT=apply:after_intent``);
    unset, it is inert."""
    return environ.get(CRASH_ENV) or None


@dataclass
class Context:
    """The gateway's parts, as the operations use them: every operation takes one."""

    config: Config
    ledger: Store
    http: PinnedClient
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    clock: Callable[[], float] = time.time
    crash_at: str | None = None
    wire: Wire = field(init=False)
    live: LiveDispatches = field(init=False)
    quotas: PrepareQuotas = field(init=False)
    notifier: Notifier = field(init=False)

    def __post_init__(self) -> None:
        self.wire = Wire(self.http, self.config.limits, self.environ)
        self.notifier = Notifier(self.config.webhooks, self.config.server.public_url, self.clock)
        self.live = LiveDispatches(self.ledger, self.notifier)
        self.quotas = PrepareQuotas(self.config.limits)

    def resource(self, resource_id: str) -> Resource:
        res = self.config.resource(resource_id)
        if res is None:
            raise NotFound(f"unknown resource {resource_id!r}", resource=resource_id)
        return res

    def read_change(self, change: Change, deadline: float | None) -> Snapshot:
        """What ``change``'s resource shows now, read the way its kind reads a change.

        Raises: NotFound, RemoteUnavailable, RemoteContractBreach, MissingToken,
        BlockedAddress."""
        res = self.resource(change.resource_id)
        return adapter_for(change.kind).read_change(self.wire, res, change, deadline)

    def deadline(self) -> float:
        return time.monotonic() + self.config.server.operation_timeout_s

    def get_job(self, owner_id: str, job_id: str) -> Job:
        """The job, if ``owner_id`` owns it; otherwise ``NotFound`` (never ``Forbidden``,
        so ids of other owners' jobs reveal nothing).

        Raises: NotFound; LedgerError while a write whose outcome could not be recorded
        cannot be settled yet (nothing moves a job on a ledger that cannot record it)."""
        self.live.settle()
        job = self.ledger.load_job(job_id)
        if job is None or job.owner_id != owner_id:
            raise NotFound(f"no job {job_id!r}", job=job_id)
        return job

    def crash_point(self, operation: Operation, point: str) -> None:
        """Crash-injection hook for the recovery harness; inert unless ``crash_at`` is set
        (from ``UNDOGATE_CRASH_AT=operation:point``). It kills this very process."""
        if self.crash_at is not None and self.crash_at == f"{operation.value}:{point}":
            os.kill(os.getpid(), signal.SIGKILL)
