"""Everything a resource kind knows: one package per kind, all behind ``Adapter``.

Importing this package registers the built-in kinds (``json_record``, ``webdav_text``,
``json_collection``, and the contacts' and calendars': ``vcard``, ``vcard_collection``,
``icalendar``, ``icalendar_collection``); kinds from outside arrive through the
``undogate.kinds`` entry point (``registry``). Core code meets kinds only through the
registry: ``adapter_for``, ``kind_names``, ``installed_kinds``. ``Wire`` sends any kind's
requests, with the credential ``credentials`` adds (whose rules for static headers
``config`` asks).

What a kind's author builds on (docs/kinds.md) is exported here: ``Adapter`` and the
values it trades in, ``KindSettings``, the change members and shapes, the endpoint
check's steps and ``WholeResourceAdapter``, and the view helpers.
"""

from ..jobs import ABSENT, Change, ChangeRequest, ChangeView, SideValue
from ..net.etag import ETag
from ..resources import KindSettings, Limits, Resource
from .base import (
    RECREATE,
    REFUSAL_STATUSES,
    SUCCESS_STATUSES,
    UNDO_OF_CREATE,
    Adapter,
    ConditionalWrite,
    Guard,
    Plan,
    Prober,
    Reader,
    Side,
    Snapshot,
    Verdict,
    absent_snapshot,
    media_type_is,
)
from .calendars import ICalendarAdapter, ICalendarCollectionAdapter
from .checks.steps import MARKER_PREFIX, CheckRun, Evidence, Step, StepFailed, error_step
from .checks.whole_resource import WholeResourceAdapter
from .contacts import VCardAdapter, VCardCollectionAdapter
from .credentials import copy_authentication_problem, header_problems
from .json_collection import JsonCollectionAdapter
from .json_record import JsonRecordAdapter
from .registry import (
    ENTRY_POINT_GROUP,
    InstalledKind,
    adapter_for,
    adapters,
    change_member,
    change_members,
    digest_defaults,
    installed_kinds,
    kind_names,
    kind_problem,
    member_takers,
)
from .shapes import (
    ChangeMember,
    ChangeShape,
    flag_member,
    names_member,
    object_member,
    string_member,
)
from .views import field_rows, text_diff
from .webdav_text import WebDavTextAdapter
from .wire import Wire

__all__ = [
    "ABSENT",
    "ENTRY_POINT_GROUP",
    "MARKER_PREFIX",
    "RECREATE",
    "REFUSAL_STATUSES",
    "SUCCESS_STATUSES",
    "UNDO_OF_CREATE",
    "Adapter",
    "Change",
    "ChangeMember",
    "ChangeRequest",
    "ChangeShape",
    "ChangeView",
    "CheckRun",
    "ConditionalWrite",
    "ETag",
    "Evidence",
    "Guard",
    "ICalendarAdapter",
    "ICalendarCollectionAdapter",
    "InstalledKind",
    "JsonCollectionAdapter",
    "JsonRecordAdapter",
    "KindSettings",
    "Limits",
    "Plan",
    "Prober",
    "Reader",
    "Resource",
    "Side",
    "SideValue",
    "Snapshot",
    "Step",
    "StepFailed",
    "VCardAdapter",
    "VCardCollectionAdapter",
    "Verdict",
    "WebDavTextAdapter",
    "WholeResourceAdapter",
    "Wire",
    "absent_snapshot",
    "adapter_for",
    "adapters",
    "change_member",
    "change_members",
    "copy_authentication_problem",
    "digest_defaults",
    "error_step",
    "field_rows",
    "flag_member",
    "header_problems",
    "installed_kinds",
    "kind_names",
    "kind_problem",
    "media_type_is",
    "member_takers",
    "names_member",
    "object_member",
    "string_member",
    "text_diff",
]
