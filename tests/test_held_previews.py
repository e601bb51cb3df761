"""A preview a review session holds comes back from the ledger as it was shown.

``web/held_previews.py`` writes a ``Preview`` and its ``ChangeView``s field by field;
a field added to either and not to it would be dropped from every held preview (the
collections' ``irreversible`` mark once was). These tests fail on such a field.
"""

from __future__ import annotations

import dataclasses

from undogate.jobs import ABSENT, ChangeView, Observation, Operation, Preview
from undogate.jsonvalue import JsonNumber, loads_object
from undogate.web.held_previews import held_from_text, held_text, seal, unseal


def _every_field_set() -> Preview:
    """A preview whose every field differs from its default."""
    changed = ChangeView(
        index=1,
        resource_id="customer",
        kind="json_record",
        current_version='"v3"',
        current={"status": "lead\u200b"},
        planned={"status": "customer", "n": JsonNumber("1.50")},
        moved_since_prepare=True,
        reversible=True,
        note="moved since prepare",
        observation=Observation.LOOKS_APPLIED,
        irreversible=True,
    )
    created = dataclasses.replace(changed, index=2, current=ABSENT, planned=None)
    return Preview(
        job_id="job_1",
        operation=Operation.UNDO,
        token="tok_secret",
        expires_at=1764000000.25,
        changes=(changed, created),
        blockers=({"code": "later_job", "job": "job_2", "change": 1},),
        passkey_challenge="Y2hhbGxlbmdl",
        requests=(
            {
                "method": "PATCH",
                "url": "http://127.0.0.1/records/a",
                "headers": {"Content-Type": "application/json-patch+json", "If-Match": '"v3"'},
                "body": '[{"op":"replace","path":"/status","value":"customer\u200b"}]\n',
                "authentication": {"scheme": "bearer", "summary": "a bearer token", "adds": []},
            },
            {
                "method": "PUT",
                "url": "http://127.0.0.1/docs/b",
                "headers": {},
                "body": "caf\u00e9\n",
                "authentication": None,
            },
        ),
    )


def test_a_held_preview_comes_back_equal_with_its_requests() -> None:
    preview = _every_field_set()
    text = held_text(preview)
    assert "tok_secret" not in text  # the token is sealed apart, never in this text
    back = held_from_text(text, preview.token)
    assert back == preview
    assert back.requests == preview.requests


def test_the_held_text_names_every_field_of_a_preview_and_of_a_change() -> None:
    document = loads_object(held_text(_every_field_set()))
    preview_fields = {f.name for f in dataclasses.fields(Preview)} - {"token"}
    assert preview_fields <= set(document), preview_fields - set(document)
    changes = document["changes"]
    assert isinstance(changes, list) and isinstance(changes[0], dict)
    change_fields = {f.name for f in dataclasses.fields(ChangeView)}
    assert change_fields == set(changes[0]), change_fields ^ set(changes[0])


def test_a_sealed_token_opens_only_with_its_cookie_and_handle() -> None:
    sealed = seal("cookie-value", "h1", "tok_secret")
    assert "tok_secret" not in sealed
    assert unseal("cookie-value", "h1", sealed) == "tok_secret"
    assert unseal("cookie-value", "h2", sealed) != "tok_secret"
    assert unseal("another-cookie", "h1", sealed) != "tok_secret"
