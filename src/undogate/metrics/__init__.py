"""What operators watch: each process counts its prepares and confirms (``counters``),
and a scrape adds what the ledger shows now (``exposition``), in the Prometheus text
format. Under ``serve --workers`` the processes share a directory of counter files
(``multiprocess``), which any of them sums when scraped. docs/operating.md shows how
to scrape it."""

from .counters import Watch, serving, watching_confirm, watching_prepare
from .exposition import exposition

__all__ = ["Watch", "exposition", "serving", "watching_confirm", "watching_prepare"]
