"""The contract server itself: its lifecycle on a socket, and the helpers a test or the
demo uses in-process (read and replace resources as an outside party, arm faults, hold a
write, count writes).
"""

from __future__ import annotations

import base64
import json
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from ..jsonvalue import (
    JsonError,
    JsonObject,
    from_python,
    loads_object,
    parse_pointer,
    resolve_record,
)
from .collections import Collections
from .faults import ArmedFaults
from .httpd import ContractHTTPServer, Reply, Request, json_reply, problem
from .resources import RECORD_MEDIA_TYPE, ContractDataError, ResourceStore, record_body
from .writes import Responder

GATE_LIMIT_S = 60.0  # a held write never waits longer than this, released or not


@dataclass
class WriteGate:
    """Where a held write waits: ``arrived`` once it reached the server, and it goes on
    when ``release()`` is called."""

    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


def _to_document(value: JsonObject | Mapping[str, Any] | str | bytes) -> JsonObject:
    if isinstance(value, (str, bytes)):
        return loads_object(value)
    converted = from_python(dict(value))
    if not isinstance(converted, dict):  # pragma: no cover - a dict converts to a dict
        raise ContractDataError("a record must be a JSON object")
    return converted


class ContractServer:
    """A reference endpoint for the remote contract (docs/remote-contract.md), for demos and tests.

    Records (``application/json``) accept a conditional JSON Patch, JSON Merge Patch or
    PUT of the whole record; text documents (``text/plain``, ``text/markdown``) accept
    only a conditional PUT. With ``data_dir``
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
        token_header: str | None = None,
        verbose: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.host = host
        self.port = port
        self.faults_enabled = faults
        self.hang_seconds = hang_seconds
        self.token = token
        # With a header named here, the token is its whole value (an API key header);
        # otherwise it travels as Authorization: Bearer or Basic.
        self.token_header = token_header
        self.verbose = verbose
        self.stopping = threading.Event()
        self._lock = threading.RLock()
        self._store = ResourceStore(self.data_dir, self._lock)
        self._faults = ArmedFaults()
        self._responder = Responder(self._store, self._faults, self._lock)
        self._collections = Collections(
            self._store,
            self._faults,
            self._lock,
            self._responder.writes,
            self._responder.attempts,
        )
        self._gates: dict[str, WriteGate] = {}
        self._httpd: ContractHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> ContractServer:
        """Listen and serve in a background thread; returns ``self``."""
        if self._httpd is not None:
            return self
        self.stopping.clear()
        httpd = ContractHTTPServer((self.host, self.port), self)
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
            return sorted(self._store.resources)

    def route_lines(self) -> list[str]:
        """What it serves, one line per route, as ``undogate contract-server`` prints at
        start: the URL to put in a resource's ``url``, with its methods."""
        lines = []
        with self._lock:
            for path, res in sorted(self._store.resources.items()):
                if res.kind == "record":
                    methods, what = "GET, PATCH (JSON Patch, If-Match)", "JSON record"
                else:
                    methods, what = "GET, PUT (If-Match)", "text document"
                lines.append(f"  {methods:<34} {self.url(path)}  {what}, {res.media_type}")
        # Collections are made by their first create, so every name is served: the pattern
        # (records a collection holds already are listed above, as records).
        lines.append(
            f"  {'GET, POST (create)':<34} {self.url('/collections/NAME')}  a collection of "
            "JSON records, any NAME; GET filters by ?field=value (docs/collections.md)"
        )
        lines.append(
            f"  {'PUT (If-None-Match: *), DELETE':<34} {self.url('/collections/NAME/ID')}  "
            "one record of it: create, delete (If-Match), GET, PATCH like a record"
        )
        if self.faults_enabled:
            for method, path in (("POST", "/_faults"), ("POST", "/_reset"), ("GET", "/_counts")):
                lines.append(f"  {method:<34} {self.url(path)}  test-only control route")
        return lines

    def write_count(self, path: str) -> int:
        """Successful, effective writes over HTTP to ``path`` (not helper edits)."""
        with self._lock:
            return self._responder.writes[path]

    def attempt_count(self, path: str) -> int:
        """Write requests (PATCH/PUT) that reached ``path``, whatever their outcome."""
        with self._lock:
            return self._responder.attempts[path]

    def write_counts(self) -> dict[str, int]:
        with self._lock:
            writes = self._responder.writes
            return {path: writes[path] for path in sorted(self._store.resources)}

    def reset(self) -> None:
        """Back to the seed data (with new ETags), no faults, zero counts."""
        with self._lock:
            self._faults.clear()
            self._responder.reset()
            self._collections.reset()
            self._store.reset()

    def get_record(self, path: str) -> JsonObject:
        """A copy of the stored record document (lossless values).

        Raises:
            KeyError: no record at ``path``.
        """
        with self._lock:
            return loads_object(self._store.get(path, "record").body)

    def get_text(self, path: str) -> str:
        """Raises: KeyError: no text document at ``path``."""
        with self._lock:
            return self._store.get(path, "text").body.decode("utf-8")

    def raw_bytes(self, path: str) -> bytes:
        """The exact bytes a GET serves. Raises: KeyError: unknown path."""
        with self._lock:
            return self._store.get(path).body

    def etag(self, path: str) -> str:
        """The current ETag header value. Raises: KeyError: unknown path."""
        with self._lock:
            return self._store.get(path).etag.header

    def media_type(self, path: str) -> str:
        """The current ``Content-Type``. Raises: KeyError: unknown path."""
        with self._lock:
            return self._store.get(path).media_type

    def set_record(
        self,
        path: str,
        value: JsonObject | Mapping[str, Any] | str | bytes,
        pointer: str = "",
    ) -> str:
        """Replace a record as an outside party would (new ETag); returns the ETag.

        ``value`` is a mapping or JSON text; the whole record given as text is kept as
        that text, byte for byte. With ``pointer`` only the object at that pointer
        inside the existing document is replaced (e.g. ``"/data"``). An unknown path
        creates the record (persisted only under ``/records/``).

        Raises:
            JsonError: JSON text is malformed or the pointer leads to no object.
        """
        new = _to_document(value)
        with self._lock:
            existing = self._store.resources.get(path)
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
            file = existing.file if existing is not None else self._store.file_for(path, "record")
            as_given = isinstance(value, (str, bytes)) and not pointer
            text = value.encode("utf-8") if isinstance(value, str) else value
            body = text if as_given and isinstance(text, bytes) else record_body(new)
            return self._store.commit(
                path, "record", body, RECORD_MEDIA_TYPE, new, file
            ).etag.header

    def set_field(self, path: str, pointer: str, value: Any) -> str:
        """Set one value inside a record (e.g. ``"/data/status"``); returns the new ETag.

        Raises:
            KeyError: no record at ``path``.
            JsonError: the pointer's parent is not an object.
        """
        converted = from_python(value)
        with self._lock:
            document = loads_object(self._store.get(path, "record").body)
            tokens = parse_pointer(pointer)
            if not tokens:
                raise JsonError("bad_pointer", "use set_record to replace the whole document")
            parent = resolve_record(document, "".join(f"/{t}" for t in tokens[:-1]))
            parent[tokens[-1]] = converted
            resource = self._store.resources[path]
            return self._store.commit(
                path, "record", record_body(document), RECORD_MEDIA_TYPE, document, resource.file
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
            existing = self._store.resources.get(path)
            if existing is not None and existing.kind != "text":
                raise ContractDataError(f"{path} is a record, not a text document")
            file = existing.file if existing is not None else self._store.file_for(path, "text")
            return self._store.commit(path, "text", data, media_type, None, file).etag.header

    def touch(self, path: str) -> str:
        """A new ETag for the same bytes (an outside no-op write); returns it.

        Raises:
            KeyError: unknown path.
        """
        with self._lock:
            res = self._store.get(path)
            return self._store.commit(
                path, res.kind, res.body, res.media_type, res.document, res.file
            ).etag.header

    def collection_records(self, collection: str) -> dict[str, JsonObject]:
        """Every record of a collection (``/collections/<name>``) by id, as stored."""
        with self._lock:
            return {rid: dict(doc) for rid, doc in self._collections.records(collection).items()}

    def refuse_recreate(self, collection: str) -> None:
        """From now on a deleted id of ``collection`` can never be created again (a store
        that keeps tombstones), until ``reset``."""
        with self._lock:
            self._collections.no_recreate.add(collection)

    def link_listing(self, collection: str, *field_values: str) -> None:
        """From now on every listing of ``collection`` carries these ``Link`` fields (one
        each, as given), until ``reset``."""
        with self._lock:
            self._collections.links[collection] = list(field_values)

    def delete_record(self, path: str) -> None:
        """Delete a record as an outside party would. Raises: KeyError: none there."""
        with self._lock:
            self._store.get(path, "record")
            del self._store.resources[path]

    def arm(self, fault: str, path: str | None = None, count: int = 1) -> None:
        """Arm ``fault`` for the next ``count`` matching requests to ``path`` (or any path).

        Stale-write faults (``ignore_if_match``: apply despite a stale If-Match;
        ``precondition_status:NNN``: refuse it with NNN instead of 412) are consumed by a
        write whose If-Match does not match. Write faults (``apply_then_drop``,
        ``apply_then_500``, ``apply_then_hang``, ``hang``,
        ``ok_without_apply``, ``status:NNN``) are consumed by writes that pass validation
        and ``If-Match``; read faults (``weak_etag``, ``duplicate_keys``, ``no_etag``) by
        GETs. ``weak_if_match`` (a ``W/`` tag matches) and ``create_under_if_match`` (a
        conditional write to a missing path creates it): see ``faults``.

        Raises:
            ValueError: unknown fault, bad count or path.
        """
        with self._lock:
            self._faults.arm(fault, path, count)

    def hold_next_write(self, path: str) -> WriteGate:
        """The next write to ``path`` waits, before the server looks at it, until the
        returned gate is released: a slow write whose timing the test controls."""
        gate = WriteGate()
        with self._lock:
            self._gates[path] = gate
        return gate

    def wait_at_gate(self, request: Request) -> None:
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
            return self._faults.listing()

    # -- request handling (called by the handler threads) --------------------------------

    def handle(self, request: Request) -> Reply:
        if request.path.startswith("/_"):
            return self._control(request)
        if self.token_header is not None:
            authorized = (
                self.token is None or request.headers.get(self.token_header.lower()) == self.token
            )
        else:
            authorized = self._authorized(request.headers.get("authorization"))
        if not authorized:
            reply = problem(401, "unauthorized", "a valid token is required")
            reply.headers.append(("WWW-Authenticate", 'Bearer realm="contract"'))
            return reply
        return self._collections.handle(request) or self._responder.handle(request)

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

    def _control(self, request: Request) -> Reply:
        route = (request.method, request.path)
        if not self.faults_enabled or route not in {
            ("POST", "/_faults"),
            ("POST", "/_reset"),
            ("GET", "/_counts"),
        }:
            return problem(404, "not_found", f"no resource at {request.path}")
        if route == ("POST", "/_reset"):
            self.reset()
            return json_reply(200, {"reset": True})
        if route == ("GET", "/_counts"):
            with self._lock:
                counts = {
                    "writes": dict(self._responder.writes),
                    "attempts": dict(self._responder.attempts),
                }
            return json_reply(200, counts)
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
            return problem(400, "bad_fault", str(exc))
        return json_reply(200, {"armed": spec["fault"], "path": path, "count": count})


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
