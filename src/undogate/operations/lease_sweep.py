"""On a shared ledger, every process keeps settling the work of processes that died
(SPEC §13): a thread that runs ``recovery.settle_expired`` every few seconds.

A process whose lease expired (killed, partitioned from the database, stalled) left its
writes in flight ``dispatching``; they hold their fields like a quarantine until a live
process settles them as ``uncertain`` (then a reviewer reconciles them through any
process). Every process sweeps: whichever ends an expired lease first settles its work,
the others skip it (``end_expired_leases`` claims each lease once).
"""

from __future__ import annotations

import logging
import threading

from ..errors import LedgerError
from ..ledger import Store
from .recovery import LiveDispatches, settle_expired

log = logging.getLogger(__name__)


class ExpiredLeaseSweep:
    """Run ``settle_expired`` every ``every_s`` seconds until ``stop``."""

    def __init__(self, ledger: Store, live: LiveDispatches, every_s: float) -> None:
        self._ledger = ledger
        self._live = live
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="undogate-sweep", daemon=True)

    def start(self) -> ExpiredLeaseSweep:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def sweep(self) -> dict[str, int]:
        """One sweep now; returns what it settled, counted.

        Raises: LedgerError when the ledger cannot record it."""
        counts = settle_expired(self._ledger, self._live.jobs, self._live.notifier)
        if counts["uncertain"] or counts["settled"]:
            log.warning(
                "settled the work of a gateway process whose lease expired: %d write(s) now "
                "uncertain (quarantined until a reviewer reconciles them), %d job(s) settled",
                counts["uncertain"],
                counts["settled"],
            )
        return counts

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.sweep()
            except LedgerError as exc:
                log.warning("could not settle expired leases (%s); trying again", exc.message)
