"""One scrape in the Prometheus text format: the processes' counters (this one's, or,
under ``serve --workers``, every worker's from the shared directory, summed) and the
figures the ledger shows now."""

from __future__ import annotations

import os
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector

from ..ledger import OperatingFigures
from .counters import LOCAL

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"


class _Figures:
    """The ledger's figures as gauges (read by whichever process is scraped: summing
    them over workers would count the one ledger several times)."""

    def __init__(self, figures: OperatingFigures) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        f = self.figures
        yield GaugeMetricFamily(
            "undogate_uncertain_changes",
            "Changes whose write's outcome is uncertain (each quarantines its fields "
            "until a reviewer reconciles it)",
            value=f.uncertain_changes,
        )
        yield GaugeMetricFamily(
            "undogate_quarantined_resources",
            "Resources that hold at least one uncertain change",
            value=f.quarantined_resources,
        )
        yield GaugeMetricFamily(
            "undogate_writes_in_flight",
            "External writes sent or about to be sent whose outcome is not recorded yet",
            value=f.writes_in_flight,
        )
        yield GaugeMetricFamily(
            "undogate_webhook_outbox_pending",
            "Webhook messages waiting to be delivered",
            value=f.webhooks_pending,
        )
        yield GaugeMetricFamily(
            "undogate_webhook_outbox_oldest_seconds",
            "How long the oldest pending webhook message has waited (0: none pending)",
            value=f.oldest_webhook_s,
        )
        leases = GaugeMetricFamily(
            "undogate_lease_age_seconds",
            "Seconds since each gateway process last renewed its lease on the ledger",
            labels=["lease", "holder"],
        )
        for lease in f.leases:
            leases.add_metric([lease.id, lease.holder], lease.renewed_s_ago)
        yield leases


class _Counted:
    """This process's counters and histograms, or every worker's (from their files)."""

    def collect(self) -> Iterator[Metric]:
        if os.environ.get(MULTIPROCESS_ENV):
            yield from MultiProcessCollector(None).collect()  # type: ignore[no-untyped-call]
        else:
            yield from LOCAL.collect()


def exposition(figures: OperatingFigures, accept: str) -> tuple[bytes, str]:
    """The scrape's body and its content type, in the format ``accept`` (the request's
    Accept header) prefers: OpenMetrics for Prometheus itself, else the text format."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_Counted())
    registry.register(_Figures(figures))
    encode, content_type = choose_encoder(accept)
    return encode(registry), content_type


__all__ = ["MULTIPROCESS_ENV", "exposition"]
