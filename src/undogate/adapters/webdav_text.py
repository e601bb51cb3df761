"""``webdav_text``: a whole UTF-8 text document, replaced by a conditional PUT.

Text is stricter than records. A record's undo guard compares the touched fields only;
a document's guard needs the current ETag, media type and bytes to be exactly what the
apply recorded. Identical bytes under a different ETag are a conflict, because the
gateway cannot tell an outside rewrite (perhaps with a different meaning elsewhere:
properties, a lock, a sync client's state) from nothing at all. There is no merging.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InvalidRequest, RemoteContractBreach
from ..etag import parse_etag
from ..jobs import Change, ChangeRequest, ResourceKind
from ..jsonvalue import JsonObject
from ..resources import Resource
from .base import Adapter, ConditionalWrite, Plan, Side, Snapshot, media_type_is

TEXT_MEDIA_TYPES = frozenset({"text/plain", "text/markdown"})


def is_text_media_type(value: str) -> bool:
    """``text/plain`` or ``text/markdown``, with no parameter or only ``charset=utf-8``."""
    return media_type_is(value, TEXT_MEDIA_TYPES)


@dataclass
class WebDavTextAdapter(Adapter):
    kind: ResourceKind = field(init=False, default=ResourceKind.WEBDAV_TEXT)
    accept: str = field(init=False, default="text/plain, text/markdown")

    def parse(
        self, resource: Resource, media_type: str, body: bytes
    ) -> tuple[JsonObject | None, str | None]:
        if not is_text_media_type(media_type):
            raise RemoteContractBreach(
                f"{resource.id} answered with media type {media_type[:60]!r}; a text "
                "document must be text/plain or text/markdown, with no charset or "
                "charset=utf-8",
                resource=resource.id,
            )
        if len(body) > self.limits.max_document_bytes:
            raise RemoteContractBreach(
                f"{resource.id} is over the {self.limits.max_document_bytes}-byte limit",
                resource=resource.id,
            )
        try:
            text = body.decode("utf-8", errors="strict")
        except UnicodeDecodeError:
            raise RemoteContractBreach(
                f"{resource.id} is not valid UTF-8", resource=resource.id
            ) from None
        return None, text

    def plan(self, resource: Resource, request: ChangeRequest, snapshot: Snapshot) -> Plan:
        if request.set or request.remove:
            raise InvalidRequest(
                f"{resource.id} is a text document: send the whole new text, not set/remove",
                resource=resource.id,
            )
        if request.text is None:
            raise InvalidRequest(
                f"the change to {resource.id} needs the whole new text", resource=resource.id
            )
        try:
            size = len(request.text.encode("utf-8", errors="strict"))
        except UnicodeEncodeError:
            raise InvalidRequest(
                f"the new text for {resource.id} is not valid Unicode (lone surrogates)",
                resource=resource.id,
            ) from None
        if request.text == snapshot.text:
            raise InvalidRequest(
                f"the change to {resource.id} is a no-op: the text is already as asked",
                resource=resource.id,
            )
        if size > self.limits.max_document_bytes:
            raise InvalidRequest(
                f"the new text for {resource.id} would be over the "
                f"{self.limits.max_document_bytes}-byte limit",
                resource=resource.id,
            )
        return Plan(
            fields=(),
            before=None,
            after=None,
            before_text=snapshot.text,
            after_text=request.text,
            media_type=snapshot.media_type,
        )

    def shows(self, change: Change, snapshot: Snapshot, side: Side) -> bool:
        expected = change.after_text if side is Side.AFTER else change.before_text
        if expected is None or snapshot.text is None:
            return False
        return snapshot.media_type == change.media_type and snapshot.text.encode(
            "utf-8"
        ) == expected.encode("utf-8")

    def build_write(
        self, resource: Resource, change: Change, snapshot: Snapshot, target: Side
    ) -> ConditionalWrite:
        goal = change.after_text if target is Side.AFTER else change.before_text
        assert goal is not None, "a text change records both sides"
        return ConditionalWrite(
            method="PUT",
            url=resource.url,
            headers={"Content-Type": change.media_type, "If-Match": snapshot.etag.header},
            body=goal.encode("utf-8"),
            if_match=snapshot.etag.header,
        )

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
