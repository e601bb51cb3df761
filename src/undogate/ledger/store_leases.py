"""The leases' part of the store protocol (``store.Reader`` and ``store.Transaction``
include it; ``sql_leases.LeaseVerbs`` speaks it on both engines). Several processes
share one ledger, each under a lease (docs/scaling.md): the jobs it runs and the writes
it has in flight name it, and only once it ended are they settled by another process.
"""

from __future__ import annotations

from typing import Protocol

from .records import Answer


class LeaseReader(Protocol):
    """What a read may ask of the leases."""

    def job_runners(self) -> dict[str, str | None]:
        """Each job ``applying`` or ``undoing`` -> the lease of the process running it
        (None: no lease, a SQLite ledger)."""
        ...

    @property
    def own_lease(self) -> str | None:
        """The lease of this process (None: a store opened without one)."""
        ...

    def open_leases(self) -> frozenset[str]:
        """The leases not ended (this process's own among them). One that expired stays
        open until a write ends it (``end_expired_leases``): its work is settled then,
        in that write, and by nobody else."""
        ...

    def runner_lease_expiry(self, job_id: str) -> float | None:
        """When the lease of the process running ``job_id`` (``applying`` or
        ``undoing``) expires, by the ledger's clock, in seconds since the epoch. None: the
        job is not running, or its process holds no open lease."""
        ...


class LeaseWriter(Protocol):
    """What a write may do with the leases."""

    def holds_job(self, job_id: str) -> Answer[bool]:
        """Whether the job is still ``applying`` or ``undoing`` under this process's
        lease (its row held to the commit): False once recovery elsewhere settled it."""
        ...

    def end_expired_leases(self) -> list[str]:
        """End every lease that expired and that no other write is ending now, except
        this process's own (it is alive: it is asking); returns their ids (their work is
        then recovery's)."""
        ...
