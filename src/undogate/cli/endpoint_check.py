"""``undogate check-endpoint``: the endpoint check (SPEC §11) directly on the ledger
when no server owns it, or through the running server's API when one does."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..api.gateway_client import ApiClient
from ..errors import InvalidRequest, LedgerInUse
from ..jsonvalue import JsonObject
from ..operations.endpoint_check import CheckResult, check_endpoint, result_view
from .serve import open_configured

ENDPOINT_CHECK_PATH = "/api/v1/endpoint-checks"
ENDPOINT_CHECK_TIMEOUT_S = 300.0  # a whole check: about a dozen requests, each bounded


def run_endpoint_check(
    config_path: Path, test_copy_id: str, environ: Mapping[str, str]
) -> tuple[JsonObject, str]:
    """Run the check directly on the ledger when no server owns it, or through the
    server's API (``UNDOGATE_URL`` + ``UNDOGATE_KEY``, an operator key with
    agents:write) when one does. Returns the ``result_view`` and the path taken
    (``direct`` or ``api``).

    Raises:
        ConfigError, LedgerError, InvalidRequest (a server owns the ledger and no URL
        or key is set), ApiError (the server refused), and what ``check_endpoint`` raises.
    """
    try:
        return result_view(_run_directly(config_path, test_copy_id, environ)), "direct"
    except LedgerInUse as exc:
        url, key = environ.get("UNDOGATE_URL"), environ.get("UNDOGATE_KEY")
        if not url or not key:
            raise InvalidRequest(
                f"{exc.message}. To check while it serves, set UNDOGATE_URL and "
                "UNDOGATE_KEY (an operator key with agents:write)"
            ) from None
    client = ApiClient(url, key, timeout=ENDPOINT_CHECK_TIMEOUT_S)
    try:
        view = client.request("POST", ENDPOINT_CHECK_PATH, {"resource": test_copy_id})
    finally:
        client.close()
    if not isinstance(view, dict):
        raise InvalidRequest(f"{url} answered the check with something other than an object")
    return view, "api"


def _run_directly(config_path: Path, test_copy_id: str, environ: Mapping[str, str]) -> CheckResult:
    """Load the config, own the ledger for the check, run it, close everything.

    Raises:
        ConfigError, LedgerInUse (a server owns the ledger), LedgerError, and what
        ``check_endpoint`` raises.
    """
    with open_configured(config_path, environ) as service:
        return check_endpoint(service.context, test_copy_id)


__all__ = ["run_endpoint_check"]
