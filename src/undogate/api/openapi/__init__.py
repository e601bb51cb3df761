"""The OpenAPI 3.1 document of the HTTP API, served at ``/openapi.json``.

Written by hand where no kind decides it (``schemas``, ``paths``, ``undo_offers``,
``inbox_export``, ``rewinds``), because bodies are parsed and rendered losslessly
(numbers keep their exact text), which a model-driven generator would not describe;
generated from the registry where the kinds decide it (``kinds``: a change's members
and shapes, the kinds' names). ``tests/test_api_schema`` checks the running app against
it with schemathesis.
"""

from __future__ import annotations

import copy

from ... import __version__
from .inbox_export import INBOX_EXPORT_PATHS, INBOX_EXPORT_SCHEMAS, REJECT_BODY
from .kinds import kind_schemas
from .paths import PATHS
from .rewinds import REWIND_PATHS, REWIND_SCHEMAS
from .schemas import SCHEMAS, S
from .undo_offers import SCHEMAS as UNDO_OFFER_SCHEMAS


def openapi_document() -> S:
    """The OpenAPI 3.1 description of every route the API serves."""
    paths = copy.deepcopy({**PATHS, **INBOX_EXPORT_PATHS, **REWIND_PATHS})
    paths["/api/v1/jobs/{job_id}/reject"]["post"]["requestBody"] = REJECT_BODY
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "undogate",
            "version": __version__,
            "description": "Agents prepare changes, people confirm them, every write has a "
            "receipt. JSON numbers are kept as exact text in both directions.",
        },
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                **SCHEMAS,
                **kind_schemas(),
                **UNDO_OFFER_SCHEMAS,
                **INBOX_EXPORT_SCHEMAS,
                **REWIND_SCHEMAS,
            },
        },
        "paths": paths,
    }


__all__ = ["openapi_document"]
