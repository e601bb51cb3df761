"""The counters and latency histograms of one gateway process.

Prepares and confirms are counted where the operations run (``operations.prepare``,
``operations.confirm``), so every surface (the API, ``/mcp``, the review pages) counts
alike. An outcome is what the caller was told: ``prepared`` or ``replayed`` for a
prepare; for a confirm the job's state after it (``applied``, ``undone``,
``needs_review``, ...), ``dry_run`` or ``repeated``; otherwise the refusal's stable
code (``quota_exceeded``, ``preview_expired``, ...), or ``internal_error``.

With ``PROMETHEUS_MULTIPROC_DIR`` set (``serve --workers`` sets it for its workers)
prometheus_client keeps these values in files there, which a scrape of any worker sums.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..errors import UndogateError

#: This process's own metrics (a scrape in multi-process mode reads the files instead).
LOCAL = CollectorRegistry(auto_describe=True)
# From a fast prepare to a confirm that waits on slow remotes (http_timeout_s: 45 s).
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

PREPARES = Counter(
    "undogate_prepares",
    "Prepares by outcome: prepared, replayed (an idempotency key's earlier job), or the "
    "refusal's code",
    ["outcome"],
    registry=LOCAL,
)
PREPARE_SECONDS = Histogram(
    "undogate_prepare_seconds", "How long a prepare took", buckets=_BUCKETS, registry=LOCAL
)
CONFIRMS = Counter(
    "undogate_confirms",
    "Confirms by operation (apply, undo, accept_observed; unknown when the preview token "
    "matched nothing) and outcome (the job's state after it, dry_run, repeated, or the "
    "refusal's code)",
    ["operation", "outcome"],
    registry=LOCAL,
)
CONFIRM_SECONDS = Histogram(
    "undogate_confirm_seconds",
    "How long a confirm took, by operation",
    ["operation"],
    buckets=_BUCKETS,
    registry=LOCAL,
)
PROCESSES = Gauge(
    "undogate_processes",
    "Gateway processes serving (summed over the live workers of serve --workers)",
    multiprocess_mode="livesum",
    registry=LOCAL,
)


@dataclass
class Watch:
    """What one watched call says about itself before it returns."""

    operation: str = "unknown"
    outcome: str = "internal_error"


@contextmanager
def _watched(count: Callable[[Watch, float], None]) -> Iterator[Watch]:
    watch = Watch()
    started = time.perf_counter()
    try:
        yield watch
    except UndogateError as exc:
        watch.outcome = exc.code
        raise
    finally:
        count(watch, time.perf_counter() - started)


def _count_prepare(watch: Watch, seconds: float) -> None:
    PREPARE_SECONDS.observe(seconds)
    PREPARES.labels(watch.outcome).inc()


def _count_confirm(watch: Watch, seconds: float) -> None:
    CONFIRM_SECONDS.labels(watch.operation).observe(seconds)
    CONFIRMS.labels(watch.operation, watch.outcome).inc()


def watching_prepare() -> AbstractContextManager[Watch]:
    """Count one prepare and time it; the caller sets ``outcome`` on success."""
    return _watched(_count_prepare)


def watching_confirm() -> AbstractContextManager[Watch]:
    """Count one confirm and time it; the caller sets ``operation`` once known and
    ``outcome`` on success."""
    return _watched(_count_confirm)


def serving() -> None:
    """This process serves: it counts in ``undogate_processes`` while it lives."""
    PROCESSES.set(1)


__all__ = ["LOCAL", "Watch", "serving", "watching_confirm", "watching_prepare"]
