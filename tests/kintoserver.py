"""A real Kinto (PyPI ``kinto``) for the tests, on 127.0.0.1 at a free high port.

Kinto is not one of the project's dependencies: it gets its own virtual environment,
``.venv-kinto/`` at the repository root (gitignored), made once from PyPI the first time
a test needs it and reused after (a stamp file names the installed requirement). Each
server runs as a subprocess with the memory backends and basic auth (any
``user:password`` is a user; the user that creates a bucket owns it), waits for
readiness with a bounded poll, and is stopped by its process id.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .davservers import free_port
from .processes import stop

KINTO_REQUIREMENT = "kinto==26.5.*"
VENV = Path(__file__).resolve().parents[1] / ".venv-kinto"
STAMP = VENV / ".undogate-installed"
INSTALL_TIMEOUT_S = 240  # under pytest-timeout's 300 s, so the pip output is shown
READY_TIMEOUT_S = 30.0
USER, PASSWORD = "undogate-test", "not-a-secret-0123"

INI = """\
# Written by tests/kintoserver.py: a throwaway Kinto, everything in memory.
[server:main]
use = egg:waitress#main
host = 127.0.0.1
port = %(http_port)s

[app:main]
use = egg:kinto
kinto.storage_backend = kinto.core.storage.memory
kinto.storage_url =
kinto.cache_backend = kinto.core.cache.memory
kinto.cache_url =
kinto.permission_backend = kinto.core.permission.memory
kinto.permission_url =
kinto.userid_hmac_secret = undogate-tests-only-0123456789abcdef
multiauth.policies = basicauth
kinto.bucket_create_principals = system.Authenticated

[loggers]
keys = root

[handlers]
keys = console

[formatters]
keys = plain

[logger_root]
level = WARNING
handlers = console

[handler_console]
class = StreamHandler
args = (sys.stderr,)
level = NOTSET
formatter = plain

[formatter_plain]
format = %(levelname)s %(name)s %(message)s
"""


def kinto_executable() -> Path:
    """``.venv-kinto/bin/kinto``, installing it first if needed (idempotent).

    Raises:
        RuntimeError: the environment could not be made (the pip output is included).
    """
    kinto = VENV / "bin" / "kinto"
    if kinto.exists() and STAMP.exists() and STAMP.read_text() == KINTO_REQUIREMENT:
        return kinto
    shutil.rmtree(VENV, ignore_errors=True)  # a partial or older install: start over
    steps = (
        [sys.executable, "-m", "venv", str(VENV)],
        [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", KINTO_REQUIREMENT],
    )
    for command in steps:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    STAMP.write_text(KINTO_REQUIREMENT)
    return kinto


@dataclass
class KintoServer:
    base_url: str
    auth: tuple[str, str] = (USER, PASSWORD)

    def url(self, path: str) -> str:
        return f"{self.base_url}/v1{path}"

    def request(self, method: str, path: str, json: Any = None) -> httpx.Response:
        """As the owning user; raises for an error status."""
        response = httpx.request(
            method, self.url(path), json=json, auth=self.auth, trust_env=False, timeout=5.0
        )
        response.raise_for_status()
        return response


@contextlib.contextmanager
def kinto_server(folder: Path) -> Iterator[KintoServer]:
    kinto = kinto_executable()
    ini = folder / "kinto.ini"
    ini.write_text(INI, encoding="utf-8")
    log = folder / "kinto.log"
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(kinto), "start", "--ini", str(ini), "--port", str(port)],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc, log)
        yield KintoServer(base)
    finally:
        stop(proc, grace_s=10)


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kinto exited before it listened:\n{log.read_text()}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{base}/v1/", trust_env=False, timeout=1.0).status_code == 200:
                return
        time.sleep(0.05)  # poll interval of a bounded loop, not a fixed wait
    raise RuntimeError(f"kinto did not answer within {READY_TIMEOUT_S}s:\n{log.read_text()}")
