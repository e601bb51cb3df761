"""The OpenAPI parts of records that appear and disappear (docs/collections.md), whatever their
kind: the acknowledgement a confirm may carry, what a preview says of an irreversible
change, and the undo-offer routes' schemas."""

from __future__ import annotations

from typing import Any

from ...adapters import RECREATE, UNDO_OF_CREATE

S = dict[str, Any]
_NAMES: S = {"type": "array", "items": {"enum": [UNDO_OF_CREATE, RECREATE]}}
_WHEN: S = {"type": ["number", "null"]}

CONFIRM_MEMBERS: S = {
    "acknowledge_irreversible": {
        "type": "boolean",
        "description": "needed to apply a change whose undo is not offered (a create or "
        "delete not verified on a test copy and accepted); refused as "
        "irreversible_not_acknowledged otherwise",
    }
}

PREVIEW_CHANGE_MEMBERS: S = {
    "irreversible": {
        "type": "boolean",
        "description": "the gateway will not offer to undo this change",
    },
    "operation": {"type": ["string", "null"], "enum": ["create", "delete", "update", None]},
    "record_id": {"type": ["string", "null"]},
}

PREVIEW_MEMBERS: S = {
    "acknowledgement_required": {
        "type": "boolean",
        "description": "confirming needs acknowledge_irreversible",
    }
}

SCHEMAS: S = {
    "UndoOffer": {
        "type": "object",
        "required": ["resource", "verified", "accepted", "awaiting_acceptance"],
        "properties": {
            "resource": {"type": "string"},
            "check_id": {"type": ["integer", "null"]},
            "checked_at": _WHEN,
            "verified": _NAMES,
            "accepted": _NAMES,
            "accepted_at": _WHEN,
            "awaiting_acceptance": _NAMES,
            # base64url of the acceptance's digest (docs/proof.md), where accepting
            # needs the reviewer's passkey, and the expiry that document carries
            # (milliseconds since the epoch; the acceptance sends it back)
            "passkey_challenge": {"type": ["string", "null"]},
            "passkey_expires_at_ms": {"type": ["integer", "null"]},
        },
    },
    "UndoAcceptanceRequest": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            # the PublicKeyCredential JSON of navigator.credentials.get over the
            # offer's passkey_challenge, when accepting needs one, with the offer's
            # passkey_expires_at_ms
            "passkey_assertion": {"type": "object"},
            "passkey_expires_at_ms": {"type": "integer"},
        },
    },
}

RESOURCE_ID: S = {
    "name": "resource_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
}
