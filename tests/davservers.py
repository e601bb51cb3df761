"""Real third-party WebDAV servers for the tests, on 127.0.0.1 at a free high port.

- ``wsgidav_server``: WsgiDAV (PyPI ``wsgidav``) on cheroot, in this process, serving a
  temporary folder with anonymous read/write access.
- ``apache_server``: Debian's ``apache2`` with ``mod_dav``/``mod_dav_fs``, in its own
  process, from an ``httpd.conf`` written here (no system service, nothing under /etc),
  with its default ETags or with ``FileETag Digest``.

Both wait for readiness with a bounded poll and stop what they started, by process id.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from undogate.config import parse_config
from undogate.jobs import Action, ChangeRequest, Job, Operation, PrepareRequest
from undogate.ledger import Ledger
from undogate.net import PinnedClient, RemoteResponse

from .processes import stop
from .worlds import AGENT, OWNER, LocalGateway

APACHE_MODULES = Path("/usr/lib/apache2/modules")
APACHE_USER = "www-data"
READY_TIMEOUT_S = 15.0


@dataclass
class DavServer:
    """A running server: where it listens and the folder it serves."""

    name: str
    mode: str
    base_url: str
    root: Path

    def url(self, name: str) -> str:
        return f"{self.base_url}/{name}"

    def put(self, name: str, data: bytes, content_type: str = "text/plain") -> httpx.Response:
        """An outside party's unconditional write (another WebDAV client)."""
        return httpx.put(
            self.url(name),
            content=data,
            headers={"Content-Type": content_type},
            trust_env=False,
            timeout=5.0,
        )

    def get(self, name: str) -> httpx.Response:
        return httpx.get(self.url(name), trust_env=False, timeout=5.0)

    def disk(self, name: str) -> bytes:
        return (self.root / name).read_bytes()

    def seed(self, name: str, data: bytes) -> None:
        """Create a file on disk, dated a minute ago (so a server's ETag is settled)."""
        path = self.root / name
        path.write_bytes(data)
        past = time.time() - 60
        os.utime(path, (past, past))
        if os.geteuid() == 0 and self.name == "apache":
            entry = pwd.getpwnam(APACHE_USER)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def wait_strong_etag(self, name: str, timeout_s: float = 5.0) -> str:
        """Poll GET until the ETag is strong (Apache marks a file weak for a second
        after each change); return it. Raises AssertionError on timeout."""
        deadline = time.monotonic() + timeout_s
        last: str | None = None
        while time.monotonic() < deadline:
            last = str(self.get(name).headers.get("etag", "")) or None
            if last is not None and not last.startswith("W/"):
                return last
            time.sleep(0.05)
        raise AssertionError(f"{self.name}: no strong ETag for {name} within {timeout_s}s: {last}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(port: int, timeout_s: float, alive: Callable[[], bool] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            raise RuntimeError("the server exited before it listened")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listened on 127.0.0.1:{port} within {timeout_s}s")


# -- WsgiDAV --------------------------------------------------------------------------


@contextlib.contextmanager
def wsgidav_server(root: Path) -> Iterator[DavServer]:
    from cheroot import wsgi
    from wsgidav.wsgidav_app import WsgiDAVApp

    root.mkdir(parents=True, exist_ok=True)
    config = {
        "host": "127.0.0.1",
        "port": 0,
        "provider_mapping": {"/": str(root)},
        "http_authenticator": {"domain_controller": None},
        "simple_dc": {"user_mapping": {"*": True}},  # anonymous, read and write
        "verbose": 0,
        "logging": {"enable": False},
        "dir_browser": {"enable": False},
        "lock_storage": True,
        "property_manager": True,
    }
    app = WsgiDAVApp(config)
    server = wsgi.Server(("127.0.0.1", 0), app, numthreads=4)
    server.prepare()
    port = server.bind_addr[1]
    thread = threading.Thread(target=server.serve, name="wsgidav", daemon=True)
    thread.start()
    try:
        wait_listening(port, READY_TIMEOUT_S)
        yield DavServer("wsgidav", "default", f"http://127.0.0.1:{port}", root)
    finally:
        server.stop()
        thread.join(timeout=10)


# -- Apache httpd ----------------------------------------------------------------------


def apache_binary() -> str | None:
    found = shutil.which("apache2") or (
        "/usr/sbin/apache2" if os.access("/usr/sbin/apache2", os.X_OK) else None
    )
    if found is None:
        return None
    for module in ("mod_dav.so", "mod_dav_fs.so", "mod_mpm_event.so", "mod_mime.so"):
        if not (APACHE_MODULES / module).is_file():
            return None
    return found


def _apache_conf(base: Path, port: int, docs: Path, file_etag: str | None, extra: str) -> str:
    as_root = os.geteuid() == 0
    user = APACHE_USER if as_root else pwd.getpwuid(os.geteuid()).pw_name
    modules = "\n".join(
        f"LoadModule {name}_module {APACHE_MODULES}/mod_{name}.so"
        for name in ("mpm_event", "authz_core", "mime", "dav", "dav_fs")
    )
    etag_line = f"FileETag {file_etag}" if file_etag else "# FileETag: Apache's default"
    return f"""# Written by tests/davservers.py: a throwaway Apache with mod_dav.
ServerRoot "{base}"
ServerName 127.0.0.1
Listen 127.0.0.1:{port}
PidFile "{base}/httpd.pid"
DefaultRuntimeDir "{base}/run"
ErrorLog "{base}/error.log"
LogLevel warn
{modules}
{"User " + user if as_root else ""}
{"Group " + user if as_root else ""}
StartServers 1
ServerLimit 1
ThreadsPerChild 8
MaxRequestWorkers 8
TypesConfig /dev/null
AddType text/plain .txt
AddType text/markdown .md
{extra}
DavLockDB "{base}/locks/DavLock"
DocumentRoot "{docs}"
<Directory />
    Require all denied
    AllowOverride None
</Directory>
<Directory "{docs}">
    Dav On
    Require all granted
    AllowOverride None
    {etag_line}
</Directory>
"""


@contextlib.contextmanager
def apache_server(file_etag: str | None = None, extra: str = "") -> Iterator[DavServer]:
    """Apache with mod_dav on a temporary folder; ``file_etag`` e.g. ``"Digest"``;
    ``extra``: more server-wide directives."""
    binary = apache_binary()
    if binary is None:
        raise RuntimeError("apache2 with mod_dav is not installed (run scripts/system-deps.sh)")
    # Outside pytest's 0700 tmp tree: the worker runs as www-data and must reach it.
    base = Path(tempfile.mkdtemp(prefix="undogate-apache-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        docs = base / "docs"
        for sub in (docs, base / "locks", base / "run"):
            sub.mkdir()
        base.chmod(0o755)
        if os.geteuid() == 0:
            entry = pwd.getpwnam(APACHE_USER)
            for sub in (docs, base / "locks"):
                os.chown(sub, entry.pw_uid, entry.pw_gid)
        port = free_port()
        conf = base / "httpd.conf"
        conf.write_text(_apache_conf(base, port, docs, file_etag, extra), encoding="utf-8")
        proc = subprocess.Popen(
            [binary, "-f", str(conf), "-DFOREGROUND"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            wait_listening(port, READY_TIMEOUT_S, alive=lambda: proc.poll() is None)
        except RuntimeError as exc:
            log = (base / "error.log").read_text() if (base / "error.log").exists() else ""
            proc.kill()
            _, err = proc.communicate(timeout=10)
            raise RuntimeError(f"{exc}\n{err.decode(errors='replace')}\n{log}") from None
        mode = f"FileETag {file_etag}" if file_etag else "default"
        if extra:
            mode += f" + {extra}"
        yield DavServer("apache", mode, f"http://127.0.0.1:{port}", docs)
    finally:
        if proc is not None:
            stop(proc, grace_s=10)  # SIGTERM to the parent (our child) stops its workers
        if proc is not None and proc.stderr is not None:
            proc.stderr.close()
        shutil.rmtree(base, ignore_errors=True)


# -- the gateway side ------------------------------------------------------------------


class HookedHTTP(PinnedClient):
    """The real client, with callbacks just before and just after each write leaves.

    Lets a test put an outside party's edit exactly between the gateway's last read and
    its conditional write (the window ``If-Match`` exists for), deterministically.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.before_write: list[Callable[[], object]] = []
        self.after_write: list[Callable[[], object]] = []
        self.sent: list[tuple[str, str, dict[str, str], bytes]] = []
        self.responses: list[RemoteResponse] = []

    def send(
        self, method: str, url: str, *, headers: dict[str, str], **kwargs: Any
    ) -> RemoteResponse:
        if method in ("PUT", "PATCH"):
            while self.before_write:
                self.before_write.pop(0)()
            self.sent.append((method, url, dict(headers), kwargs.get("content") or b""))
        response = super().send(method, url, headers=headers, **kwargs)
        if method in ("PUT", "PATCH"):
            self.responses.append(response)
            while self.after_write:
                self.after_write.pop(0)()
        return response


def text_resource(rid: str, url: str) -> dict[str, Any]:
    return {
        "id": rid,
        "agent_id": "account-assistant",
        "name": rid,
        "kind": "webdav_text",
        "url": url,
        "conditional_writes": True,
        "allow_loopback_http": True,
    }


@contextlib.contextmanager
def dav_gateway(
    data_dir: Path, *resources: dict[str, Any]
) -> Iterator[tuple[LocalGateway, HookedHTTP]]:
    config = parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": list(resources),
            "agents": [{"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}],
        }
    )
    ledger = Ledger.open(config.server.data_dir)
    http = HookedHTTP(request_timeout_s=config.server.request_timeout_s)
    try:
        gw = LocalGateway(config=config, ledger=ledger, http=http)
        gw.recover()
        yield gw, http
    finally:
        http.close()
        ledger.close()


def prepare_text(gw: LocalGateway, rid: str, text: str) -> Job:
    request = PrepareRequest(
        summary=f"Rewrite {rid}", changes=(ChangeRequest(resource_id=rid, text=text),)
    )
    return gw.prepare(AGENT, "account-assistant", request).job


def run(gw: LocalGateway, job_id: str, operation: Operation) -> Job:
    """Preview then confirm ``operation``; the preview must have no blockers."""
    preview = gw.preview(OWNER, job_id, operation)
    assert preview.token is not None, preview.blockers
    return gw.confirm(OWNER, job_id, preview.token).job


def last_action(job: Job) -> Action:
    assert job.actions, "no action ran"
    return job.actions[-1]
