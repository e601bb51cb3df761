"""What an agent may see of a refusal (the API and the MCP tools alike): never values,
URLs, addresses or token variables."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..jsonvalue import JsonObject
from .jobs import json_value

# Details an agent may see (never values, URLs, addresses or variable names).
_AGENT_SAFE_DETAILS = (
    "resource",
    "candidates",  # an ambiguous upsert's: record ids and evidence values only
    "id",
    "current_version",
    "job",
    "member",
    "field",
    "allowed",
    "limit",
    "maximum",
    "retry_after_s",
    "reason",
)
# Codes whose message may name the endpoint, the network or a token variable: an agent
# gets a fixed sentence instead (the operator sees the full one in receipts and events).
_AGENT_OPAQUE = {
    "remote_unavailable": "undogate could not read the resource from its system",
    "remote_contract_breach": "the resource's system answered in a way undogate cannot trust",
    "blocked_address": "the resource's address is blocked by undogate's network policy",
    "missing_token": "undogate is missing the credential for the resource's system",
    "unauthorized": "the agent token is missing, unknown or revoked",
    "gateway_unavailable": "undogate could not be reached",
    "gateway_error": "undogate gave an answer that could not be read",
    "internal_error": "undogate failed internally",
}
_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")


def agent_refusal(code: str, message: str, details: Mapping[str, Any]) -> tuple[str, JsonObject]:
    """The sentence and details an agent may see of a refusal (docs/agents.md: no URLs, hosts,
    addresses, token variables or values)."""
    sentence = _AGENT_OPAQUE.get(code) or _URL_RE.sub("[address withheld]", message)
    sentence = sentence.rstrip(".") + "."
    keep = ("resource",) if code in _AGENT_OPAQUE else _AGENT_SAFE_DETAILS
    safe: JsonObject = {k: json_value(details[k]) for k in keep if k in details}
    return sentence, safe


__all__ = ["agent_refusal"]
