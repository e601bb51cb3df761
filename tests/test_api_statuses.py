"""Errors map to HTTP statuses by class (``api/statuses.py``): every error class has one,
the statuses are the ones the API has always given, and nothing unmapped becomes a 400."""

from __future__ import annotations

import inspect

import pytest

from undogate import errors
from undogate.api import error_response
from undogate.api.statuses import (
    STATUS_BY_CODE,
    STATUS_BY_ERROR,
    STATUS_BY_HTTP_CODE,
    status_for,
    status_for_code,
)
from undogate.errors import UndogateError

# The statuses the API gave before the mapping moved to classes (the old STATUS_BY_CODE).
PROMISED = {
    "invalid_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "stale_version": 409,
    "idempotency_key_reused": 409,
    "transition_not_allowed": 409,
    "preview_used": 409,
    "changed_since_preview": 409,
    "conflict": 409,
    "quarantined": 409,
    "later_job_overlaps": 409,
    "reconciliation_blocked": 409,
    "preview_expired": 410,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "limit_reached": 422,
    "quota_exceeded": 429,
    "rate_limited": 429,
    "too_many_streams": 429,
    "remote_contract_breach": 502,
    "remote_unavailable": 502,
    "blocked_address": 502,
    "missing_token": 503,
    "ledger_in_use": 503,
    "ledger_error": 503,
    "config_invalid": 500,
    "internal_error": 500,
}


def _error_classes() -> list[type[UndogateError]]:
    """Every error class errors.py defines, however deep in the tree (new ones too)."""
    found: list[type[UndogateError]] = []
    pending = list(UndogateError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__ == errors.__name__:
            found.append(cls)
    declared = {
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, UndogateError) and obj is not UndogateError
    }
    assert declared <= set(found)
    return found


def test_every_error_class_has_an_explicit_status() -> None:
    classes = _error_classes()
    assert len(classes) >= 29
    missing = sorted(cls.__name__ for cls in classes if cls not in STATUS_BY_ERROR)
    assert missing == [], f"give these a status in api/statuses.py: {missing}"


def test_every_code_has_one_status_whichever_class_carries_it() -> None:
    for cls in _error_classes():
        assert STATUS_BY_CODE[cls.code] == STATUS_BY_ERROR[cls], cls.__name__
        assert status_for_code(cls.code) == status_for(cls.__new__(cls))
    assert not set(STATUS_BY_HTTP_CODE) & {cls.code for cls in _error_classes()}


def test_the_statuses_are_the_ones_the_api_always_gave() -> None:
    assert {code: STATUS_BY_CODE[code] for code in PROMISED} == PROMISED
    assert STATUS_BY_CODE["ledger_error"] == 503 == STATUS_BY_CODE["ledger_missing"]


def test_a_status_is_found_along_the_class_tree() -> None:
    class NarrowerRequest(errors.InvalidRequest):
        code = "narrower_request"

    assert status_for(NarrowerRequest("x")) == 400
    assert status_for(errors.LedgerDamaged("x")) == 503


def test_an_unmapped_error_or_code_is_never_a_silent_400(caplog: pytest.LogCaptureFixture) -> None:
    class Unheard(UndogateError):
        code = "unheard_of"

    assert status_for(Unheard("x")) == 500
    assert "no HTTP status for Unheard" in caplog.text
    with pytest.raises(KeyError):
        status_for_code("unheard_of")
    with pytest.raises(KeyError):
        error_response("unheard_of", "x")
    assert error_response("unheard_of", "x", status=418).status_code == 418
