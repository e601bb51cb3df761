"""How the contract server answers a request for a resource: a read (with its read faults)
or a conditional write: to a record, a JSON Patch (RFC 6902), a JSON Merge Patch (RFC
7396) or a PUT of the whole record (kept byte for byte as sent); to a text document, a
PUT.

A write is validated first, then its ``If-Match`` is compared with the current ETag and
the write applied, both under the server's one lock, so a stale writer can never slip in
between. Armed faults fire at fixed points around that: a stale-write fault at the
comparison, a write fault just before or just after applying.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, cast

import jsonpatch
import jsonpointer

from ..jsonvalue import JsonError, JsonObject, loads, loads_object
from ..net.etag import if_match_satisfied
from .faults import (
    APPLYING_FAULTS,
    CREATE_UNDER_IF_MATCH,
    WEAK_IF_MATCH,
    ArmedFaults,
    Fault,
    created_by,
    duplicate_first_key,
    weakly_matches,
)
from .httpd import Reply, Request, problem
from .resources import (
    MERGE_PATCH_MEDIA_TYPE,
    RECORD_MEDIA_TYPE,
    Resource,
    ResourceStore,
    acceptable_text_type,
    merge_patch,
    parse_media_type,
    record_body,
)

JSON_PATCH_MEDIA_TYPE = "application/json-patch+json"


class Responder:
    """Answers one authorized request for a resource path, and counts the writes.

    ``writes`` counts effective writes per path, ``attempts`` every write request that
    reached a resource, whatever its outcome.
    """

    def __init__(self, store: ResourceStore, faults: ArmedFaults, lock: threading.RLock) -> None:
        self._store = store
        self._faults = faults
        self._lock = lock
        self._created_by_fault: set[str] = set()  # deletable again (create_under_if_match)
        self.writes: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()

    def reset(self) -> None:
        with self._lock:
            self._created_by_fault.clear()
            self.writes.clear()
            self.attempts.clear()

    def handle(self, request: Request) -> Reply:
        with self._lock:
            resource = self._store.resources.get(request.path)
            if resource is None:
                created = self._create_under_if_match(request)
                return created or problem(404, "not_found", f"no resource at {request.path}")
            if request.method == "DELETE" and request.path in self._created_by_fault:
                return self._delete_created(request.path, resource)
            allowed = "GET, HEAD, PATCH, PUT" if resource.kind == "record" else "GET, HEAD, PUT"
            if request.method in ("GET", "HEAD"):
                return self._read(request.path, resource, head=request.method == "HEAD")
            if request.method == "PATCH" and resource.kind == "record":
                return self._patch(request, resource)
            if request.method == "PUT" and resource.kind == "record":
                return self._put_record(request, resource)
            if request.method == "PUT" and resource.kind == "text":
                return self._put(request, resource)
        reply = problem(405, "method_not_allowed", f"{request.method} is not allowed here")
        reply.headers.append(("Allow", allowed))
        return reply

    def _create_under_if_match(self, request: Request) -> Reply | None:
        fault = self._faults.named(CREATE_UNDER_IF_MATCH, request.path)
        if fault is None or "if-match" not in request.headers:
            return None
        made = created_by(request.method, request.headers.get("content-type", ""), request.body)
        if made is None:
            return None
        self._faults.consume(fault)
        self.attempts[request.path] += 1
        res = self._store.commit(
            request.path, made.kind, made.body, made.media_type, made.document, None
        )
        self.writes[request.path] += 1
        self._created_by_fault.add(request.path)
        return Reply(201, [("ETag", res.etag.header)])

    def _delete_created(self, path: str, resource: Resource) -> Reply:
        fault = self._faults.peek_write(path)
        if fault is not None and fault.name not in APPLYING_FAULTS:
            return self._fire_write_fault(fault, resource, ok_status=204)
        del self._store.resources[path]
        self._created_by_fault.discard(path)
        return Reply(204)

    def _read(self, path: str, resource: Resource, *, head: bool) -> Reply:
        body = resource.body
        etag: str | None = resource.etag.header
        fault = None if head else self._faults.take_read(path, resource.kind)
        if fault == "weak_etag":
            etag = "W/" + resource.etag.header
        elif fault == "no_etag":
            etag = None
        elif fault == "duplicate_keys":
            body = duplicate_first_key(body)
        headers = [("Content-Type", resource.media_type)]
        if etag is not None:
            headers.append(("ETag", etag))
        return Reply(200, headers, body)

    def _patch(self, request: Request, resource: Resource) -> Reply:
        path = request.path
        self.attempts[path] += 1
        content_type = parse_media_type(request.headers.get("content-type", ""))[0]
        if content_type == MERGE_PATCH_MEDIA_TYPE:
            return self._merge(request, resource)
        if content_type != JSON_PATCH_MEDIA_TYPE:
            return problem(
                415,
                "unsupported_media_type",
                f"send {JSON_PATCH_MEDIA_TYPE} or {MERGE_PATCH_MEDIA_TYPE}",
            )
        try:
            operations = loads(request.body)
        except JsonError as exc:
            return problem(400, "malformed_patch", str(exc))
        if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
            return problem(422, "invalid_patch", "a JSON Patch is an array of objects")
        try:
            patch = jsonpatch.JsonPatch(cast(list[dict[str, Any]], operations))
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            return problem(422, "invalid_patch", str(exc))
        refusal = self._check_precondition(request, resource)
        if refusal is not None:
            return refusal
        fault = self._faults.peek_write(path)
        if fault is not None and fault.name not in APPLYING_FAULTS:
            return self._fire_write_fault(fault, resource, ok_status=200)
        try:
            result = patch.apply(resource.document, in_place=False)
        except jsonpatch.JsonPatchTestFailed as exc:
            return problem(409, "test_failed", str(exc))
        except (
            jsonpatch.JsonPatchException,
            jsonpointer.JsonPointerException,
            KeyError,
            IndexError,
            TypeError,
            ValueError,
        ) as exc:
            return problem(422, "patch_not_applicable", str(exc))
        if not isinstance(result, dict):
            return problem(422, "not_object", "the patched document must be a JSON object")
        document = cast(JsonObject, result)
        return self._commit_record(path, resource, document, record_body(document), fault)

    def _merge(self, request: Request, resource: Resource) -> Reply:
        try:
            patch = loads(request.body)
        except JsonError as exc:
            return problem(400, "malformed_patch", str(exc))
        refusal = self._check_precondition(request, resource)
        if refusal is not None:
            return refusal
        fault = self._faults.peek_write(request.path)
        if fault is not None and fault.name not in APPLYING_FAULTS:
            return self._fire_write_fault(fault, resource, ok_status=200)
        result = merge_patch(resource.document, patch)
        if not isinstance(result, dict):
            return problem(422, "not_object", "the patched document must be a JSON object")
        return self._commit_record(request.path, resource, result, record_body(result), fault)

    def _put_record(self, request: Request, resource: Resource) -> Reply:
        """The whole record replaced, its bytes kept exactly as sent."""
        self.attempts[request.path] += 1
        if parse_media_type(request.headers.get("content-type", ""))[0] != RECORD_MEDIA_TYPE:
            return problem(415, "unsupported_media_type", f"send {RECORD_MEDIA_TYPE}")
        try:
            document = loads_object(request.body)
        except JsonError as exc:
            return problem(422, "invalid_record", str(exc))
        refusal = self._check_precondition(request, resource)
        if refusal is not None:
            return refusal
        fault = self._faults.peek_write(request.path)
        if fault is not None and fault.name not in APPLYING_FAULTS:
            return self._fire_write_fault(fault, resource, ok_status=200)
        return self._commit_record(request.path, resource, document, request.body, fault)

    def _commit_record(
        self,
        path: str,
        resource: Resource,
        document: JsonObject,
        body: bytes,
        fault: Fault | None,
    ) -> Reply:
        try:
            updated = self._store.commit(
                path, "record", body, RECORD_MEDIA_TYPE, document, resource.file
            )
        except (OSError, TypeError) as exc:
            return problem(500, "write_failed", str(exc))
        self.writes[path] += 1
        if fault is not None:
            self._faults.consume(fault)
            return after_apply_fault(fault)
        return Reply(
            200,
            [("Content-Type", RECORD_MEDIA_TYPE), ("ETag", updated.etag.header)],
            updated.body,
        )

    def _put(self, request: Request, resource: Resource) -> Reply:
        path = request.path
        self.attempts[path] += 1
        content_type = request.headers.get("content-type", "").strip()
        if not acceptable_text_type(content_type):
            return problem(
                415,
                "unsupported_media_type",
                "send text/plain or text/markdown, with no charset or charset=utf-8",
            )
        try:
            request.body.decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            return problem(415, "invalid_utf8", "the body is not valid UTF-8")
        refusal = self._check_precondition(request, resource)
        if refusal is not None:
            return refusal
        fault = self._faults.peek_write(path)
        if fault is not None and fault.name not in APPLYING_FAULTS:
            return self._fire_write_fault(fault, resource, ok_status=204)
        try:
            updated = self._store.commit(
                path, "text", request.body, content_type, None, resource.file
            )
        except OSError as exc:
            return problem(500, "write_failed", str(exc))
        self.writes[path] += 1
        if fault is not None:
            self._faults.consume(fault)
            return after_apply_fault(fault)
        return Reply(204, [("ETag", updated.etag.header)])

    def _check_precondition(self, request: Request, resource: Resource) -> Reply | None:
        if_match = request.headers.get("if-match")
        if if_match is None:
            return problem(428, "precondition_required", "send If-Match with the current ETag")
        if not if_match_satisfied(if_match, resource.etag):
            weak = self._faults.named(WEAK_IF_MATCH, request.path)
            if weak is not None and weakly_matches(if_match, resource.etag):
                self._faults.consume(weak)
                return None
            fault = self._faults.precondition(request.path)
            if fault is not None:
                # A server that breaks the contract on a stale write, on purpose.
                self._faults.consume(fault)
                if fault.name == "ignore_if_match":
                    return None
                status = int(fault.name.partition(":")[2])
                return problem(status, "injected_fault", fault.name)
            return problem(412, "precondition_failed", "If-Match does not match the ETag")
        return None

    def _fire_write_fault(self, fault: Fault, resource: Resource, *, ok_status: int) -> Reply:
        self._faults.consume(fault)
        if fault.name == "hang":
            return Reply(0, action="hang")
        if fault.name == "ok_without_apply":
            headers = [("ETag", resource.etag.header)]
            if ok_status == 204:
                return Reply(204, headers)
            return Reply(200, [("Content-Type", resource.media_type), *headers], resource.body)
        status = int(fault.name.partition(":")[2])
        if status in (204, 304):
            return Reply(status)
        return problem(status, "injected_fault", fault.name)


def after_apply_fault(fault: Fault) -> Reply:
    if fault.name == "apply_then_drop":
        return Reply(0, action="drop")
    if fault.name == "apply_then_hang":
        return Reply(0, action="hang")
    return problem(500, "injected_fault", fault.name)
