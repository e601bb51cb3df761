"""The JSON-able views every surface renders (API, web, MCP, CLI), so that a value
looks the same everywhere: receipts, previews, confirmations, events and listings
(``jobs``), and what an agent may see of a refusal (``refusals``).

Pure. Values stay lossless (``JsonNumber`` keeps their exact text) and are inert data:
nothing here interprets them. What the caller supplied and nobody verified (the agent's
summary, ``attribution_label``, ``assertion_kind``) is marked so.
"""

from .jobs import (
    REVIEW_LINE,
    action_receipt,
    agent_receipt,
    agent_rewind_path,
    caller_supplied,
    change_receipt,
    confirmation_view,
    event_view,
    events_view,
    job_receipt,
    job_rows,
    json_value,
    number,
    preview_view,
    request_view,
    resource_view,
    review_path,
    undo_offer_view,
    webhook_messages_view,
)
from .refusals import agent_refusal

__all__ = [
    "REVIEW_LINE",
    "action_receipt",
    "agent_receipt",
    "agent_refusal",
    "agent_rewind_path",
    "caller_supplied",
    "change_receipt",
    "confirmation_view",
    "event_view",
    "events_view",
    "job_receipt",
    "job_rows",
    "json_value",
    "number",
    "preview_view",
    "request_view",
    "resource_view",
    "review_path",
    "undo_offer_view",
    "webhook_messages_view",
]
