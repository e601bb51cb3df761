"""A real Kinto (PyPI ``kinto``) for the tests, on 127.0.0.1 at a free high port.

Kinto is not one of the project's dependencies: it gets its own virtual environment,
``.venv-kinto/`` at the repository root (gitignored), made once from PyPI the first time
a test needs it and reused after (tests/server_envs.py). Each
server runs as a subprocess with the memory backends and basic auth (any
``user:password`` is a user; the user that creates a bucket owns it), waits for
readiness with a bounded poll, and is stopped by its process id.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .davservers import free_port
from .processes import start, stop, wait_http
from .server_envs import python_env

KINTO_REQUIREMENT = "kinto==26.5.*"
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
    return python_env("kinto", KINTO_REQUIREMENT) / "kinto"


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
    proc = start([str(kinto), "start", "--ini", str(ini), "--port", str(port)], folder, log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/v1/", proc, log, READY_TIMEOUT_S, lambda r: r.status_code == 200)
        yield KintoServer(base)
    finally:
        stop(proc, grace_s=10)
