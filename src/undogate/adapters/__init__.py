"""Protocol adapters: one per resource kind, all behind ``Adapter``."""

from .base import Adapter, ConditionalWrite, Plan, Side, Snapshot
from .json_record import JsonRecordAdapter
from .webdav_text import WebDavTextAdapter

__all__ = [
    "Adapter",
    "ConditionalWrite",
    "JsonRecordAdapter",
    "Plan",
    "Side",
    "Snapshot",
    "WebDavTextAdapter",
]
