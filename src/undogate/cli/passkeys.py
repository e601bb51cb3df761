"""``undogate passkeys enrol``: on the server's host, the one-time code that enrols an
owner's first passkey (docs/proof.md). Directly on the ledger (beside the processes
serving it), or through a server's API (``UNDOGATE_URL``) with the master key
(``UNDOGATE_MASTER_KEY``), which lives with the server: never with an operator key,
which is what the code guards against."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..api.gateway_client import ApiClient
from ..auth import MASTER_ENV
from ..errors import InvalidRequest, LedgerInUse
from ..jobs import Actor
from ..jsonvalue import JsonValue
from ..operations import owner_passkeys
from .keys import _when
from .serve import open_configured

ENROLMENT_PATH = "/api/v1/admin/passkey-enrolments"
#: Who made a code on the ledger directly, in its event: someone on the host.
HOST = "host"


def run_enrolment(
    config_path: Path, owner: str | None, replace: bool, environ: Mapping[str, str]
) -> tuple[JsonValue, str]:
    """Make the code through a server's API when ``UNDOGATE_URL`` and
    ``UNDOGATE_MASTER_KEY`` name one, else on the ledger directly (beside the processes
    serving it). Returns the issued code (JSON) and the path taken (``direct`` or
    ``api``).

    Raises:
        UndogateError: as ``owner_passkeys.issue_enrolment`` (or the API) refuses it;
            InvalidRequest when an undogate that does not share its ledger owns it and no
            URL or master key is set.
    """
    url, key = environ.get("UNDOGATE_URL"), environ.get(MASTER_ENV)
    if not url or not key:
        try:
            with open_configured(config_path, environ={}) as svc:
                owner_id = owner or svc.keyring.only_operator()
                actor = Actor(HOST, owner_id, "system", "cli")
                issued = owner_passkeys.issue_enrolment(
                    svc.context, actor, owner_id, replace=replace
                )
                return issued.to_json(), "direct"
        except LedgerInUse as exc:
            raise InvalidRequest(
                f"{exc.message}. To enrol through its API, set UNDOGATE_URL and {MASTER_ENV} "
                "(the server's master key: an operator key cannot make an enrolment code)"
            ) from exc
    body: dict[str, JsonValue] = {"replace": replace}
    if owner is not None:
        body["owner"] = owner
    client = ApiClient(url, key)
    try:
        return client.request("POST", ENROLMENT_PATH, body), "api"
    finally:
        client.close()


def enrolment_lines(issued: JsonValue) -> list[str]:
    """What the operator on the host is told beside the code (stderr)."""
    found = issued if isinstance(issued, dict) else {}
    revoked = found.get("revoked")
    lines = [
        f"revoked passkey {passkey_id} (replaced)"
        for passkey_id in (revoked if isinstance(revoked, list) else [])
    ]
    lines.append(
        f"enrolment code for {found.get('owner_id')}, once, until "
        f"{_when(found.get('expires_at'))}: sign in with that operator key, open "
        "Passkeys and type it (shown once; undogate keeps only its hash):"
    )
    return lines


__all__ = ["enrolment_lines", "run_enrolment"]
