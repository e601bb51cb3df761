"""``undogate serve --workers N``: N ``serve`` processes on one listening socket.

The parent binds the socket (so a port in use is refused before anything starts), then
runs N children, each a whole ``undogate serve`` with its own ledger pool and its own
lease on the shared ledger, accepting from the socket they inherited: the
kernel hands each connection to one of them. The parent only supervises: it forwards
SIGTERM and SIGINT, replaces a child that dies (its writes in flight become uncertain
when its lease expires, settled by the others), and stops everything when a child
refuses to start (a config or ledger problem every child would hit).

Each child's lines reach the parent's stderr labelled ``worker N (pid P):``, so an
operator can tell whose they are (JSON lines pass as they are: each names its ``pid``);
the parent says "serving" once every worker has said it is (not when it has merely
started them).

The workers count in one directory of their own (``PROMETHEUS_MULTIPROC_DIR``, made here
and removed at the end), which a scrape of any of them sums; a worker that dies stops
counting among the live processes. The ``--metrics-bind`` socket, if any, is bound here
and shared like the port.

On a SQLite ledger the workers share its file (on this machine's local disk); on
PostgreSQL, its database.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from ..config import load_config
from ..metrics.multiprocess import (
    MULTIPROCESS_ENV,
    forget_worker,
    new_counter_dir,
    remove_counter_dir,
)
from .operating import PLAIN, Watching
from .serve import Echo, listen, require_config_file

#: A child that exits with an error sooner than this after its start failed to start.
STARTUP_S = 10.0
MAX_WORKERS = 64


def serve_workers(
    config_path: Path,
    host: str,
    port: int,
    workers: int,
    echo: Echo,
    watching: Watching = PLAIN,
) -> int:
    """Run ``workers`` serve processes until SIGTERM or SIGINT; returns the exit status.
    They log and serve metrics as ``watching`` says.

    Raises:
        ConfigError, InvalidRequest (the port is in use; a worker count out of range).
    """
    require_config_file(config_path)
    load_config(config_path)  # a bad config is refused once, before any worker starts
    sock = listen(host, port)
    metrics_sock = listen(*watching.metrics_bind) if watching.metrics_bind else None
    counter_dir = new_counter_dir()
    try:
        supervisor = _Supervisor(config_path, sock.fileno(), workers, echo, host, port)
        supervisor.watched(watching, metrics_sock, counter_dir)
        return supervisor.run()
    finally:
        sock.close()
        if metrics_sock is not None:
            metrics_sock.close()
        remove_counter_dir(counter_dir)


class _Supervisor:
    def __init__(
        self, config_path: Path, fd: int, workers: int, echo: Echo, host: str, port: int
    ) -> None:
        self.command = [
            sys.executable,
            "-m",
            "undogate.cli",
            "serve",
            "--config",
            str(config_path),
            "--host",
            host,
            "--port",
            str(port),
            "--listen-fd",
            str(fd),
        ]
        self.fd = fd
        self.address = f"{host}:{port}"
        self.workers = workers
        self.echo = echo
        self.children: dict[int, tuple[subprocess.Popen[str], float]] = {}
        self.stopping = False
        self.serving: set[int] = set()  # the slots whose worker said it is serving
        self.lock = threading.Lock()
        self.pass_fds: tuple[int, ...] = (fd,)
        self.env = dict(os.environ)
        self.counter_dir: Path | None = None
        self.json_lines = False

    def watched(
        self, watching: Watching, metrics_sock: socket.socket | None, counter_dir: Path
    ) -> None:
        """The workers log as ``watching`` says, share the metrics socket, and count in
        ``counter_dir``."""
        metrics_fd = metrics_sock.fileno() if metrics_sock is not None else None
        self.command += watching.worker_arguments(metrics_fd)
        if metrics_fd is not None:
            self.pass_fds += (metrics_fd,)
        self.env[MULTIPROCESS_ENV] = str(counter_dir)
        self.counter_dir = counter_dir
        self.json_lines = watching.log_format == "json"

    def _start_one(self, slot: int) -> None:
        child = subprocess.Popen(  # noqa: S603
            self.command,
            pass_fds=self.pass_fds,
            env=self.env,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        self.children[slot] = (child, time.monotonic())
        threading.Thread(target=self._relay, args=(slot, child), daemon=True).start()

    def _relay(self, slot: int, child: subprocess.Popen[str]) -> None:
        """The worker's stderr, line by line, labelled with its slot and pid."""
        assert child.stderr is not None
        for line in child.stderr:
            if self.json_lines:
                sys.stderr.write(line)  # one JSON object, its pid in it: passed as it is
                said = _message(line)
            else:
                self.echo(f"worker {slot + 1} (pid {child.pid}): {line.rstrip()}")
                said = line
            if said.startswith("undogate serving "):
                with self.lock:
                    self.serving.add(slot)
        child.stderr.close()

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        status = 0
        try:
            for slot in range(self.workers):
                self._start_one(slot)
            announced = False
            while not self.stopping:
                with self.lock:
                    if not announced and len(self.serving) == self.workers:
                        announced = True
                        self.echo(
                            f"undogate serving http://{self.address} with "
                            f"{self.workers} worker processes (pids "
                            f"{', '.join(str(c.pid) for c, _ in self.children.values())})"
                        )
                status = self._watch()
                if status:
                    break
                time.sleep(0.2)
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return status

    def _watch(self) -> int:
        """Restart a worker that died after its start; non-zero: one failed to start."""
        for slot, (child, started) in list(self.children.items()):
            code = child.poll()
            if code is None or self.stopping:
                continue
            # A refusal at start (a config or ledger problem) would refuse every worker
            # again; a worker killed by a signal, or failing later, is replaced.
            if code > 0 and time.monotonic() - started < STARTUP_S:
                self.echo(f"error: worker {child.pid} failed at start (exit {code}); stopping")
                return code
            self.echo(
                f"warning: worker {child.pid} exited ({code}); starting another (its writes "
                "in flight become uncertain once its lease expires)"
            )
            if self.counter_dir is not None:
                forget_worker(self.counter_dir, child.pid)
            self._start_one(slot)
        return 0

    def _stop_all(self) -> None:
        for child, _ in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for child, _ in self.children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _message(line: str) -> str:
    """The message of one JSON log line ("" for a line that is not one)."""
    try:
        record = json.loads(line)
    except ValueError:
        return ""
    return str(record.get("message", "")) if isinstance(record, dict) else ""


__all__ = ["MAX_WORKERS", "serve_workers"]
