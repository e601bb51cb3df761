"""Collections on the contract server (docs/collections.md): records that appear and disappear.

Every path ``/collections/<name>`` is a collection (empty until something is created
in it); its records live at ``/collections/<name>/<id>`` and are ordinary records
otherwise (GET, conditional JSON Patch). What a collection adds:

- ``GET /collections/<name>[?field=value...]``: every record, as a JSON array, filtered
  by exact equality on each query member;
- ``PUT /collections/<name>/<id>`` with ``If-None-Match: *``: create that record (201)
  only where none exists (412 otherwise); with ``If-Match``, a record's own conditional
  PUT; without a condition, 428;
- ``POST /collections/<name>``: create a record with a server-chosen id (201, its URL in
  ``Location``, the record with its ``id`` in the body);
- ``DELETE /collections/<name>/<id>`` with ``If-Match``: delete it (204), 412 on a
  stale tag (unless ``ignore_if_match`` is armed), 428 without one, 404 where nothing is.

A collection can be told that a deleted id can never be re-created (``refuse_recreate``:
a store that keeps tombstones; answered 409), or that its listing comes in pages (``Link``
fields sent with every listing, as the test gives them). The write faults fire on these
writes too.
"""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from urllib.parse import parse_qsl

from ..jsonvalue import JsonError, JsonObject, JsonValue, dumps, loads_object
from ..net.etag import if_match_satisfied
from .faults import ANSWER_EXISTING, APPLYING_FAULTS, ArmedFaults, Fault
from .httpd import Reply, Request, problem
from .resources import RECORD_MEDIA_TYPE, ResourceStore, parse_media_type, record_body
from .writes import after_apply_fault as _after_apply_fault

PREFIX = "/collections/"


def collection_of(path: str) -> tuple[str, str | None] | None:
    """(collection path, record id or None) for a path under ``/collections/``."""
    if not path.startswith(PREFIX):
        return None
    parts = path[len(PREFIX) :].split("/")
    if len(parts) == 1 and parts[0]:
        return path, None
    if len(parts) == 2 and parts[0] and parts[1]:
        return PREFIX + parts[0], parts[1]
    return None


class Collections:
    """Answers the collection routes; records are kept in the server's one store."""

    def __init__(
        self,
        store: ResourceStore,
        faults: ArmedFaults,
        lock: threading.RLock,
        writes: Counter[str],
        attempts: Counter[str],
    ) -> None:
        self._store = store
        self._faults = faults
        self._lock = lock
        self._writes = writes
        self._attempts = attempts
        self.no_recreate: set[str] = set()  # collections that keep tombstones
        self.deleted: set[str] = set()  # record paths deleted since the last reset
        self.links: dict[str, list[str]] = {}  # collection → Link field values of a listing

    def reset(self) -> None:
        with self._lock:
            self.no_recreate.clear()
            self.deleted.clear()
            self.links.clear()

    def records(self, collection: str) -> dict[str, JsonObject]:
        """Every record of ``collection`` by id (under the server's lock)."""
        out: dict[str, JsonObject] = {}
        for path, res in sorted(self._store.resources.items()):
            where = collection_of(path)
            found = where is not None and where[0] == collection and where[1] is not None
            if found and where is not None and where[1] is not None and res.document is not None:
                out[where[1]] = res.document
        return out

    def handle(self, request: Request) -> Reply | None:
        """The reply for a collection route, or None when the request is not one."""
        where = collection_of(request.path)
        if where is None:
            return None
        collection, record_id = where
        with self._lock:
            if record_id is None:
                if request.method in ("GET", "HEAD"):
                    return self._list(collection, request.query)
                if request.method == "POST":
                    return self._post(collection, request)
                reply = problem(405, "method_not_allowed", f"{request.method} is not allowed")
                reply.headers.append(("Allow", "GET, HEAD, POST"))
                return reply
            if request.method == "PUT" and "if-match" not in request.headers:
                return self._put(collection, request)
            if request.method == "DELETE":
                return self._delete(request)
        return None  # GET, PATCH, PUT with If-Match of a record: an ordinary record

    def _list(self, collection: str, query: str) -> Reply:
        wanted = parse_qsl(query, keep_blank_values=True)
        listed: list[JsonValue] = [
            record
            for record in self.records(collection).values()
            if all(record.get(k) == v for k, v in wanted)
        ]
        body = dumps(listed, sort_keys=False).encode("utf-8")
        links = [("Link", value) for value in self.links.get(collection, [])]
        return Reply(200, [("Content-Type", RECORD_MEDIA_TYPE), *links], body)

    def _parse(self, request: Request) -> JsonObject | Reply:
        if parse_media_type(request.headers.get("content-type", ""))[0] != RECORD_MEDIA_TYPE:
            return problem(415, "unsupported_media_type", f"send {RECORD_MEDIA_TYPE}")
        try:
            return loads_object(request.body)
        except JsonError as exc:
            return problem(422, "invalid_record", str(exc))

    def _fault(self, path: str) -> Fault | None:
        return self._faults.peek_write(path)

    def _before_apply(self, fault: Fault | None, ok_status: int) -> Reply | None:
        """A write fault that answers instead of applying (None: apply)."""
        if fault is None or fault.name in APPLYING_FAULTS:
            return None
        self._faults.consume(fault)
        if fault.name == "hang":
            return Reply(0, action="hang")
        if fault.name == "ok_without_apply":
            return Reply(ok_status)
        return problem(int(fault.name.partition(":")[2]), "injected_fault", fault.name)

    def _after_apply(self, fault: Fault) -> Reply:
        """A write fault that fires once the write applied: the answer is lost."""
        self._faults.consume(fault)
        return _after_apply_fault(fault)

    def _create(
        self, path: str, record_id: str, document: JsonObject, fault: Fault | None
    ) -> Reply:
        refusal = self._before_apply(fault, 201)
        if refusal is not None:
            return refusal
        document = {**document, "id": record_id}
        made = self._store.commit(
            path, "record", record_body(document), RECORD_MEDIA_TYPE, document, None
        )
        self._writes[path] += 1
        self.deleted.discard(path)
        if fault is not None:
            return self._after_apply(fault)
        return Reply(
            201,
            [
                ("Content-Type", RECORD_MEDIA_TYPE),
                ("ETag", made.etag.header),
                ("Location", path),
            ],
            made.body,
        )

    def _put(self, collection: str, request: Request) -> Reply:
        path = request.path
        self._attempts[path] += 1
        document = self._parse(request)
        if isinstance(document, Reply):
            return document
        if request.headers.get("if-none-match", "").strip() != "*":
            return problem(428, "precondition_required", "create with If-None-Match: *")
        if path in self._store.resources:
            return problem(412, "precondition_failed", "a record with this id exists")
        if collection in self.no_recreate and path in self.deleted:
            return problem(409, "deleted", "a deleted id is never re-created here")
        record_id = path.rsplit("/", 1)[1]
        return self._create(path, record_id, document, self._fault(path))

    def _post(self, collection: str, request: Request) -> Reply:
        self._attempts[collection] += 1
        document = self._parse(request)
        if isinstance(document, Reply):
            return document
        fault = self._fault(collection)
        if fault is not None and fault.name == ANSWER_EXISTING:
            return self._existing(collection, document, fault)
        record_id = secrets.token_hex(8)
        path = f"{collection}/{record_id}"
        reply = self._create(path, record_id, document, fault)
        if path in self._store.resources:
            self._writes[collection] += 1  # a POST writes to the collection, too
        return reply

    def _existing(self, collection: str, document: JsonObject, fault: Fault) -> Reply:
        """A deduplicating store's answer to a create of a record it holds: that record
        (201, its URL), nothing created; an ordinary create where it holds none."""
        for record_id, record in self.records(collection).items():
            if {k: v for k, v in record.items() if k != "id"} == document:
                self._faults.consume(fault)
                path = f"{collection}/{record_id}"
                held = self._store.resources[path]
                headers = [("Content-Type", RECORD_MEDIA_TYPE), ("ETag", held.etag.header)]
                return Reply(201, [*headers, ("Location", path)], held.body)
        record_id = secrets.token_hex(8)
        return self._create(f"{collection}/{record_id}", record_id, document, None)

    def _delete(self, request: Request) -> Reply:
        path = request.path
        self._attempts[path] += 1
        resource = self._store.resources.get(path)
        if resource is None:
            return problem(404, "not_found", f"no record at {path}")
        if_match = request.headers.get("if-match")
        if if_match is None:
            return problem(428, "precondition_required", "send If-Match with the current ETag")
        if not if_match_satisfied(if_match, resource.etag):
            broken = self._faults.precondition(path)
            if broken is None or broken.name != "ignore_if_match":
                return problem(412, "precondition_failed", "If-Match does not match the ETag")
            self._faults.consume(broken)  # a store that deletes whatever the tag says
        fault = self._fault(path)
        refusal = self._before_apply(fault, 204)
        if refusal is not None:
            return refusal
        del self._store.resources[path]
        self.deleted.add(path)
        self._writes[path] += 1
        if fault is not None:
            return self._after_apply(fault)
        return Reply(204)
