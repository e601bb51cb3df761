"""What ``serve`` gives its operator to watch: its log as text or as JSON lines
(``--log-format``), and the Prometheus scrape on a loopback address of its own
(``--metrics-bind``). docs/operating.md shows both."""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from ..errors import InvalidRequest, UndogateError
from .failing import fail

Echo = Callable[[str], None]
LOG_FORMATS = ("text", "json")
_SAID = logging.getLogger("undogate.serve")  # what serve says on its own, as records


@dataclass(frozen=True)
class Watching:
    """The operator's options of one ``serve``, passed on to its workers."""

    log_format: str = "text"
    #: ``--metrics-bind``: the loopback address that serves the scrape, if any
    metrics_bind: tuple[str, int] | None = None
    #: a worker's inherited socket for it (its supervisor bound it)
    metrics_fd: int | None = None

    def worker_arguments(self, metrics_fd: int | None) -> list[str]:
        """How a worker of ``serve --workers`` is told the same."""
        given = ["--log-format", self.log_format]
        if self.metrics_bind is not None and metrics_fd is not None:
            host, port = self.metrics_bind
            given += ["--metrics-bind", f"{host}:{port}", "--metrics-fd", str(metrics_fd)]
        return given


#: Text logs, no metrics bind: what ``serve`` does unless told otherwise.
PLAIN = Watching()


def watching_options(command: Callable[..., None]) -> Callable[..., None]:
    """``serve``'s options for its operator, given to it as ``watching`` and ``echo``
    (how it says its own lines); a refusal leaves in the log's format."""

    @click.option(
        "--log-format",
        type=click.Choice(LOG_FORMATS),
        default="text",
        show_default=True,
        help="json: one JSON object per line on stderr (time, level, logger, pid, message).",
    )
    @click.option(
        "--metrics-bind",
        default=None,
        metavar="HOST:PORT",
        help="Also serve GET /metrics (Prometheus), with no key, on this loopback address "
        "(e.g. 127.0.0.1:9464). Without it, /metrics takes an operator key with keys:admin.",
    )
    @click.option("--metrics-fd", type=int, default=None, hidden=True)  # a worker's socket
    @functools.wraps(command)
    def watched(
        *args: Any, log_format: str, metrics_bind: str | None, metrics_fd: int | None, **kw: Any
    ) -> None:
        echo = configure_logging(log_format)
        try:
            bind = metrics_address(metrics_bind) if metrics_bind is not None else None
            command(*args, watching=Watching(log_format, bind, metrics_fd), echo=echo, **kw)
        except UndogateError as exc:
            if log_format != "json":
                fail(exc)
            _SAID.error("error [%s]: %s", exc.code, exc.message)
            sys.exit(2)

    return watched


def metrics_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) on a loopback address.

    Raises:
        InvalidRequest: not ``HOST:PORT``, or not loopback (the scrape needs no key there,
            so it must never be reachable from another machine).
    """
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
        number = int(port)
    except ValueError:
        loopback, number = False, -1
    if not sep or not 0 < number < 65536:
        raise InvalidRequest(f"--metrics-bind takes HOST:PORT, e.g. 127.0.0.1:9464 (got {value!r})")
    if not loopback:
        raise InvalidRequest(
            f"--metrics-bind {value}: the scrape needs no key there, so it listens only on a "
            "loopback address (127.0.0.1, ::1); elsewhere, scrape /metrics with an operator "
            "key with keys:admin"
        )
    return host, number


class JsonLines(logging.Formatter):
    """One JSON object per record, on one line: time (UTC, ISO 8601), level, logger,
    process, message and, for a failure, its trace. Token values were scrubbed from the
    record when it was made (``redact``)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False)


def configure_logging(log_format: str) -> Echo:
    """Send every log record to stderr in ``log_format``; returns how serve says its own
    lines (click's echo for text, records for JSON, so the stream stays all JSON)."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonLines())
        _SAID.setLevel(logging.INFO)
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    return _said if log_format == "json" else _echo_text


def _echo_text(line: str) -> None:
    click.echo(line, err=True)


def _said(line: str) -> None:
    for prefix, level in (("warning: ", logging.WARNING), ("error: ", logging.ERROR)):
        if line.startswith(prefix):
            _SAID.log(level, "%s", line.removeprefix(prefix))
            return
    _SAID.info("%s", line)


__all__ = [
    "LOG_FORMATS",
    "PLAIN",
    "Echo",
    "JsonLines",
    "Watching",
    "configure_logging",
    "metrics_address",
    "watching_options",
]
