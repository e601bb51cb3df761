"""``undogate check-endpoint``: the endpoint check (docs/remote-contract.md) directly on
the ledger (beside the processes serving it), or through a server's API
(``UNDOGATE_URL``)."""

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
    """Run the check through a server's API when ``UNDOGATE_URL`` and ``UNDOGATE_KEY``
    (an operator key with agents:write) name one, else directly on the ledger (beside
    the processes serving it). Returns the ``result_view`` and the path taken
    (``direct`` or ``api``).

    Raises:
        ConfigError, LedgerError, InvalidRequest (an undogate that does not share its
        ledger owns it, and no URL or key is set), ApiError (the server refused), and
        what ``check_endpoint`` raises.
    """
    url, key = environ.get("UNDOGATE_URL"), environ.get("UNDOGATE_KEY")
    if not url or not key:
        try:
            return result_view(_run_directly(config_path, test_copy_id, environ)), "direct"
        except LedgerInUse as exc:
            raise InvalidRequest(
                f"{exc.message}. To check through its API, set UNDOGATE_URL and "
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
        ConfigError, LedgerInUse (an undogate that does not share it owns the ledger),
        LedgerError, and what
        ``check_endpoint`` raises.
    """
    with open_configured(config_path, environ) as service:
        return check_endpoint(service.context, test_copy_id)


__all__ = ["run_endpoint_check"]
