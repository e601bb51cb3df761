"""``json_record``: one JSON record at one URL, its allow-listed top-level fields changed
by RFC 6902 PATCH with ``If-Match`` (``adapter``). Importing it registers the kind."""

from .adapter import JsonRecordAdapter

__all__ = ["JsonRecordAdapter"]
