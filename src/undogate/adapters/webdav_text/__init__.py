"""``webdav_text``: one UTF-8 text document at one URL, replaced whole by a conditional
PUT (``adapter``), and, with ``create: true``, created and its creation undone
(``create_probes``: the endpoint check of that). Importing it registers the kind."""

from .adapter import WebDavTextAdapter, is_text_media_type

__all__ = ["WebDavTextAdapter", "is_text_media_type"]
