"""``serve --workers``: the directory where the workers keep their counters, made by the
supervisor for its workers alone, tidied when one dies, and removed at the end."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from prometheus_client.multiprocess import mark_process_dead

from .exposition import MULTIPROCESS_ENV


def new_counter_dir() -> Path:
    """A fresh private directory (0700) for one supervisor's workers: counters from an
    earlier run never mix in."""
    return Path(tempfile.mkdtemp(prefix="undogate-metrics-"))


def forget_worker(counter_dir: Path, pid: int) -> None:
    """A worker died: it no longer counts among the live processes. Its counters stay
    (a total that went down would read as a reset)."""
    mark_process_dead(pid, str(counter_dir))  # type: ignore[no-untyped-call]


def remove_counter_dir(counter_dir: Path) -> None:
    shutil.rmtree(counter_dir, ignore_errors=True)


__all__ = ["MULTIPROCESS_ENV", "forget_worker", "new_counter_dir", "remove_counter_dir"]
