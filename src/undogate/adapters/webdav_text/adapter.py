"""``webdav_text``: a whole UTF-8 text document, replaced by a conditional PUT.

A side of a document change is ``{"text", "media_type"}``: the whole text and the media
type it is served (and written back) with. Any two changes to one document overlap.

With ``create: true`` a change may create a document that does not exist yet (docs/collections.md):
its before side is ``ABSENT``, it is sent as a ``PUT`` with ``If-None-Match: *``
(the media type by the name's suffix), and it is undone by a ``DELETE`` with
``If-Match`` on the tag the read-back gave, an undo offered only once verified.

Text is stricter than records. A record's undo guard compares the touched fields only;
a document's guard needs the current ETag, media type and bytes to be exactly what the
apply recorded. Identical bytes under a different ETag are a conflict, because the
gateway cannot tell an outside rewrite (perhaps with a different meaning elsewhere:
properties, a lock, a sync client's state) from nothing at all. There is no merging.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ...diffs import Hunk, diff_hunks
from ...errors import InvalidRequest, RemoteContractBreach
from ...jobs import ABSENT, Change, ChangeRequest, ChangeView, SideValue
from ...jsonvalue import JsonObject, JsonValue, dumps
from ...net import RemoteResponse
from ...net.etag import ETag, parse_etag
from ...resources import KindSettings, Limits, Resource
from ..base import (
    UNDO_OF_CREATE,
    ConditionalWrite,
    Plan,
    Prober,
    Reader,
    Side,
    Snapshot,
    Verdict,
    absent_snapshot,
    media_type_is,
)
from ..checks.steps import CheckRun, Evidence
from ..checks.whole_resource import WholeResourceAdapter
from ..registry import register
from ..shapes import ChangeShape, string_member
from ..views import text_diff
from .create_probes import CREATE_TITLES, run_create_probes

TEXT_MEDIA_TYPES = frozenset({"text/plain", "text/markdown"})
# A bound above any body the API reads: the document limit is checked at prepare.
TEXT_MAX_CHARACTERS = 10 * 1024 * 1024
TEXT = string_member(
    "text", "the complete new text of the document", TEXT_MAX_CHARACTERS, in_every_digest=True
)
# The answers a write of a document may give when it did what it asked (its read-back
# decides): a PUT 200 or 204, or 201 (Created; Azure Blob answers 201 to every Put Blob);
# a DELETE 200 or 204, or 202 (Accepted: Azure Blob's).
_SUCCESS = {"PUT": frozenset({200, 201, 204}), "DELETE": frozenset({200, 202, 204})}
# What a document change has always counted for the (empty) field objects of a record
# change, besides its texts: kept, so that job and ledger sizes stay comparable.
_EMPTY_FIELD_OBJECTS = len(dumps({})) * 2


def is_text_media_type(value: str) -> bool:
    """``text/plain`` or ``text/markdown``, with no parameter or only ``charset=utf-8``."""
    return media_type_is(value, TEXT_MEDIA_TYPES)


class DocumentSettings(KindSettings):
    # The document need not exist yet: a change may create it (docs/collections.md).
    create: bool | None = None

    def fingerprint_part(self) -> dict[str, Any]:
        # Every resource's digest has carried an empty pointer and allowlist since the
        # first release: kept, so that a document's fingerprint stays what it was.
        part: dict[str, Any] = {"record_pointer": "", "fields": []}
        if self.create is not None:
            part["create"] = self.create
        return part


def _creates(resource: Resource) -> bool:
    settings = resource.settings
    return isinstance(settings, DocumentSettings) and settings.create is True


@register
class WebDavTextAdapter(WholeResourceAdapter):
    kind = "webdav_text"
    noun = "document"
    accept = "text/plain, text/markdown"
    summary = (
        "one UTF-8 text document (text/plain or text/markdown) at one URL; a change "
        "replaces the whole text (conditional PUT)"
    )
    agent_guide = "`text` (the complete new document)."
    settings_model = DocumentSettings
    change_members = (TEXT,)
    change_shapes = (
        ChangeShape(
            ("text",),
            "replace the whole document with this text (or create it, with create: true)",
            example={"text": "# Notes\n\nCall back on Monday.\n"},
        ),
    )

    # -- the config ------------------------------------------------------------------

    def config_problems(self, resource: Resource, limits: Limits) -> list[tuple[str, str]]:
        settings = resource.settings
        if isinstance(settings, DocumentSettings) and settings.create is False:
            return [("create", f"a {self.kind} takes only create: true")]
        return []

    def may_be_absent(self, resource: Resource) -> bool:
        return _creates(resource)

    # -- reading and planning ----------------------------------------------------------

    def parse(self, resource: Resource, media_type: str, body: bytes, limits: Limits) -> JsonValue:
        if not is_text_media_type(media_type):
            raise RemoteContractBreach(
                f"{resource.id} answered with media type {media_type[:60]!r}; a text "
                "document must be text/plain or text/markdown, with no charset or "
                "charset=utf-8",
                resource=resource.id,
            )
        if len(body) > limits.max_document_bytes:
            raise RemoteContractBreach(
                f"{resource.id} is over the {limits.max_document_bytes}-byte limit",
                resource=resource.id,
            )
        try:
            return body.decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            raise RemoteContractBreach(
                f"{resource.id} is not valid UTF-8", resource=resource.id
            ) from None

    def prepare(
        self,
        wire: Reader,
        resource: Resource,
        request: ChangeRequest,
        limits: Limits,
        deadline: float | None,
    ) -> tuple[Plan, Snapshot]:
        snapshot = wire.read(resource, deadline, absent_ok=_creates(resource))
        if snapshot.exists:
            return self.plan(resource, request, snapshot, limits), snapshot
        text = _checked_text(self, resource, request, limits)
        media_type = (
            "text/markdown" if urlsplit(resource.url).path.endswith(".md") else "text/plain"
        )
        return Plan(fields=(), before=ABSENT, after=_document(text, media_type)), snapshot

    def plan(
        self, resource: Resource, request: ChangeRequest, snapshot: Snapshot, limits: Limits
    ) -> Plan:
        text = _checked_text(self, resource, request, limits)
        if text == snapshot.content:
            raise InvalidRequest(
                f"the change to {resource.id} is a no-op: the text is already as asked",
                resource=resource.id,
            )
        return Plan(
            fields=(),
            before=_document(_content(snapshot), snapshot.media_type),
            after=_document(text, snapshot.media_type),
        )

    def payload_size(self, change: Change) -> int:
        texts = (_text(change.before) or "", _text(change.after) or "")
        return _EMPTY_FIELD_OBJECTS + sum(len(text.encode()) for text in texts)

    # -- comparing -----------------------------------------------------------------------

    def current(self, change: Change, snapshot: Snapshot) -> SideValue:
        if not snapshot.exists:
            return ABSENT
        return _document(_content(snapshot), snapshot.media_type)

    def shows(self, change: Change, snapshot: Snapshot, side: Side) -> bool:
        expected = _side(change, side)
        if expected is ABSENT:
            return not snapshot.exists
        text = _text(expected)
        if text is None or not isinstance(snapshot.content, str):
            return False
        return snapshot.media_type == _media_type(expected) and snapshot.content.encode(
            "utf-8"
        ) == text.encode("utf-8")

    def undo_needs(self, change: Change) -> str | None:
        return UNDO_OF_CREATE if change.before is ABSENT else None

    def classify(self, write: ConditionalWrite, response: RemoteResponse) -> Verdict:
        if response.status in _SUCCESS.get(write.method, ()):
            return Verdict.READ_BACK
        return super().classify(write, response)

    def undo_guard_holds(self, change: Change, snapshot: Snapshot) -> bool:
        """The ETag the apply's read-back recorded, the recorded media type, the after-bytes.

        Identical bytes under another ETag do not hold: someone wrote in between.
        """
        if change.applied_etag is None:
            return False
        try:
            applied = parse_etag(change.applied_etag)
        except ValueError:
            return False
        return applied.strong_equals(snapshot.etag) and self.shows(change, snapshot, Side.AFTER)

    def undone(self, resource: Resource, change: Change, snapshot: Snapshot) -> Snapshot | None:
        if change.before is ABSENT:
            return absent_snapshot(target=snapshot.target)
        text, media_type = _text(change.before), _media_type(change.before)
        assert text is not None and media_type is not None, "a text change records both sides"
        return replace(snapshot, content=text, media_type=media_type, exists=True)

    # -- writing -------------------------------------------------------------------------

    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        goal = _side(change, target)
        if goal is ABSENT:
            # The undo of a create: exactly the document it made (its read-back's tag).
            made = change.applied_etag
            assert made is not None, "an applied create always has its read-back's tag"
            return ConditionalWrite("DELETE", resource.url, {"If-Match": made}, b"", made)
        text, media_type = _text(goal), _media_type(goal)
        assert text is not None and media_type is not None, "a text change records both sides"
        if change.before is ABSENT:
            headers = {"Content-Type": media_type, "If-None-Match": "*"}
            return ConditionalWrite("PUT", resource.url, headers, text.encode("utf-8"), None)
        return ConditionalWrite(
            method="PUT",
            url=resource.url,
            headers={"Content-Type": media_type, "If-Match": snapshot.etag.header},
            body=text.encode("utf-8"),
            if_match=snapshot.etag.header,
        )

    # -- other jobs ----------------------------------------------------------------------

    def overlaps(self, held: Sequence[str], wanted: Sequence[str]) -> bool:
        return True  # a change holds the whole document

    # -- what every surface shows --------------------------------------------------------

    def event_diff(self, change: Change, toward: Side) -> JsonObject:
        """Sizes only: the texts live in the job."""
        return {
            "before_bytes": str(len((_text(change.before) or "").encode())),
            "after_bytes": str(len((_text(change.after) or "").encode())),
        }

    def receipt_values(self, change: Change) -> JsonObject:
        before, after = _text(change.before), _text(change.after)
        return {
            "before_text": before,
            "after_text": after,
            "diff": text_diff(before or "", after or ""),
        }

    def preview_values(self, view: ChangeView, change: Change | None) -> JsonObject:
        current = _text(view.current)
        planned = _text(view.planned)
        out: JsonObject = {"current_text": current, "planned_text": planned}
        if planned is not None:
            out["diff"] = text_diff(current or "", planned)
        return out

    def line_diff(self, old: SideValue, new: SideValue | None) -> list[Hunk] | None:
        if new is None:
            return None
        return diff_hunks(_text(old) or "", _text(new) or "")

    def reversibility(self, change: Change) -> str:
        if change.before is ABSENT:
            return (
                "Undo deletes the document this job created (DELETE with If-Match on the "
                "tag its read-back gave), only while it is exactly what this job wrote. "
                "Offered only once verified on a test copy and accepted by a reviewer."
            )
        return (
            "Reversible: undo puts back the recorded text, only while the document is "
            "exactly what this job wrote (same version, same bytes)."
        )

    # -- the endpoint check on a test copy (docs/remote-contract.md) ---------------------
    # The check appends a marker line to the start text and puts the start text back;
    # the copy counts as restored when its bytes and media type are the start's.

    def sibling_url(self, url: str, name: str) -> str:
        """A random file name (same extension) in the document's folder."""
        parts = urlsplit(url)
        if parts.path.endswith("/"):
            return super().sibling_url(url, name)
        folder, _, file_name = parts.path.rpartition("/")
        path = f"{folder}/{name}{PurePosixPath(file_name).suffix}"
        return urlunsplit(parts._replace(path=path))

    def endpoint_check(
        self,
        wire: Prober,
        copy: Resource,
        production: Resource,
        timeout_s: float,
        keep: Callable[[bytes], Path | None],
    ) -> CheckRun:
        run = super().endpoint_check(wire, copy, production, timeout_s, keep)
        if not (run.passed and _creates(copy)):
            return run
        # A document the gateway may create (docs/collections.md): does a create refuse to replace
        # what exists, and is its undo safe here?
        probes = run_create_probes(self, wire, copy, timeout_s)
        titles = {**run.titles, **CREATE_TITLES}
        undos = (UNDO_OF_CREATE,) if probes.verified else ()
        passed = not probes.overwrote
        return CheckRun(run.steps + probes.steps, passed, run.required, titles, undos)

    def marker_request(self, copy: Resource, start: Snapshot, marker: str) -> ChangeRequest:
        return ChangeRequest(copy.id, text=_marked(_content(start), marker))

    def shows_marker(
        self, copy: Resource, start: Snapshot, now: Snapshot, markers: Sequence[str]
    ) -> bool:
        written = {_marked(_content(start), marker) for marker in markers}
        return now.content in written and now.media_type == start.media_type

    def restored(self, copy: Resource, start: Snapshot, now: Snapshot) -> bool:
        return now.digest == start.digest and now.media_type == start.media_type

    def restore_request(self, copy: Resource, start: Snapshot) -> ChangeRequest:
        return ChangeRequest(copy.id, text=_content(start))

    def create_attempt(
        self, copy: Resource, start: Snapshot, url: str, tag: ETag, marker: str
    ) -> ConditionalWrite:
        headers = {"Content-Type": start.media_type, "If-Match": tag.header}
        return ConditionalWrite("PUT", url, headers, f"{marker}\n".encode(), tag.header)

    def restore_evidence(
        self, copy: Resource, start: Snapshot, back: Snapshot, ok: bool
    ) -> tuple[Evidence, str]:
        return {}, "the bytes and media type are exactly the start" if ok else "not the start"

    def restore_by_hand(
        self,
        copy: Resource,
        start: Snapshot,
        now: Snapshot | None,
        keep: Callable[[bytes], Path | None],
    ) -> str:
        original = f"{start.size} bytes, {start.media_type}, {start.digest}"
        saved = keep(_content(start).encode("utf-8"))
        if saved is None:
            return (
                f"restore the test copy by hand: PUT the original {original} back to "
                f"{copy.url}; the exact text as a JSON string: {dumps(_content(start))}"
            )
        return (
            f"restore the test copy by hand: PUT the original {original} back to "
            f"{copy.url}; the exact bytes are saved in {saved}"
        )


def _checked_text(
    adapter: WebDavTextAdapter, resource: Resource, request: ChangeRequest, limits: Limits
) -> str:
    """The whole new text a change asks for.

    Raises: InvalidRequest: not a text change, not valid Unicode, or over the limit."""
    members = request.members
    if members.get("set") or members.get("remove"):
        raise InvalidRequest(
            f"{resource.id} is a text document: send the whole new text, not set/remove",
            resource=resource.id,
        )
    collection = ("create", "delete", "upsert")
    if members.get("id") is not None or any(members.get(name) for name in collection):
        raise InvalidRequest(
            f"{resource.id} is a text document: create, delete, upsert and id belong to a "
            "collection",
            resource=resource.id,
        )
    text = adapter.members(request).get(TEXT.name)
    if not isinstance(text, str):
        raise InvalidRequest(
            f"the change to {resource.id} needs the whole new text", resource=resource.id
        )
    try:
        size = len(text.encode("utf-8", errors="strict"))
    except UnicodeEncodeError:
        raise InvalidRequest(
            f"the new text for {resource.id} is not valid Unicode (lone surrogates)",
            resource=resource.id,
        ) from None
    if size > limits.max_document_bytes:
        raise InvalidRequest(
            f"the new text for {resource.id} would be over the "
            f"{limits.max_document_bytes}-byte limit",
            resource=resource.id,
        )
    return text


def _document(text: str, media_type: str) -> JsonObject:
    return {"text": text, "media_type": media_type}


def _content(snapshot: Snapshot) -> str:
    return snapshot.content if isinstance(snapshot.content, str) else ""


def _side(change: Change, side: Side) -> SideValue:
    return change.before if side is Side.BEFORE else change.after


def _text(side: SideValue | None) -> str | None:
    """A side's whole text (``None``: no side, or no document on it)."""
    if side is None or side is ABSENT:
        return None
    text = side.get("text")
    return text if isinstance(text, str) else None


def _media_type(side: SideValue) -> str | None:
    if side is ABSENT:
        return None
    value = side.get("media_type")
    return value if isinstance(value, str) else None


def _marked(text: str, marker: str) -> str:
    """``text`` with a marker line after it."""
    sep = "" if not text or text.endswith("\n") else "\n"
    return f"{text}{sep}{marker}\n"
