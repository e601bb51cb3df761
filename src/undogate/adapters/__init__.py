"""Everything a resource kind knows, one module per kind, all behind ``Adapter``.

Importing this package registers every kind; ``adapter_for(kind)`` finds one, and
``Remote`` sends any kind's requests.
"""

from .base import (
    RECREATE,
    UNDO_OF_CREATE,
    Adapter,
    ConditionalWrite,
    Evidence,
    Plan,
    ResourceKind,
    Side,
    Snapshot,
    Verdict,
    WholeResourceAdapter,
    absent_snapshot,
    adapter_for,
    kind_names,
)
from .json_collection import JsonCollectionAdapter
from .json_record import JsonRecordAdapter
from .remote import Remote
from .webdav_text import WebDavTextAdapter

__all__ = [
    "RECREATE",
    "UNDO_OF_CREATE",
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
    "WholeResourceAdapter",
    "absent_snapshot",
    "adapter_for",
    "kind_names",
]
