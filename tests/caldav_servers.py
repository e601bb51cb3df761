"""Real CardDAV/CalDAV servers for the tests, on 127.0.0.1 at a free high port.

- ``radicale_server``: Radicale 3 (PyPI ``radicale``) with basic auth from a plain htpasswd
  file and its storage in a folder of the test's; the address book and the calendar are
  made with an extended ``MKCOL`` and ``MKCALENDAR``, as a client would.
- ``xandikos_server``: Xandikos (PyPI ``xandikos``) with ``--defaults`` (its own address
  book and calendar) in a folder of the test's, anonymous: Xandikos serves basic auth only
  over its own TLS (``--htpasswd`` requires ``--autocert``), so these tests speak plain HTTP.

Neither is one of the project's dependencies: each gets its own virtual environment at the
repository root (tests/server_envs.py). Each server waits for readiness with a bounded poll
and is stopped by its process id. Both hand back a ``DavCollections``: where the address
book and the calendar are, how to speak to them as their owner, and how to make another.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from .davservers import free_port
from .processes import start, stop, wait_http
from .server_envs import python_env

RADICALE_REQUIREMENT = "radicale==3.9.0"
XANDIKOS_REQUIREMENT = "xandikos==0.4.10"
READY_TIMEOUT_S = 30.0
USER, PASSWORD = "alice", "not-a-secret-radicale-0123"

RADICALE_CONFIG = """\
# Written by tests/caldav_servers.py: a throwaway Radicale.
[server]
hosts = 127.0.0.1:{port}

[auth]
type = htpasswd
htpasswd_filename = {users}
htpasswd_encryption = plain
# Radicale waits this long after a failed login; the tests send wrong passwords on purpose.
delay = 0

[rights]
type = owner_only

[storage]
filesystem_folder = {storage}

[web]
type = none

[logging]
level = warning
"""

MKCOL_ADDRESSBOOK = b"""<?xml version="1.0" encoding="utf-8"?>
<D:mkcol xmlns:D="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav">
  <D:set><D:prop>
    <D:resourcetype><D:collection/><CR:addressbook/></D:resourcetype>
  </D:prop></D:set>
</D:mkcol>"""

PROPFIND_ETAGS = b"""<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:">
  <D:prop><D:getetag/><D:getcontenttype/><D:resourcetype/></D:prop>
</D:propfind>"""


@dataclass
class DavCollections:
    """A running CardDAV/CalDAV server with one address book and one calendar."""

    name: str
    base_url: str
    auth: tuple[str, str] | None
    home: str  # the owner's path; collections made here are the owner's
    addressbook: str  # a path ending in "/"
    calendar: str

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def request(
        self,
        method: str,
        path: str,
        content: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """As the collections' owner, any status (nothing raised for an error status)."""
        return httpx.request(
            method,
            self.url(path),
            content=content,
            headers=headers,
            auth=self.auth,
            trust_env=False,
            timeout=10.0,
        )

    def put(self, path: str, body: bytes, content_type: str, **headers: str) -> httpx.Response:
        """A ``PUT``; ``headers`` with ``_`` for ``-`` (``If_Match="..."``)."""
        sent = {"Content-Type": content_type}
        sent.update({name.replace("_", "-"): value for name, value in headers.items()})
        return self.request("PUT", path, body, sent)

    def propfind_members(self, collection: str) -> httpx.Response:
        """``PROPFIND`` Depth 1 on ``collection`` asking each member's ETag and type."""
        return self.request(
            "PROPFIND",
            collection,
            PROPFIND_ETAGS,
            {"Depth": "1", "Content-Type": "application/xml; charset=utf-8"},
        )

    def new_addressbook(self) -> str:
        """A new, empty address book under the owner's home; its path."""
        path = f"{self.home}book-{uuid.uuid4().hex[:8]}/"
        made = self.request("MKCOL", path, MKCOL_ADDRESSBOOK, {"Content-Type": "application/xml"})
        if made.status_code != 201:
            raise RuntimeError(f"{self.name}: MKCOL {path} answered {made.status_code}")
        return path

    def new_calendar(self) -> str:
        """A new, empty calendar under the owner's home; its path."""
        path = f"{self.home}cal-{uuid.uuid4().hex[:8]}/"
        made = self.request("MKCALENDAR", path)
        if made.status_code != 201:
            raise RuntimeError(f"{self.name}: MKCALENDAR {path} answered {made.status_code}")
        return path


@contextlib.contextmanager
def radicale_server(folder: Path) -> Iterator[DavCollections]:
    radicale = python_env("radicale", RADICALE_REQUIREMENT) / "radicale"
    folder.mkdir(parents=True, exist_ok=True)
    users = folder / "users"
    users.write_text(f"{USER}:{PASSWORD}\n", encoding="utf-8")
    port = free_port()
    config = folder / "radicale.conf"
    config.write_text(
        RADICALE_CONFIG.format(port=port, users=users, storage=folder / "collections"),
        encoding="utf-8",
    )
    log = folder / "radicale.log"
    proc = start([str(radicale), "--config", str(config)], folder, log)
    base = f"http://127.0.0.1:{port}"
    try:
        # Unauthenticated, the owner's home asks for a login: listening, and auth is on.
        wait_http(f"{base}/{USER}/", proc, log, READY_TIMEOUT_S, lambda r: r.status_code == 401)
        server = DavCollections("radicale", base, (USER, PASSWORD), f"/{USER}/", "", "")
        yield replace(server, addressbook=server.new_addressbook(), calendar=server.new_calendar())
    finally:
        stop(proc, grace_s=10)


@contextlib.contextmanager
def xandikos_server(folder: Path) -> Iterator[DavCollections]:
    xandikos = python_env("xandikos", XANDIKOS_REQUIREMENT) / "xandikos"
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = folder / "xandikos.log"
    command = [
        str(xandikos),
        "serve",
        "--directory",
        str(folder / "data"),
        "--state-dir",
        str(folder / "state"),
        "--defaults",  # /user/contacts/addressbook/ and /user/calendars/calendar/
        "--listen-address",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-detect-systemd",
    ]
    proc = start(command, folder, log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/user/", proc, log, READY_TIMEOUT_S, lambda r: r.status_code == 200)
        yield DavCollections(
            "xandikos",
            base,
            None,
            "/user/",
            "/user/contacts/addressbook/",
            "/user/calendars/calendar/",
        )
    finally:
        stop(proc, grace_s=10)
