"""The one mapping from errors to HTTP statuses, used by the API, the review pages and
``/mcp``.

A status belongs to an error *class* and is looked up along the error's class tree
(``type(exc).__mro__``, as Starlette finds exception handlers), so a subclass answers
like its parent unless it names its own status. Every class in ``errors.py`` is listed
here explicitly (``tests/test_api_statuses.py`` fails otherwise), and a code nobody
mapped is a bug that shows, never a silent 400.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType

from ..errors import (
    AgentStopped,
    Ambiguous,
    BlockedAddress,
    ChangedSincePreview,
    ConfigError,
    Conflict,
    EnrolmentCodeExpired,
    EnrolmentCodeRequired,
    EnrolmentCodeUnknown,
    EnrolmentCodeUsed,
    EnrolmentNotNeeded,
    EnrolmentRefused,
    Forbidden,
    IdempotencyKeyReused,
    InvalidRequest,
    IrreversibleNotAcknowledged,
    LaterJobOverlaps,
    LedgerBusy,
    LedgerDamaged,
    LedgerError,
    LedgerForeign,
    LedgerInUse,
    LedgerMissing,
    LedgerOnNetworkFilesystem,
    LedgerTampered,
    LimitReached,
    MissingToken,
    NotExpressible,
    NotFound,
    PasskeyApprovalExpired,
    PasskeyApprovalRequired,
    PasskeyNotVerified,
    PasskeyRefused,
    PasskeyReplayed,
    PasskeyRequired,
    PasskeyRevoked,
    PasskeyUnknown,
    PasskeyWrongAct,
    PasskeyWrongPreview,
    PayloadTooLarge,
    PreviewExpired,
    PreviewUsed,
    Quarantined,
    QuotaExceeded,
    RateLimited,
    ReconciliationBlocked,
    RemoteContractBreach,
    RemoteUnavailable,
    RewindBlocked,
    StaleVersion,
    TooManyStreams,
    TransitionNotAllowed,
    Unauthorized,
    UndogateError,
    UndoNotVerified,
)

log = logging.getLogger(__name__)

STATUS_BY_ERROR: Mapping[type[UndogateError], int] = MappingProxyType(
    {
        InvalidRequest: 400,
        Unauthorized: 401,
        Forbidden: 403,
        PasskeyRequired: 403,
        PasskeyApprovalRequired: 403,
        PasskeyRefused: 403,
        PasskeyNotVerified: 403,
        PasskeyWrongPreview: 403,
        PasskeyWrongAct: 403,
        PasskeyApprovalExpired: 410,
        PasskeyReplayed: 409,
        PasskeyRevoked: 403,
        PasskeyUnknown: 403,
        EnrolmentRefused: 403,
        EnrolmentCodeRequired: 403,
        EnrolmentCodeUnknown: 403,
        EnrolmentCodeExpired: 410,
        EnrolmentCodeUsed: 409,
        EnrolmentNotNeeded: 409,
        NotFound: 404,
        StaleVersion: 409,
        IdempotencyKeyReused: 409,
        TransitionNotAllowed: 409,
        PreviewUsed: 409,
        ChangedSincePreview: 409,
        Conflict: 409,
        Quarantined: 409,
        LaterJobOverlaps: 409,
        ReconciliationBlocked: 409,
        Ambiguous: 409,
        IrreversibleNotAcknowledged: 409,
        UndoNotVerified: 409,
        AgentStopped: 409,
        RewindBlocked: 409,
        PreviewExpired: 410,
        PayloadTooLarge: 413,
        LimitReached: 422,
        NotExpressible: 422,
        QuotaExceeded: 429,
        RateLimited: 429,
        TooManyStreams: 429,
        RemoteContractBreach: 502,
        RemoteUnavailable: 502,
        BlockedAddress: 502,
        MissingToken: 503,
        LedgerInUse: 503,
        LedgerError: 503,
        LedgerDamaged: 503,
        LedgerBusy: 503,
        LedgerOnNetworkFilesystem: 503,
        LedgerMissing: 503,
        # Not a pause: the ledger disagrees with its own chain until a person looks.
        LedgerTampered: 500,
        LedgerForeign: 503,
        ConfigError: 500,
    }
)

# Codes only the HTTP layer gives: no domain error carries them.
STATUS_BY_HTTP_CODE: Mapping[str, int] = MappingProxyType(
    {"method_not_allowed": 405, "unsupported_media_type": 415, "internal_error": 500}
)

# The same mapping by stable code, for answers built from a code (a blocked preview's
# first blocker, the HTTP layer's own refusals).
STATUS_BY_CODE: Mapping[str, int] = MappingProxyType(
    {**{cls.code: status for cls, status in STATUS_BY_ERROR.items()}, **STATUS_BY_HTTP_CODE}
)

UNMAPPED_STATUS = 500


def status_for(exc: UndogateError) -> int:
    """The HTTP status of an error: that of the nearest class in its tree that has one.

    An error whose tree names none (a bug: the tests require every class in
    ``errors.py``) is a 500, logged, never a silent 400.
    """
    for cls in type(exc).__mro__:
        status = STATUS_BY_ERROR.get(cls)
        if status is not None:
            return status
    log.error("no HTTP status for %s (code %r)", type(exc).__name__, exc.code)
    return UNMAPPED_STATUS


def status_for_code(code: str) -> int:
    """The HTTP status of a stable code.

    Raises:
        KeyError: a code no error class or HTTP refusal carries.
    """
    return STATUS_BY_CODE[code]


__all__ = [
    "STATUS_BY_CODE",
    "STATUS_BY_ERROR",
    "STATUS_BY_HTTP_CODE",
    "status_for",
    "status_for_code",
]
