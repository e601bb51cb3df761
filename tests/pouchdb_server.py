"""A real CouchDB-compatible server for the tests: pouchdb-server (npm, in ``.npm-servers/``,
tests/server_envs.py), in memory, on 127.0.0.1 at a free high port, with one database.

pouchdb-server writes its ``config.json`` and ``log.txt`` into its working folder, so it runs
in a folder of the test's. It speaks CouchDB's HTTP API: the version of a document is its
``_rev`` (in the body; the ETag of a read is Express's weak hash of the body), a stale
``_rev`` gets 409, and a ``DELETE`` is conditional only with ``?rev=``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .davservers import free_port
from .processes import start, stop, wait_http
from .server_envs import npm_env

READY_TIMEOUT_S = 30.0
JSON = {"Accept": "application/json"}


@dataclass
class CouchServer:
    base_url: str
    database: str

    def url(self, doc_id: str) -> str:
        """A document's URL; the database's own for ``""``."""
        return f"{self.base_url}/{self.database}" + (f"/{doc_id}" if doc_id else "")

    def request(
        self,
        method: str,
        doc_id: str,
        json: Any = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """Any status; ``Accept: application/json`` unless ``headers`` say otherwise (without
        it pouchdb-server answers ``text/plain``)."""
        return httpx.request(
            method,
            self.url(doc_id),
            json=json,
            params=params,
            headers={**JSON, **(headers or {})},
            trust_env=False,
            timeout=10.0,
        )


@contextlib.contextmanager
def pouchdb_server(folder: Path) -> Iterator[CouchServer]:
    pouchdb = npm_env() / "pouchdb-server"
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = folder / "pouchdb.log"
    command = [
        str(pouchdb),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--in-memory",
        "--no-stdout-logs",
    ]
    proc = start(command, folder, log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/", proc, log, READY_TIMEOUT_S, lambda r: r.status_code == 200)
        server = CouchServer(base, f"db-{uuid.uuid4().hex[:8]}")
        made = server.request("PUT", "")
        if made.status_code != 201:
            raise RuntimeError(f"pouchdb-server: creating the database answered {made.status_code}")
        yield server
    finally:
        stop(proc, grace_s=10)
