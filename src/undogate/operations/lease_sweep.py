"""Every process keeps settling the work of processes that died (docs/scaling.md), and
its own that the ledger could not record: a thread that runs ``recovery.settle_expired``
every few seconds, and ``LiveDispatches.settle`` as soon as the ledger answers again.

A process whose lease expired (killed, cut off from the ledger, stalled) left its
writes in flight ``dispatching``; they hold their fields like a quarantine until a live
process settles them as ``uncertain`` (then a reviewer reconciles them through any
process). Every process sweeps: whichever ends an expired lease first settles its work,
the others skip it (``end_expired_leases`` claims each lease once).

A write this process sent while the database went away stays ``dispatching`` too (its
outcome could not be committed). The confirm that sent it wakes this thread, which tries
to settle it every ``RETRY_S`` until the ledger answers, then moves the job to
``needs_review`` and announces it, with no request needed.
"""

from __future__ import annotations

import logging
import threading

from ..errors import LedgerError
from ..ledger import Store
from .recovery import LiveDispatches, settle_expired

log = logging.getLogger(__name__)


#: How often this process tries again to settle its own unrecorded work.
RETRY_S = 1.0


class ExpiredLeaseSweep:
    """Run ``settle_expired`` every ``every_s`` seconds until ``stop``, and this
    process's own unsettled work every ``RETRY_S`` while there is some."""

    def __init__(self, ledger: Store, live: LiveDispatches, every_s: float) -> None:
        self._ledger = ledger
        self._live = live
        self._every_s = every_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="undogate-sweep", daemon=True)

    def start(self) -> ExpiredLeaseSweep:
        self._live.on_unsettled = self._wake.set
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        self._live.on_unsettled = None

    def sweep(self) -> dict[str, int]:
        """One sweep now (this process's own unsettled work first); returns what it
        settled of processes whose lease expired, counted.

        Raises: LedgerError when the ledger cannot record it."""
        self._live.settle()
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
        while True:
            self._wake.wait(RETRY_S if self._live.unsettled else self._every_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.sweep()
            except LedgerError as exc:
                log.warning("could not settle unfinished work (%s); trying again", exc.message)
