"""``json_collection``: records at ``{collection}/{id}`` that appear and disappear
(docs/collections.md). ``adapter``: the kind; ``settings``: how records are created and identified;
``members``: the change members beyond a record's fields and its change shapes; ``sides``:
what a change's sides hold and how surfaces show them; ``lookup``: finding records by
identity evidence; ``probes``: its endpoint check. Importing it registers the kind."""

from .adapter import JsonCollectionAdapter

__all__ = ["JsonCollectionAdapter"]
