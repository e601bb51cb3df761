"""The one failure below HTTP.

``TransportFailure`` stands outside undogate's error tree (``undogate.errors``): it says
what happened on the wire, and its callers translate it: a failed read becomes
``RemoteUnavailable``; a failed write a certain refusal when ``sent`` is False and
``uncertain`` when it is True.
"""

from __future__ import annotations


class TransportFailure(Exception):
    """The request failed below HTTP. ``sent`` is False only when nothing left this host."""

    def __init__(self, reason: str, *, sent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent = sent


class ResponseTooLarge(TransportFailure):
    """The answer's body ran past the bound its caller set; the rest was not read."""
