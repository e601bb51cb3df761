"""AWS Signature Version 4 over one exact request, by botocore's signer (the one AWS
keeps), never by hand.

The request is signed as it will leave: its method, its URL as the client sends it,
the headers the gateway sets and the exact bytes of its body. The canonical request
botocore signs carries the SHA-256 of those bytes; for S3 (``S3SigV4Auth``) it is also
sent as ``X-Amz-Content-SHA256``, computed over HTTPS too (botocore leaves a body
unsigned only for a streaming upload, which the gateway never sends), so a server that
checks it refuses any other body. Other services take the plain
``SigV4Auth``, as botocore signs them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

# botocore logs each request's canonical form and its signature at DEBUG. A signature is
# a credential for that request until it expires: it never reaches a log.
logging.getLogger("botocore.auth").setLevel(logging.INFO)


def headers_added(service: str, *, session: bool) -> tuple[str, ...]:
    """The headers ``sign`` adds for ``service`` (with a session token or not)."""
    payload = ("X-Amz-Content-SHA256",) if service == "s3" else ()
    token = ("X-Amz-Security-Token",) if session else ()
    return ("Authorization", "X-Amz-Date", *payload, *token)


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    access_key: str,
    secret_key: str,
    session_token: str | None,
    region: str,
    service: str,
) -> dict[str, str]:
    """The headers that sign exactly this request (``headers_added``)."""
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    signer = S3SigV4Auth if service == "s3" else SigV4Auth
    signer(Credentials(access_key, secret_key, session_token), service, region).add_auth(request)
    added = headers_added(service, session=session_token is not None)
    return {name: str(request.headers[name]) for name in added}


__all__ = ["headers_added", "sign"]
