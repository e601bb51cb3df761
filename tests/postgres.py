"""A real PostgreSQL for the tests: Debian's ``initdb`` and ``pg_ctl`` in a temporary
directory, on a free loopback port, as a non-root user (PostgreSQL refuses to run as
root, and CI runs as root).

``PostgresCluster.start()`` makes the cluster and a template database; each test then
gets a fresh database copied from it (``fresh_database``: ``CREATE DATABASE ... TEMPLATE``
takes milliseconds). Authentication is ``trust`` (``scram-sha-256`` for
``PASSWORD_USER``), and only on 127.0.0.1. When the cluster cannot be started, ``start``
raises with the reason: the tests fail, never skip, so CI
cannot pass without PostgreSQL (scripts/system-deps.sh installs it).

The tests' cluster runs with ``fsync=off`` (throwaway, and faster); the benchmarks
(bench/) start theirs ``durable``: fsync on, as a real ledger runs.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg

USER = "undogate"
TEMPLATE = "undogate_template"
PASSWORD_USER = "undogate_pw"


class PostgresUnavailable(RuntimeError):
    pass


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if not found:
        raise PostgresUnavailable(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): "
            "run scripts/system-deps.sh (Debian's postgresql package)"
        )
    return Path(found[-1]).parent


def _version(path: str) -> int:
    part = Path(path).parts[-3]
    return int(part) if part.isdigit() else 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """One throwaway cluster. Use ``start`` and ``stop`` (idempotent)."""

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable
        self.bin = _bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="undogate-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.runas: str | None = None
        self._names = itertools.count(1)
        self.running = False

    def _command(self, *args: str) -> list[str]:
        if self.runas is None:
            return list(args)
        return ["runuser", "-u", self.runas, "--", *args]

    def _run(self, *args: str) -> str:
        proc = subprocess.run(
            self._command(*args), capture_output=True, text=True, timeout=120, check=False
        )
        if proc.returncode != 0:
            raise PostgresUnavailable(
                f"{' '.join(args[:2])} failed ({proc.returncode}): "
                f"{(proc.stderr or proc.stdout).strip()[-2000:]}"
            )
        return proc.stdout

    def start(self) -> PostgresCluster:
        if os.geteuid() == 0:
            self.runas = next(
                (u for u in ("postgres", "nobody") if _has_user(u)),
                None,
            )
            if self.runas is None:
                raise PostgresUnavailable("running as root and no 'postgres' or 'nobody' user")
            info = pwd.getpwnam(self.runas)
            os.chmod(self.root, 0o700)
            os.chown(self.root, info.pw_uid, info.pw_gid)
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        # Loopback only, and no other way in; PASSWORD_USER must give its password.
        (self.data / "pg_hba.conf").write_text(
            f"host all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n"
            "host all all 127.0.0.1/32 trust\nlocal all all trust\n"
        )
        self.pg_ctl("start")
        self.running = True
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        return self

    def pg_ctl(self, action: str, *extra: str) -> None:
        """``pg_ctl start`` (on our port, loopback only; no fsync unless ``durable``) or
        another action, waiting for it to finish."""
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} "
            f"-c unix_socket_directories={self.root} -c max_connections=100"
        )
        if not self.durable:
            options += " -c fsync=off"
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            *extra,
            action,
        )

    def url(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def admin(self, database: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url(database), autocommit=True)

    def version(self) -> str:
        with self.admin() as conn:
            row = conn.execute("SELECT current_setting('server_version')").fetchone()
        return str(row[0]) if row else "unknown"

    def fresh_database(self) -> str:
        """A new empty database (from the template); returns its URL."""
        name = f"ledger_{os.getpid()}_{next(self._names)}"
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        return self.url(name)

    def stop(self) -> None:
        if self.running:
            subprocess.run(
                self._command(
                    str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"
                ),
                capture_output=True,
                timeout=60,
                check=False,
            )
            self.running = False
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self) -> str:
        try:
            return (self.root / "server.log").read_text()[-2000:]
        except OSError:
            return ""


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def start_cluster(*, durable: bool = False) -> PostgresCluster:
    """A started cluster, or PostgresUnavailable with the reason (never a skip)."""
    cluster = PostgresCluster(durable=durable)
    try:
        return cluster.start()
    except BaseException as exc:
        tail = cluster.log_tail()
        cluster.stop()
        if isinstance(exc, PostgresUnavailable) and tail:
            raise PostgresUnavailable(f"{exc}\nserver log:\n{tail}") from exc
        raise
