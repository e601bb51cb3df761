"""The one door every surface calls: the API, the review web UI, ``/mcp`` (and, in
process, ``make demo``).

- ``access``: authenticate once (``Authentication``, ``bearer_key``), and the callers a
  surface authorizes once per request (``AgentCaller``, ``Reader``, ``Writer``,
  ``Reviewer``, ``Administrator``).
- ``agents``, ``reviewers``, ``administrators``: the verbs of each audience; each takes
  its caller and calls the operations (``operations/``) over the one ``Context``.
- ``door``: ``Service``, the desks together, and ``open_service``, the one factory.

Surfaces translate requests into these calls and what they return or raise into their
own answers; nothing here knows HTTP, and nothing climbs back up.
"""

from .access import (
    MAX_KEY_CHARS,
    Administrator,
    AgentCaller,
    Caller,
    Master,
    Reader,
    Reviewer,
    Writer,
    bearer_key,
)
from .door import Service, known_agents, open_service

__all__ = [
    "MAX_KEY_CHARS",
    "Administrator",
    "AgentCaller",
    "Caller",
    "Master",
    "Reader",
    "Reviewer",
    "Service",
    "Writer",
    "bearer_key",
    "known_agents",
    "open_service",
]
