"""What the kinds made of JSON records share (``json_record``, ``json_collection``).

``settings``: the allow-listed top-level ``fields`` and the ``record_pointer``; ``fields``:
reading a record, planning ``set``/``remove`` on it, comparing fields, the JSON Patch
that moves them; ``members``: the change members ``set`` and ``remove``.
"""
