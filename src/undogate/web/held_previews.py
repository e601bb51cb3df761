"""A preview a review session holds, as the ledger keeps it (``web.sessions``): the
preview as shown and the exact requests its confirm would send, as JSON text without
its token, and the token sealed.

The single-use token is sealed with a key derived from the session's cookie value,
which the ledger never holds (it keys sessions by the value's SHA-256): whoever reads
the ledger cannot confirm a preview with what is stored there. The seal is a one-time
pad from HMAC-SHA256 in counter mode, keyed per (cookie value, handle), and every handle
is fresh, so no pad is ever used twice.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from ..jobs import ABSENT, ChangeView, Observation, Operation, Preview, SideValue
from ..jsonvalue import JsonNumber, JsonObject, JsonValue, dumps, from_python, loads_object


def seal(sid: str, handle: str, token: str) -> str:
    data = token.encode("utf-8")
    return base64.urlsafe_b64encode(_xor(data, _pad(sid, handle, len(data)))).decode("ascii")


def unseal(sid: str, handle: str, sealed: str) -> str | None:
    """The token, or None when ``sealed`` is not what ``seal`` made for this cookie."""
    try:
        data = base64.urlsafe_b64decode(sealed.encode("ascii"))
        return _xor(data, _pad(sid, handle, len(data))).decode("utf-8")
    except (ValueError, UnicodeError):
        return None


def _pad(sid: str, handle: str, size: int) -> bytes:
    key = hmac.new(sid.encode(), b"undogate preview token:" + handle.encode(), hashlib.sha256)
    blocks = b""
    counter = 0
    while len(blocks) < size:
        blocks += hmac.new(key.digest(), counter.to_bytes(4, "big"), hashlib.sha256).digest()
        counter += 1
    return blocks[:size]


def _xor(data: bytes, pad: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, pad, strict=True))


# -- the preview as text (its token left out) -------------------------------------------------


def held_text(preview: Preview) -> str:
    """The held preview as the ledger keeps it: the preview (its token left out), with
    the exact requests confirming it sends."""
    document: JsonObject = {
        "job_id": preview.job_id,
        "operation": preview.operation.value,
        "expires_at": _number(preview.expires_at),
        "changes": [_change(c) for c in preview.changes],
        "blockers": [{k: _plain(v) for k, v in b.items()} for b in preview.blockers],
        "requests": [from_python(r) for r in preview.requests],
        # The passkey step's challenge (the preview digest): not secret, and the page
        # that shows the held preview asks the passkey to sign exactly it.
        "passkey_challenge": preview.passkey_challenge,
    }
    return dumps(document)


def held_from_text(text: str, token: str | None) -> Preview:
    """What ``held_text`` kept: the preview (with ``token``)."""
    document = loads_object(text)
    changes = document["changes"]
    blockers = document["blockers"]
    assert isinstance(changes, list) and isinstance(blockers, list)
    # .get: a preview held before the exact requests were kept had none.
    requests = document.get("requests") or []
    assert isinstance(requests, list)
    return Preview(
        job_id=str(document["job_id"]),
        operation=Operation(str(document["operation"])),
        token=token,
        expires_at=_float(document["expires_at"]),
        changes=tuple(_change_view(c) for c in changes),
        blockers=tuple(_unplain_object(b) for b in blockers),
        # .get: a preview held before passkeys existed needed none.
        passkey_challenge=_optional_text(document.get("passkey_challenge")),
        requests=tuple(dict(r) for r in requests if isinstance(r, dict)),
    )


def _change(view: ChangeView) -> JsonObject:
    return {
        "index": JsonNumber(str(view.index)),
        "resource_id": view.resource_id,
        "kind": view.kind,
        "current_version": view.current_version,
        "current": _side(view.current),
        "planned": None if view.planned is None else _side(view.planned),
        "moved_since_prepare": view.moved_since_prepare,
        "reversible": view.reversible,
        "note": view.note,
        "observation": view.observation.value if view.observation else None,
        "irreversible": view.irreversible,
    }


def _change_view(value: JsonValue) -> ChangeView:
    assert isinstance(value, dict)
    planned = value["planned"]
    observation = value["observation"]
    note = value["note"]
    return ChangeView(
        index=int(_text(value["index"])),
        resource_id=str(value["resource_id"]),
        kind=str(value["kind"]),
        current_version=str(value["current_version"]),
        current=_side_value(value["current"]),
        planned=None if planned is None else _side_value(planned),
        moved_since_prepare=value["moved_since_prepare"] is True,
        reversible=value["reversible"] is True,
        note=str(note) if note is not None else None,
        observation=Observation(str(observation)) if observation is not None else None,
        # .get: a preview held before irreversible marks existed had none.
        irreversible=value.get("irreversible") is True,
    )


def _side(side: SideValue) -> JsonObject:
    return {"absent": True} if side is ABSENT else {"value": side}


def _side_value(value: JsonValue) -> SideValue:
    assert isinstance(value, dict)
    if value.get("absent") is True:
        return ABSENT
    inner = value["value"]
    assert isinstance(inner, dict)
    return inner


def _number(value: float | None) -> JsonValue:
    return None if value is None else JsonNumber(repr(value))


def _float(value: JsonValue) -> float | None:
    return None if value is None else float(_text(value))


def _optional_text(value: JsonValue | None) -> str | None:
    return value if isinstance(value, str) else None


def _text(value: JsonValue) -> str:
    assert isinstance(value, JsonNumber)
    return value.text


def _plain(value: Any) -> JsonValue:
    """A blocker's value (ints and strings) as JSON."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return JsonNumber(str(value))
    return str(value)


def _unplain_object(value: JsonValue) -> dict[str, Any]:
    assert isinstance(value, dict)
    return {k: int(v.text) if isinstance(v, JsonNumber) else v for k, v in value.items()}
