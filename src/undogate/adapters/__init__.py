"""Everything a resource kind knows, one module per kind, all behind ``Adapter``.

Importing this package registers every kind; ``adapter_for(kind)`` finds one, and
``Remote`` sends any kind's requests.
"""

from .base import (
    Adapter,
    ConditionalWrite,
    Evidence,
    Plan,
    ResourceKind,
    Side,
    Snapshot,
    Verdict,
    adapter_for,
    kind_names,
)
from .json_collection import JsonCollectionAdapter
from .json_record import JsonRecordAdapter
from .remote import Remote
from .webdav_text import WebDavTextAdapter

__all__ = [
    "Adapter",
    "ConditionalWrite",
    "Evidence",
    "JsonCollectionAdapter",
    "JsonRecordAdapter",
    "Plan",
    "Remote",
    "ResourceKind",
    "Side",
    "Snapshot",
    "Verdict",
    "WebDavTextAdapter",
    "adapter_for",
    "kind_names",
]
