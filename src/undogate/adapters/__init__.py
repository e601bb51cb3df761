"""Protocol adapters: one per resource kind, all behind ``Adapter``."""

from collections.abc import Mapping

from ..jobs import ResourceKind
from ..net import RemoteHTTP
from ..resources import Limits
from .base import Adapter, ConditionalWrite, Plan, Side, Snapshot
from .json_record import JsonRecordAdapter
from .webdav_text import WebDavTextAdapter


def build_adapters(
    http: RemoteHTTP, limits: Limits, environ: Mapping[str, str]
) -> dict[ResourceKind, Adapter]:
    """One adapter per resource kind, sharing one client, limits and environment."""
    return {
        ResourceKind.JSON_RECORD: JsonRecordAdapter(http=http, limits=limits, environ=environ),
        ResourceKind.WEBDAV_TEXT: WebDavTextAdapter(http=http, limits=limits, environ=environ),
    }


__all__ = [
    "Adapter",
    "ConditionalWrite",
    "JsonRecordAdapter",
    "Plan",
    "Side",
    "Snapshot",
    "WebDavTextAdapter",
    "build_adapters",
]
