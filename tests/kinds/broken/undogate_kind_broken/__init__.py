"""A distribution of kinds that cannot be served (tests/test_kind_from_outside.py puts
this directory on a subprocess's path: its ``.dist-info`` is real metadata)."""
