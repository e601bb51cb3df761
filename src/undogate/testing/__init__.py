"""The kit for a kind's author (docs/kinds.md): the contract every built-in kind passes,
to run against your kind and a test endpoint you start.

- ``contract``: ``KindCase`` (what the contract needs of your kind and endpoint) and
  ``KindContract`` (subclass it, give a ``kind_case`` fixture);
- ``plugin``: the pytest plugin with the ``undogate_kit`` fixture those tests take;
  load it in your root ``conftest.py``: ``pytest_plugins = ["undogate.testing.plugin"]``;
- ``gateway``: ``ServedGateway``, a real ``undogate serve`` spoken to over its API;
- ``proxy``: ``FaultProxy``, the faults the contract commits on the wire;
- ``launcher``: ``popen`` and ``run``, undogate's commands forked from a process that
  imported undogate once (``ServedGateway`` starts ``serve`` through it).

It needs pytest (undogate's ``test`` extra).
"""

from .contract import KindCase, KindContract, Kit
from .gateway import ServedGateway
from .proxy import FaultProxy

__all__ = ["FaultProxy", "KindCase", "KindContract", "Kit", "ServedGateway"]
