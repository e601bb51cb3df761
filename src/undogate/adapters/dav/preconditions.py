"""What a CardDAV or CalDAV server's refusal says: a ``412`` that names a precondition
of the content (RFC 6352 §6.3.2.1, RFC 4791 §5.3.2.1: ``valid-address-data``,
``valid-calendar-data``, ``no-uid-conflict``, ...) refused the content, not the
``If-Match`` tag. Xandikos answers so; a stale tag's 412 has no such body.
"""

from __future__ import annotations

from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from ...net import RemoteResponse

DAV = "DAV:"
CARDDAV = "urn:ietf:params:xml:ns:carddav"
CALDAV = "urn:ietf:params:xml:ns:caldav"
# A DAV:error body is small: anything longer is not read.
_MAX_ERROR_BODY = 64 * 1024


def content_refusal(response: RemoteResponse) -> str | None:
    """The content precondition a 412 names (``valid-address-data``), or ``None``: no
    such body, so the refusal is the precondition of the request's headers."""
    if response.status != 412 or not response.body or len(response.body) > _MAX_ERROR_BODY:
        return None
    try:
        root = fromstring(response.body)
    except (ParseError, DefusedXmlException, ValueError):
        return None
    if root.tag != f"{{{DAV}}}error":
        return None
    for element in root:
        namespace, _, name = element.tag[1:].partition("}")
        if namespace in (CARDDAV, CALDAV):
            return name
    return None


__all__ = ["CALDAV", "CARDDAV", "DAV", "content_refusal"]
