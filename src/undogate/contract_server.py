"""The reference endpoint: an HTTP server that honours undogate's remote contract exactly.

It serves JSON records (GET, conditional JSON Patch) and UTF-8 text documents (GET,
conditional PUT) at arbitrary paths, gives every successful write a new strong ETag, and
can be told to misbehave in precise ways (faults) so the gateway's handling of uncertain
outcomes can be exercised against a real socket. The demo and the tests start it
in-process on 127.0.0.1; ``undogate contract-server`` runs it in the foreground.

All state sits behind one lock: an ``If-Match`` comparison and the write it guards happen
under that lock, so a stale writer can never slip in between.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import signal
import socket
import stat
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, cast
from urllib.parse import urlsplit

import jsonpatch
import jsonpointer

from undogate.contract_faults import (
    CREATE_UNDER_IF_MATCH,
    IF_MATCH_FAULTS,
    WEAK_IF_MATCH,
    created_by,
    weakly_matches,
)
from undogate.etag import ETag, if_match_satisfied
from undogate.jsonvalue import (
    JsonError,
    JsonObject,
    dumps,
    from_python,
    loads,
    loads_object,
    parse_pointer,
    resolve_record,
)

__all__ = [
    "IF_MATCH_FAULTS",
    "MAX_BODY_BYTES",
    "READ_FAULTS",
    "WRITE_FAULTS",
    "ContractDataError",
    "ContractServer",
    "seed_demo",
    "serve_forever",
]

MAX_BODY_BYTES = 1024 * 1024
JSON_PATCH_MEDIA_TYPE = "application/json-patch+json"
RECORD_MEDIA_TYPE = "application/json"
TEXT_MEDIA_TYPES = frozenset({"text/plain", "text/markdown"})
READ_FAULTS = frozenset({"weak_etag", "duplicate_keys", "no_etag"})
WRITE_FAULTS = frozenset(
    {"apply_then_drop", "apply_then_500", "apply_then_hang", "hang", "ok_without_apply"}
)
_APPLYING_FAULTS = ("apply_then_drop", "apply_then_500", "apply_then_hang")
STATE_FILE = ".undogate-contract-state.json"

Kind = Literal["record", "text"]

_SEED_FILES: dict[str, str] = {
    "customer-123.json": """{
  "id": "123",
  "name": "Ada Lovelace",
  "status": "lead",
  "owner": "sam",
  "tier": null,
  "balance": 123456789012345678901234567890,
  "ratio": 0.1000000000000000055511151231257827,
  "notes": {"source": "web"}
}
""",
    "wrapped-7.json": """{
  "data": {"status": "open", "owner": "kim", "priority": 2},
  "meta": {"rev": 1}
}
""",
    "notes.md": """# Account notes

- Ada prefers email before noon.
- Renewal is due in **March**.
""",
    "plain.txt": "Plain text, kept byte for byte.\nSecond line.\n",
}


GATE_LIMIT_S = 60.0  # a held write never waits longer than this, released or not


@dataclass
class WriteGate:
    """Where a held write waits: ``arrived`` once it reached the server, and it goes on
    when ``release()`` is called."""

    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


class ContractDataError(ValueError):
    """A seed file (or a helper's input) is not a record or text document we can serve."""


@dataclass(slots=True)
class _Resource:
    kind: Kind
    body: bytes
    media_type: str
    generation: int
    document: JsonObject | None = None
    file: Path | None = None
    opaque: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.opaque = _opaque(self.generation, self.media_type, self.body)

    @property
    def etag(self) -> ETag:
        return ETag(self.opaque)


@dataclass(frozen=True, slots=True)
class _Seed:
    kind: Kind
    body: bytes
    media_type: str
    file: Path | None


@dataclass(slots=True)
class _Fault:
    name: str
    path: str | None
    remaining: int

    def matches(self, path: str) -> bool:
        return self.path is None or self.path == path


@dataclass(slots=True)
class _Request:
    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(slots=True)
class _Reply:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    action: Literal["respond", "drop", "hang"] = "respond"


def _opaque(generation: int, media_type: str, body: bytes) -> str:
    return f"g{generation}-{_digest(media_type, body)[:16]}"


def _digest(media_type: str, body: bytes) -> str:
    return hashlib.sha256(media_type.encode("utf-8") + b"\n" + body).hexdigest()


def _record_body(document: JsonObject) -> bytes:
    return dumps(document, sort_keys=False).encode("utf-8")


def _problem(status: int, error: str, message: str) -> _Reply:
    body = json.dumps({"error": error, "message": message}).encode("utf-8")
    return _Reply(status, [("Content-Type", "application/json")], body)


def _parse_media_type(value: str) -> tuple[str, dict[str, str]]:
    main, *params = value.split(";")
    parsed: dict[str, str] = {}
    for param in params:
        name, sep, val = param.strip().partition("=")
        if not sep:
            continue
        parsed[name.strip().lower()] = val.strip().strip('"')
    return main.strip().lower(), parsed


def _acceptable_text_type(value: str) -> bool:
    main, params = _parse_media_type(value)
    if main not in TEXT_MEDIA_TYPES:
        return False
    if not params:
        return True
    return set(params) == {"charset"} and params["charset"].lower() == "utf-8"


def _default_text_type(filename: str) -> str:
    return "text/markdown" if filename.endswith(".md") else "text/plain"


def _duplicate_first_key(body: bytes) -> bytes:
    """The same record with its first member repeated at the end (a contract breach)."""
    document = loads_object(body)
    if not document:
        return b'{"_":0,"_":0}'
    key = next(iter(document))
    member = dumps({key: document[key]}, sort_keys=False)[1:-1]
    text = body.decode("utf-8")
    return (text[:-1] + "," + member + "}").encode("utf-8")


def _to_document(value: JsonObject | Mapping[str, Any] | str | bytes) -> JsonObject:
    if isinstance(value, (str, bytes)):
        return loads_object(value)
    converted = from_python(dict(value))
    if not isinstance(converted, dict):  # pragma: no cover - a dict converts to a dict
        raise ContractDataError("a record must be a JSON object")
    return converted


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def seed_demo(data_dir: Path) -> list[Path]:
    """Write the built-in demo resources into ``data_dir`` (created if missing).

    ``customer-123.json`` and ``wrapped-7.json`` become ``/records/<stem>``;
    ``notes.md`` and ``plain.txt`` become ``/docs/<name>``.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, text in _SEED_FILES.items():
        target = data_dir / name
        _atomic_write(target, text.encode("utf-8"))
        written.append(target)
    return written


def _load_seed_file(name: str, data: bytes, file: Path | None) -> tuple[str, _Seed] | None:
    where = str(file) if file is not None else name
    if name.endswith(".json"):
        try:
            document = loads_object(data)
        except JsonError as exc:
            raise ContractDataError(f"{where}: {exc}") from exc
        stem = name[: -len(".json")]
        return f"/records/{stem}", _Seed("record", _record_body(document), RECORD_MEDIA_TYPE, file)
    if name.endswith((".txt", ".md")):
        try:
            data.decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            raise ContractDataError(f"{where}: not valid UTF-8 at byte {exc.start}") from exc
        return f"/docs/{name}", _Seed("text", data, _default_text_type(name), file)
    return None


def _has_resource_files(data_dir: Path) -> bool:
    if not data_dir.is_dir():
        return False
    return any(
        not p.name.startswith(".") and p.name.endswith((".json", ".txt", ".md"))
        for p in data_dir.iterdir()
    )


def _load_seeds(data_dir: Path | None) -> dict[str, _Seed]:
    seeds: dict[str, _Seed] = {}
    if data_dir is None:
        for name, text in _SEED_FILES.items():
            loaded = _load_seed_file(name, text.encode("utf-8"), None)
            if loaded is not None:
                seeds[loaded[0]] = loaded[1]
        return seeds
    for file in sorted(data_dir.iterdir()):
        if file.name.startswith(".") or not file.is_file():
            continue
        loaded = _load_seed_file(file.name, file.read_bytes(), file)
        if loaded is not None:
            seeds[loaded[0]] = loaded[1]
    return seeds


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], contract: ContractServer) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.contract = contract
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        sock = cast(socket.socket, request)
        with self._connections_lock:
            self._connections[sock] = threading.current_thread()
        try:
            if self.contract.stopping.is_set():
                self.shutdown_request(request)
                return
            super().process_request_thread(request, client_address)
        finally:
            with self._connections_lock:
                self._connections.pop(sock, None)

    def drop_connections(self, timeout: float) -> None:
        """Cut every open connection (idle keep-alives, hung writes) and wait for its thread."""
        with self._connections_lock:
            connections = list(self._connections.items())
        for sock, _thread in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for _sock, thread in connections:
            thread.join(timeout)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if self.contract.verbose:
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "undogate-contract/0.1"
    timeout = 120
    disable_nagle_algorithm = True

    def version_string(self) -> str:
        return self.server_version

    @property
    def contract(self) -> ContractServer:
        return cast(_HTTPServer, self.server).contract

    def log_message(self, format: str, *args: Any) -> None:
        if self.contract.verbose:
            super().log_message(format, *args)

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        body = self._read_body()
        if body is None:
            return
        headers: dict[str, str] = {}
        for name in ("If-Match", "Content-Type", "Authorization"):
            values = self.headers.get_all(name)
            if values:
                headers[name.lower()] = ", ".join(v.strip() for v in values)
        request = _Request(self.command, urlsplit(self.path).path, headers, body)
        self.contract.wait_at_gate(request)
        reply = self.contract.handle(request)
        if reply.action == "hang":
            self.contract.stopping.wait(self.contract.hang_seconds)
        if reply.action in ("hang", "drop"):
            self.close_connection = True
            return
        self._send(reply, head=self.command == "HEAD")

    def _read_body(self) -> bytes | None:
        if self.headers.get("Transfer-Encoding") is not None:
            self._send(_problem(411, "length_required", "send a Content-Length"), close=True)
            return None
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            return b""
        try:
            length = int(length_header)
        except ValueError:
            length = -1
        if length < 0:
            self._send(_problem(400, "bad_request", "malformed Content-Length"), close=True)
            return None
        if length > MAX_BODY_BYTES:
            # Drain a moderately oversized body so the client reads the 413 instead of a reset.
            drain = length <= 8 * MAX_BODY_BYTES
            if drain and not self._discard(length):
                self.close_connection = True
                return None
            message = f"bodies are limited to {MAX_BODY_BYTES} bytes"
            self._send(_problem(413, "too_large", message), close=not drain)
            return None
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            return None
        return body

    def _discard(self, length: int) -> bool:
        while length > 0:
            chunk = self.rfile.read(min(length, 65536))
            if not chunk:
                return False
            length -= len(chunk)
        return True

    def _send(self, reply: _Reply, *, head: bool = False, close: bool = False) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        if reply.status not in (204, 304):
            self.send_header("Content-Length", str(len(reply.body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if not head and reply.status not in (204, 304):
            self.wfile.write(reply.body)


class ContractServer:
    """A reference endpoint for undogate's remote contract (SPEC §6), for demos and tests.

    Records (``application/json``) accept only a conditional JSON Patch; text documents
    (``text/plain``, ``text/markdown``) accept only a conditional PUT. With ``data_dir``
    the resources are loaded from files (``*.json`` → ``/records/<stem>``, ``*.txt`` and
    ``*.md`` → ``/docs/<name>``; an empty or missing directory is seeded with the demo)
    and every write is persisted atomically; without it the built-in demo seed lives in
    memory. ``faults=True`` exposes the control routes ``POST /_faults``, ``POST /_reset``
    and ``GET /_counts``; in-process ``arm()`` works either way.

    Raises:
        ContractDataError: a seed file is malformed (at construction).
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: bool = False,
        hang_seconds: float = 30.0,
        token: str | None = None,
        verbose: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.host = host
        self.port = port
        self.faults_enabled = faults
        self.hang_seconds = hang_seconds
        self.token = token
        self.verbose = verbose
        self.stopping = threading.Event()
        self._lock = threading.RLock()
        self._resources: dict[str, _Resource] = {}
        self._faults: list[_Fault] = []
        self._gates: dict[str, WriteGate] = {}
        self._created_by_fault: set[str] = set()  # deletable again (create_under_if_match)
        self._writes: Counter[str] = Counter()
        self._attempts: Counter[str] = Counter()
        self._counter = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        if self.data_dir is not None and not _has_resource_files(self.data_dir):
            seed_demo(self.data_dir)
        self._seeds = _load_seeds(self.data_dir)
        self._load_initial_state()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> ContractServer:
        """Listen and serve in a background thread; returns ``self``."""
        if self._httpd is not None:
            return self
        self.stopping.clear()
        httpd = _HTTPServer((self.host, self.port), self)
        self.port = httpd.server_address[1]
        thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"contract-server:{self.port}",
            daemon=True,
        )
        self._httpd = httpd
        self._thread = thread
        thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections (hung writes end at once) and close sockets."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        self.stopping.set()
        httpd.shutdown()
        thread.join()
        httpd.server_close()
        httpd.drop_connections(timeout=5.0)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ContractServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` of the running server.

        Raises:
            RuntimeError: the server has not been started.
        """
        if self._httpd is None:
            raise RuntimeError("the contract server is not running")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    # -- in-process helpers --------------------------------------------------------------

    def paths(self) -> list[str]:
        with self._lock:
            return sorted(self._resources)

    def write_count(self, path: str) -> int:
        """Successful, effective writes over HTTP to ``path`` (not helper edits)."""
        with self._lock:
            return self._writes[path]

    def attempt_count(self, path: str) -> int:
        """Write requests (PATCH/PUT) that reached ``path``, whatever their outcome."""
        with self._lock:
            return self._attempts[path]

    def write_counts(self) -> dict[str, int]:
        with self._lock:
            return {path: self._writes[path] for path in sorted(self._resources)}

    def reset(self) -> None:
        """Back to the seed data (with new ETags), no faults, zero counts."""
        with self._lock:
            self._faults.clear()
            self._created_by_fault.clear()
            self._writes.clear()
            self._attempts.clear()
            for path, resource in list(self._resources.items()):
                if path not in self._seeds:
                    if resource.file is not None:
                        resource.file.unlink(missing_ok=True)
                    del self._resources[path]
            for path, seed in self._seeds.items():
                document = loads_object(seed.body) if seed.kind == "record" else None
                self._commit(path, seed.kind, seed.body, seed.media_type, document, seed.file)

    def get_record(self, path: str) -> JsonObject:
        """A copy of the stored record document (lossless values).

        Raises:
            KeyError: no record at ``path``.
        """
        with self._lock:
            return loads_object(self._resource(path, "record").body)

    def get_text(self, path: str) -> str:
        """Raises: KeyError: no text document at ``path``."""
        with self._lock:
            return self._resource(path, "text").body.decode("utf-8")

    def raw_bytes(self, path: str) -> bytes:
        """The exact bytes a GET serves. Raises: KeyError: unknown path."""
        with self._lock:
            return self._resource(path).body

    def etag(self, path: str) -> str:
        """The current ETag header value. Raises: KeyError: unknown path."""
        with self._lock:
            return self._resource(path).etag.header

    def media_type(self, path: str) -> str:
        """The current ``Content-Type``. Raises: KeyError: unknown path."""
        with self._lock:
            return self._resource(path).media_type

    def set_record(
        self,
        path: str,
        value: JsonObject | Mapping[str, Any] | str | bytes,
        pointer: str = "",
    ) -> str:
        """Replace a record as an outside party would (new ETag); returns the ETag.

        ``value`` is a mapping or JSON text. With ``pointer`` only the object at that
        pointer inside the existing document is replaced (e.g. ``"/data"``). An unknown
        path creates the record (persisted only under ``/records/``).

        Raises:
            JsonError: JSON text is malformed or the pointer leads to no object.
        """
        new = _to_document(value)
        with self._lock:
            existing = self._resources.get(path)
            if existing is not None and existing.kind != "record":
                raise ContractDataError(f"{path} is a text document, not a record")
            if pointer:
                if existing is None or existing.document is None:
                    raise KeyError(path)
                document = loads_object(existing.body)
                tokens = parse_pointer(pointer)
                parent = resolve_record(document, "".join(f"/{t}" for t in tokens[:-1]))
                resolve_record(document, pointer)
                parent[tokens[-1]] = new
                new = document
            file = existing.file if existing is not None else self._file_for(path, "record")
            body = _record_body(new)
            return self._commit(path, "record", body, RECORD_MEDIA_TYPE, new, file).etag.header

    def set_field(self, path: str, pointer: str, value: Any) -> str:
        """Set one value inside a record (e.g. ``"/data/status"``); returns the new ETag.

        Raises:
            KeyError: no record at ``path``.
            JsonError: the pointer's parent is not an object.
        """
        converted = from_python(value)
        with self._lock:
            document = loads_object(self._resource(path, "record").body)
            tokens = parse_pointer(pointer)
            if not tokens:
                raise JsonError("bad_pointer", "use set_record to replace the whole document")
            parent = resolve_record(document, "".join(f"/{t}" for t in tokens[:-1]))
            parent[tokens[-1]] = converted
            resource = self._resources[path]
            return self._commit(
                path, "record", _record_body(document), RECORD_MEDIA_TYPE, document, resource.file
            ).etag.header

    def set_text(self, path: str, text: str | bytes, media_type: str = "text/plain") -> str:
        """Replace (or create) a text document as an outside party would; returns the ETag.

        Neither the bytes nor the media type are checked, so a test can serve a contract
        breach on purpose (non-UTF-8 bytes, ``text/html``, malformed JSON, oversize data).

        Raises:
            ContractDataError: ``path`` holds a record.
        """
        data = text.encode("utf-8") if isinstance(text, str) else text
        with self._lock:
            existing = self._resources.get(path)
            if existing is not None and existing.kind != "text":
                raise ContractDataError(f"{path} is a record, not a text document")
            file = existing.file if existing is not None else self._file_for(path, "text")
            return self._commit(path, "text", data, media_type, None, file).etag.header

    def touch(self, path: str) -> str:
        """A new ETag for the same bytes (an outside no-op write); returns it.

        Raises:
            KeyError: unknown path.
        """
        with self._lock:
            res = self._resource(path)
            return self._commit(
                path, res.kind, res.body, res.media_type, res.document, res.file
            ).etag.header

    def arm(self, fault: str, path: str | None = None, count: int = 1) -> None:
        """Arm ``fault`` for the next ``count`` matching requests to ``path`` (or any path).

        Stale-write faults (``ignore_if_match``: apply despite a stale If-Match;
        ``precondition_status:NNN``: refuse it with NNN instead of 412) are consumed by a
        write whose If-Match does not match. Write faults (``apply_then_drop``,
        ``apply_then_500``, ``apply_then_hang``, ``hang``,
        ``ok_without_apply``, ``status:NNN``) are consumed by writes that pass validation
        and ``If-Match``; read faults (``weak_etag``, ``duplicate_keys``, ``no_etag``) by
        GETs. ``weak_if_match`` (a ``W/`` tag matches) and ``create_under_if_match`` (a
        conditional write to a missing path creates it): see ``contract_faults``.

        Raises:
            ValueError: unknown fault, bad count or path.
        """
        if not _valid_fault(fault):
            raise ValueError(f"unknown fault {fault!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError("count must be a positive integer")
        if path is not None and not path.startswith("/"):
            raise ValueError("path must start with '/'")
        with self._lock:
            self._faults.append(_Fault(fault, path, count))

    def hold_next_write(self, path: str) -> WriteGate:
        """The next write to ``path`` waits, before the server looks at it, until the
        returned gate is released: a slow write whose timing the test controls."""
        gate = WriteGate()
        with self._lock:
            self._gates[path] = gate
        return gate

    def wait_at_gate(self, request: _Request) -> None:
        if request.method in ("GET", "HEAD"):
            return
        with self._lock:
            gate = self._gates.pop(request.path, None)
        if gate is not None:
            gate.arrived.set()
            deadline = time.monotonic() + GATE_LIMIT_S
            while not gate.released.wait(0.05):
                if self.stopping.is_set() or time.monotonic() > deadline:
                    break

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def armed_faults(self) -> list[tuple[str, str | None, int]]:
        with self._lock:
            return [(f.name, f.path, f.remaining) for f in self._faults]

    # -- request handling (called by the handler threads) --------------------------------

    def handle(self, request: _Request) -> _Reply:
        if request.path.startswith("/_"):
            return self._control(request)
        if not self._authorized(request.headers.get("authorization")):
            reply = _problem(401, "unauthorized", "a valid token is required")
            reply.headers.append(("WWW-Authenticate", 'Bearer realm="contract"'))
            return reply
        with self._lock:
            resource = self._resources.get(request.path)
            if resource is None:
                created = self._create_under_if_match(request)
                return created or _problem(404, "not_found", f"no resource at {request.path}")
            if request.method == "DELETE" and request.path in self._created_by_fault:
                return self._delete_created(request.path, resource)
            allowed = "GET, HEAD, PATCH" if resource.kind == "record" else "GET, HEAD, PUT"
            if request.method in ("GET", "HEAD"):
                return self._read(request.path, resource, head=request.method == "HEAD")
            if request.method == "PATCH" and resource.kind == "record":
                return self._patch(request, resource)
            if request.method == "PUT" and resource.kind == "text":
                return self._put(request, resource)
        reply = _problem(405, "method_not_allowed", f"{request.method} is not allowed here")
        reply.headers.append(("Allow", allowed))
        return reply

    def _create_under_if_match(self, request: _Request) -> _Reply | None:
        fault = self._fault_named(CREATE_UNDER_IF_MATCH, request.path)
        if fault is None or "if-match" not in request.headers:
            return None
        made = created_by(request.method, request.headers.get("content-type", ""), request.body)
        if made is None:
            return None
        self._consume(fault)
        self._attempts[request.path] += 1
        res = self._commit(request.path, made.kind, made.body, made.media_type, made.document, None)
        self._writes[request.path] += 1
        self._created_by_fault.add(request.path)
        return _Reply(201, [("ETag", res.etag.header)])

    def _delete_created(self, path: str, resource: _Resource) -> _Reply:
        fault = self._peek_write_fault(path)
        if fault is not None and fault.name not in _APPLYING_FAULTS:
            return self._fire_write_fault(fault, resource, ok_status=204)
        del self._resources[path]
        self._created_by_fault.discard(path)
        return _Reply(204)

    def _fault_named(self, name: str, path: str) -> _Fault | None:
        return next((f for f in self._faults if f.name == name and f.matches(path)), None)

    def _authorized(self, header: str | None) -> bool:
        if self.token is None:
            return True
        if header is None:
            return False
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "bearer":
            return credentials.strip() == self.token
        if scheme.lower() == "basic":
            expected = base64.b64encode(self.token.encode("utf-8")).decode("ascii")
            return credentials.strip() == expected
        return False

    def _read(self, path: str, resource: _Resource, *, head: bool) -> _Reply:
        body = resource.body
        etag: str | None = resource.etag.header
        fault = None if head else self._take_read_fault(path, resource.kind)
        if fault == "weak_etag":
            etag = "W/" + resource.etag.header
        elif fault == "no_etag":
            etag = None
        elif fault == "duplicate_keys":
            body = _duplicate_first_key(body)
        headers = [("Content-Type", resource.media_type)]
        if etag is not None:
            headers.append(("ETag", etag))
        return _Reply(200, headers, body)

    def _patch(self, request: _Request, resource: _Resource) -> _Reply:
        path = request.path
        self._attempts[path] += 1
        content_type = request.headers.get("content-type", "")
        if _parse_media_type(content_type)[0] != JSON_PATCH_MEDIA_TYPE:
            return _problem(415, "unsupported_media_type", f"send {JSON_PATCH_MEDIA_TYPE}")
        try:
            operations = loads(request.body)
        except JsonError as exc:
            return _problem(400, "malformed_patch", str(exc))
        if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
            return _problem(422, "invalid_patch", "a JSON Patch is an array of objects")
        try:
            patch = jsonpatch.JsonPatch(cast(list[dict[str, Any]], operations))
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            return _problem(422, "invalid_patch", str(exc))
        refusal = self._check_precondition(request, resource)
        if refusal is not None:
            return refusal
        fault = self._peek_write_fault(path)
        if fault is not None and fault.name not in _APPLYING_FAULTS:
            return self._fire_write_fault(fault, resource, ok_status=200)
        try:
            result = patch.apply(resource.document, in_place=False)
        except jsonpatch.JsonPatchTestFailed as exc:
            return _problem(409, "test_failed", str(exc))
        except (
            jsonpatch.JsonPatchException,
            jsonpointer.JsonPointerException,
            KeyError,
            IndexError,
            TypeError,
            ValueError,
        ) as exc:
            return _problem(422, "patch_not_applicable", str(exc))
        if not isinstance(result, dict):
            return _problem(422, "not_object", "the patched document must be a JSON object")
        document = cast(JsonObject, result)
        try:
            body = _record_body(document)
            updated = self._commit(path, "record", body, RECORD_MEDIA_TYPE, document, resource.file)
        except (OSError, TypeError) as exc:
            return _problem(500, "write_failed", str(exc))
        self._writes[path] += 1
        if fault is not None:
            self._consume(fault)
            return self._after_apply_fault(fault)
        return _Reply(
            200,
            [("Content-Type", RECORD_MEDIA_TYPE), ("ETag", updated.etag.header)],
            updated.body,
        )

    def _put(self, request: _Request, resource: _Resource) -> _Reply:
        path = request.path
        self._attempts[path] += 1
        content_type = request.headers.get("content-type", "").strip()
        if not _acceptable_text_type(content_type):
            return _problem(
                415,
                "unsupported_media_type",
                "send text/plain or text/markdown, with no charset or charset=utf-8",
            )
        try:
            request.body.decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            return _problem(415, "invalid_utf8", "the body is not valid UTF-8")
        refusal = self._check_precondition(request, resource)
        if refusal is not None:
            return refusal
        fault = self._peek_write_fault(path)
        if fault is not None and fault.name not in _APPLYING_FAULTS:
            return self._fire_write_fault(fault, resource, ok_status=204)
        try:
            updated = self._commit(path, "text", request.body, content_type, None, resource.file)
        except OSError as exc:
            return _problem(500, "write_failed", str(exc))
        self._writes[path] += 1
        if fault is not None:
            self._consume(fault)
            return self._after_apply_fault(fault)
        return _Reply(204, [("ETag", updated.etag.header)])

    def _check_precondition(self, request: _Request, resource: _Resource) -> _Reply | None:
        if_match = request.headers.get("if-match")
        if if_match is None:
            return _problem(428, "precondition_required", "send If-Match with the current ETag")
        if not if_match_satisfied(if_match, resource.etag):
            weak = self._fault_named(WEAK_IF_MATCH, request.path)
            if weak is not None and weakly_matches(if_match, resource.etag):
                self._consume(weak)
                return None
            fault = self._precondition_fault(request.path)
            if fault is not None:
                # A server that breaks the contract on a stale write, on purpose.
                self._consume(fault)
                if fault.name == "ignore_if_match":
                    return None
                status = int(fault.name.partition(":")[2])
                return _problem(status, "injected_fault", fault.name)
            return _problem(412, "precondition_failed", "If-Match does not match the ETag")
        return None

    def _precondition_fault(self, path: str) -> _Fault | None:
        for fault in self._faults:
            if _is_precondition_fault(fault.name) and fault.matches(path):
                return fault
        return None

    def _fire_write_fault(self, fault: _Fault, resource: _Resource, *, ok_status: int) -> _Reply:
        self._consume(fault)
        if fault.name == "hang":
            return _Reply(0, action="hang")
        if fault.name == "ok_without_apply":
            headers = [("ETag", resource.etag.header)]
            if ok_status == 204:
                return _Reply(204, headers)
            return _Reply(200, [("Content-Type", resource.media_type), *headers], resource.body)
        status = int(fault.name.partition(":")[2])
        if status in (204, 304):
            return _Reply(status)
        return _problem(status, "injected_fault", fault.name)

    @staticmethod
    def _after_apply_fault(fault: _Fault) -> _Reply:
        if fault.name == "apply_then_drop":
            return _Reply(0, action="drop")
        if fault.name == "apply_then_hang":
            return _Reply(0, action="hang")
        return _problem(500, "injected_fault", fault.name)

    def _take_read_fault(self, path: str, kind: Kind) -> str | None:
        for fault in self._faults:
            if fault.name not in READ_FAULTS or not fault.matches(path):
                continue
            if fault.name == "duplicate_keys" and kind != "record":
                continue
            self._consume(fault)
            return fault.name
        return None

    def _peek_write_fault(self, path: str) -> _Fault | None:
        for fault in self._faults:
            if (
                fault.name not in READ_FAULTS
                and fault.name not in IF_MATCH_FAULTS
                and not _is_precondition_fault(fault.name)
                and fault.matches(path)
            ):
                return fault
        return None

    def _consume(self, fault: _Fault) -> None:
        fault.remaining -= 1
        if fault.remaining <= 0:
            self._faults.remove(fault)

    def _control(self, request: _Request) -> _Reply:
        route = (request.method, request.path)
        if not self.faults_enabled or route not in {
            ("POST", "/_faults"),
            ("POST", "/_reset"),
            ("GET", "/_counts"),
        }:
            return _problem(404, "not_found", f"no resource at {request.path}")
        if route == ("POST", "/_reset"):
            self.reset()
            return _json_reply(200, {"reset": True})
        if route == ("GET", "/_counts"):
            with self._lock:
                counts = {
                    "writes": dict(self._writes),
                    "attempts": dict(self._attempts),
                }
            return _json_reply(200, counts)
        try:
            spec = json.loads(request.body)
            if not isinstance(spec, dict):
                raise ValueError("send a JSON object")
            count = spec.get("count", 1)
            path = spec.get("path")
            if not isinstance(spec.get("fault"), str) or not (
                path is None or isinstance(path, str)
            ):
                raise ValueError("fault must be a string and path a string or null")
            self.arm(spec["fault"], path=path, count=count)
        except ValueError as exc:
            return _problem(400, "bad_fault", str(exc))
        return _json_reply(200, {"armed": spec["fault"], "path": path, "count": count})

    # -- state ------------------------------------------------------------------------

    def _resource(self, path: str, kind: Kind | None = None) -> _Resource:
        resource = self._resources.get(path)
        if resource is None or (kind is not None and resource.kind != kind):
            raise KeyError(path)
        return resource

    def _file_for(self, path: str, kind: Kind) -> Path | None:
        if self.data_dir is None:
            return None
        prefix = "/records/" if kind == "record" else "/docs/"
        name = path[len(prefix) :] if path.startswith(prefix) else ""
        if not name or "/" in name or name.startswith("."):
            return None
        if kind == "record":
            return self.data_dir / f"{name}.json"
        return self.data_dir / name if name.endswith((".txt", ".md")) else None

    def _commit(
        self,
        path: str,
        kind: Kind,
        body: bytes,
        media_type: str,
        document: JsonObject | None,
        file: Path | None,
    ) -> _Resource:
        """Store a new representation with a fresh generation; persist it first."""
        with self._lock:
            generation = self._counter + 1
            resource = _Resource(kind, body, media_type, generation, document, file)
            if file is not None:
                _atomic_write(file, body)
            self._counter = generation
            self._resources[path] = resource
            with contextlib.suppress(OSError):
                self._save_state()
            return resource

    def _load_initial_state(self) -> None:
        state: dict[str, Any] = {}
        if self.data_dir is not None:
            state_file = self.data_dir / STATE_FILE
            with contextlib.suppress(OSError, ValueError):
                loaded = json.loads(state_file.read_text("utf-8"))
                if isinstance(loaded, dict):
                    state = loaded
        known = state.get("resources", {})
        counter = state.get("counter", 0)
        self._counter = counter if isinstance(counter, int) else 0
        fresh: list[tuple[str, _Seed]] = []
        for path, seed in self._seeds.items():
            entry = known.get(path) if isinstance(known, dict) else None
            media_type = seed.media_type
            if seed.kind == "text" and isinstance(entry, dict):
                recorded = entry.get("media_type")
                if isinstance(recorded, str) and _acceptable_text_type(recorded):
                    media_type = recorded
            digest = _digest(media_type, seed.body)
            generation = entry.get("generation") if isinstance(entry, dict) else None
            if (
                isinstance(entry, dict)
                and entry.get("digest") == digest
                and isinstance(generation, int)
                and 0 < generation <= self._counter
            ):
                document = loads_object(seed.body) if seed.kind == "record" else None
                self._resources[path] = _Resource(
                    seed.kind, seed.body, media_type, generation, document, seed.file
                )
            else:
                fresh.append((path, _Seed(seed.kind, seed.body, media_type, seed.file)))
        for path, seed in fresh:
            self._counter += 1
            document = loads_object(seed.body) if seed.kind == "record" else None
            self._resources[path] = _Resource(
                seed.kind, seed.body, seed.media_type, self._counter, document, seed.file
            )
        self._save_state()

    def _save_state(self) -> None:
        if self.data_dir is None:
            return
        state = {
            "counter": self._counter,
            "resources": {
                path: {
                    "generation": res.generation,
                    "digest": _digest(res.media_type, res.body),
                    "media_type": res.media_type,
                }
                for path, res in sorted(self._resources.items())
                if res.file is not None
            },
        }
        data = json.dumps(state, indent=1, sort_keys=True).encode("utf-8")
        _atomic_write(self.data_dir / STATE_FILE, data)


def _is_precondition_fault(name: str) -> bool:
    """Faults consumed by a write whose If-Match is stale (all others need it to pass)."""
    return name == "ignore_if_match" or name.startswith("precondition_status:")


def _valid_fault(name: str) -> bool:
    if name in READ_FAULTS or name in WRITE_FAULTS or name in IF_MATCH_FAULTS:
        return True
    if name == "ignore_if_match":
        return True
    prefix, sep, code = name.partition(":")
    valid_code = bool(sep) and code.isdigit() and 200 <= int(code) <= 599
    return prefix in ("status", "precondition_status") and valid_code


def _json_reply(status: int, payload: Mapping[str, Any]) -> _Reply:
    body = json.dumps(payload, sort_keys=True).encode("utf-8")
    return _Reply(status, [("Content-Type", "application/json")], body)


def serve_forever(
    data_dir: Path | None,
    port: int,
    host: str = "127.0.0.1",
    faults: bool = False,
    *,
    verbose: bool = False,
    on_ready: Callable[[ContractServer], None] | None = None,
) -> None:
    """Run a contract server in the foreground until interrupted (Ctrl-C).

    ``on_ready`` is called once the socket listens, e.g. to print ``server.base_url``.

    Raises:
        ContractDataError: a seed file in ``data_dir`` is malformed.
        OSError: the address cannot be bound.
    """
    server = ContractServer(data_dir, host=host, port=port, faults=faults, verbose=verbose)
    server.start()
    previous: Any = None
    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread:
        previous = signal.signal(signal.SIGTERM, lambda _sig, _frame: server.stopping.set())
    try:
        if on_ready is not None:
            on_ready(server)
        server.stopping.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
