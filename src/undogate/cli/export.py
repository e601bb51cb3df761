"""``undogate export``: the audit export (``operations.export``), directly on the ledger
(beside the processes serving it), or through a server's API with ``UNDOGATE_URL`` and
``UNDOGATE_KEY`` (an operator key with keys:admin) or ``UNDOGATE_MASTER_KEY``."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlencode

from ..api.gateway_client import ApiClient
from ..auth import ADMIN, MASTER_ENV
from ..errors import InvalidRequest, LedgerInUse
from ..jsonvalue import JsonNumber, JsonObject, JsonValue
from ..operations.export import events_page, jobs_page, write_export
from ..operations.inbox import parse_time
from .serve import open_configured


def _cursor(after: JsonValue) -> str | None:
    if after is None:
        return None
    return after.text if isinstance(after, JsonNumber) else str(after)


def run_export(
    config_path: Path, since: str, directory: Path, environ: Mapping[str, str] | None = None
) -> tuple[int, int, str]:
    """Write the export; returns (events, jobs, ``direct``/``api``).

    Through a server's API when ``UNDOGATE_URL`` and a key (``UNDOGATE_KEY``, or
    ``UNDOGATE_MASTER_KEY``) name one, else directly on the ledger (beside the processes
    serving it).

    Raises:
        UndogateError: a bad ``since``, files already there, or as the ledger or the API
            refuses it (InvalidRequest when an undogate that does not share its ledger
            owns it and no URL or key is set).
    """
    env = os.environ if environ is None else environ
    url = env.get("UNDOGATE_URL")
    key = env.get("UNDOGATE_KEY") or env.get(MASTER_ENV)
    if not url or not key:
        try:
            with open_configured(config_path, environ={}) as svc:
                start = parse_time(since, time.time(), name="--since")

                def direct(what: str, after: JsonValue) -> JsonObject:
                    cursor = _cursor(after)
                    if what == "events":
                        return events_page(svc.context, start, int(cursor or 0))
                    return jobs_page(svc.context, start, cursor)

                events, jobs = write_export(direct, directory)
                return events, jobs, "direct"
        except LedgerInUse as exc:
            raise InvalidRequest(
                f"{exc.message}. To export through its API, set UNDOGATE_URL and "
                f"UNDOGATE_KEY (an operator key with {ADMIN}) or {MASTER_ENV}"
            ) from None
    client = ApiClient(url, key)
    try:

        def over_api(what: str, after: JsonValue) -> JsonObject:
            query = {"since": since, **({"after": _cursor(after)} if after is not None else {})}
            page = client.request("GET", f"/api/v1/admin/{what}?{urlencode(query)}")
            if not isinstance(page, dict):
                raise InvalidRequest("the export's page is not a JSON object")
            return page

        events, jobs = write_export(over_api, directory)
        return events, jobs, "api"
    finally:
        client.close()


__all__ = ["run_export"]
