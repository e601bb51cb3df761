"""How a request to a resource is authenticated: the one place a credential is read and
added.

``Wire`` asks ``Credentials.headers_for`` for every request it sends, with the exact
method, URL, headers and body that will leave; the answer is added to the request and
nothing else ever holds it. A kind builds its requests without credentials and never
sees one (docs/kinds.md). Reading the variables at each request makes rotation need no
restart.

Each way of authenticating is a ``Scheme``: a token in ``Authorization`` (bearer,
basic) or in a header of the operator's naming, or a signature over the request as it
leaves (AWS SigV4 by botocore's signer, Azure Shared Key by azure-storage-blob's policy;
``sigv4``, ``shared_key``). A new one is one more ``Scheme`` here, never a change in a
kind. What a reviewer is told of it (``authentication``) says how a request is signed,
never with what.

The headers a scheme or the wire sets are the gateway's: a resource's static
``headers`` may not name them (``header_problems``, at config load).
"""

from __future__ import annotations

import base64
import binascii
import email.utils
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ..errors import MissingToken
from ..jsonvalue import JsonObject
from ..net import body_framing, sent_url
from ..resources import AwsSigV4Auth, AzureSharedKeyAuth, HeaderAuth, Resource, TokenAuth

_A = TypeVar("_A", bound=BaseModel)
# A variable's value now. Raises MissingToken (naming the variable) when it is unset.
Read = Callable[[str], str]


@dataclass(frozen=True)
class Outgoing:
    """One request as the client will send it, before its credential: its method, its
    URL as sent, every header the gateway sets (the body's framing included) and the
    exact bytes of its body. A signature covers exactly this."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes


class Scheme(ABC, Generic[_A]):
    """One way of authenticating, for the auth settings of type ``_A``."""

    @abstractmethod
    def adds(self, auth: _A) -> tuple[str, ...]:
        """The headers it adds to each request, by name."""

    @abstractmethod
    def summary(self, auth: _A) -> str:
        """How a request is authenticated, in words a reviewer reads: never with what."""

    @abstractmethod
    def sign(self, auth: _A, read: Read, request: Outgoing) -> dict[str, str]:
        """The headers that authenticate exactly ``request``.

        Raises: MissingToken: a variable is unset or holds nothing usable (named,
        never its value)."""


class Bearer(Scheme[TokenAuth]):
    def adds(self, auth: TokenAuth) -> tuple[str, ...]:
        return ("Authorization",)

    def summary(self, auth: TokenAuth) -> str:
        return "a bearer token from the gateway's environment, added at send time"

    def sign(self, auth: TokenAuth, read: Read, request: Outgoing) -> dict[str, str]:
        return {"Authorization": f"Bearer {read(auth.token_env)}"}


class Basic(Scheme[TokenAuth]):
    """The variable holds ``user:password``."""

    def adds(self, auth: TokenAuth) -> tuple[str, ...]:
        return ("Authorization",)

    def summary(self, auth: TokenAuth) -> str:
        return "HTTP Basic credentials from the gateway's environment, added at send time"

    def sign(self, auth: TokenAuth, read: Read, request: Outgoing) -> dict[str, str]:
        encoded = base64.b64encode(read(auth.token_env).encode("utf-8")).decode("ascii")
        return {"Authorization": f"Basic {encoded}"}


class NamedHeader(Scheme[HeaderAuth]):
    """The variable's value, as it is, in the header the operator named."""

    def adds(self, auth: HeaderAuth) -> tuple[str, ...]:
        return (auth.name,)

    def summary(self, auth: HeaderAuth) -> str:
        return f"a token from the gateway's environment in {auth.name}, added at send time"

    def sign(self, auth: HeaderAuth, read: Read, request: Outgoing) -> dict[str, str]:
        return {auth.name: read(auth.token_env)}


class AwsSigV4(Scheme[AwsSigV4Auth]):
    """AWS Signature Version 4, by botocore's signer (``sigv4``), over the exact bytes
    sent: their SHA-256 is in the signed request (and, for S3, in
    ``X-Amz-Content-SHA256``)."""

    def adds(self, auth: AwsSigV4Auth) -> tuple[str, ...]:
        from .sigv4 import headers_added

        return headers_added(auth.service, session=auth.session_token_env is not None)

    def summary(self, auth: AwsSigV4Auth) -> str:
        return (
            f"signed with AWS SigV4 ({auth.region}, {auth.service}) at send time, over "
            "the exact bytes shown"
        )

    def sign(self, auth: AwsSigV4Auth, read: Read, request: Outgoing) -> dict[str, str]:
        # Imported here: botocore costs a start that signs nothing a fifth of a second.
        from .sigv4 import sign

        session = read(auth.session_token_env) if auth.session_token_env else None
        return sign(
            request.method,
            request.url,
            request.headers,
            request.body,
            access_key=read(auth.access_key_env),
            secret_key=read(auth.secret_key_env),
            session_token=session,
            region=auth.region,
            service=auth.service,
        )


class AzureSharedKey(Scheme[AzureSharedKeyAuth]):
    """Azure Storage Shared Key, by azure-storage-blob's own policy (``shared_key``):
    the scheme sets the request's date and API version, and signs them with the rest."""

    def adds(self, auth: AzureSharedKeyAuth) -> tuple[str, ...]:
        return ("Authorization", "x-ms-date", "x-ms-version")

    def summary(self, auth: AzureSharedKeyAuth) -> str:
        return f"signed with Azure Shared Key (account {auth.account}) at send time"

    def sign(self, auth: AzureSharedKeyAuth, read: Read, request: Outgoing) -> dict[str, str]:
        from .shared_key import API_VERSION, authorization

        key = read(auth.key_env)
        try:
            base64.b64decode(key, validate=True)
        except (binascii.Error, ValueError):
            raise MissingToken(
                f"the variable {auth.key_env} does not hold a base64 account key",
                variable=auth.key_env,
            ) from None
        added = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": API_VERSION}
        signed = {**request.headers, **added}
        added["Authorization"] = authorization(
            request.method, request.url, signed, auth.account, key
        )
        return added


SCHEMES: dict[str, Scheme[Any]] = {
    "bearer": Bearer(),
    "basic": Basic(),
    "header": NamedHeader(),
    "aws_sigv4": AwsSigV4(),
    "azure_shared_key": AzureSharedKey(),
}


@dataclass(frozen=True)
class Credentials:
    """The resources' credentials, read from the process environment at each request."""

    environ: Mapping[str, str]

    def check(self, resource: Resource) -> None:
        """Raises: MissingToken: a variable of the resource's credential is unset."""
        read = self._reader(resource)
        for name in resource.credential_variables:
            read(name)

    def headers_for(
        self,
        resource: Resource,
        method: str,
        url: str,
        headers: Mapping[str, str],
        content: bytes | None = None,
    ) -> dict[str, str]:
        """The headers that authenticate exactly this request (none without a
        credential): ``headers`` as the gateway sends them, ``content`` the body as the
        client is handed it.

        Raises:
            MissingToken: a variable is unset or unusable (named, never its value).
        """
        credential = resource.credential
        if credential is None:
            return {}
        request = Outgoing(
            method,
            sent_url(url),
            {**headers, **body_framing(method, content)},
            content or b"",
        )
        return SCHEMES[credential.scheme].sign(credential, self._reader(resource), request)

    def _reader(self, resource: Resource) -> Read:
        def read(name: str) -> str:
            value = self.environ.get(name)
            if not value:
                raise MissingToken(
                    f"the credential variable {name} of {resource.id} is not set; set it "
                    "in the gateway's environment",
                    variable=name,
                    resource=resource.id,
                )
            return value

        return read


def authentication(resource: Resource) -> JsonObject | None:
    """What a reviewer is told of how requests to ``resource`` are authenticated (its
    scheme, in words, and the headers added at send time), never with what; ``None``:
    they carry no credential."""
    credential = resource.credential
    if credential is None:
        return None
    scheme = SCHEMES[credential.scheme]
    return {
        "scheme": credential.scheme,
        "summary": scheme.summary(credential),
        "adds": [*scheme.adds(credential)],
    }


# -- what a static header may not be ------------------------------------------------------

# The wire's own (the client's framing and connection, what a read asks for, the date a
# signature covers), a method override (the method is the one the preview shows), and
# credentials (never in the config).
_WIRE_HEADERS = frozenset(
    {
        "host",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "accept",
        "accept-encoding",
        "range",
        "date",
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
    }
)
# The body and its description are the kind's (Content-*), and so is the write's guard
# (If-*); Proxy-* belongs to a proxy the gateway never uses.
_WIRE_PREFIXES = ("content-", "if-", "proxy-")
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie"})
# Every header a signing scheme sets besides Authorization, whatever its settings.
_SIGNING_HEADERS = frozenset(
    {"x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "x-ms-date", "x-ms-version"}
)


def _owned(name: str) -> bool:
    """Set by the gateway itself, never by a static header nor a ``header`` scheme."""
    lowered = name.lower()
    return (
        lowered in _WIRE_HEADERS
        or lowered.startswith(_WIRE_PREFIXES)
        or lowered in _SIGNING_HEADERS
    )


def header_problems(resource: Resource) -> list[tuple[str, str]]:
    """What is wrong with a resource's static ``headers`` and a ``header`` scheme's
    name: (setting, problem) pairs, the setting's path relative to the resource."""
    problems: list[tuple[str, str]] = []
    credential = resource.credential
    named = None
    if isinstance(credential, HeaderAuth):
        named = credential.name.lower()
        if _owned(named):
            problems.append(("auth.name", f"{credential.name} is set by the gateway itself"))
    seen: set[str] = set()
    for name, _ in resource.headers:
        lowered = name.lower()
        where = f"headers.{name}"
        if lowered in seen:
            problems.append((where, "named twice (header names ignore case)"))
        seen.add(lowered)
        if _owned(lowered):
            why = (
                "set by the gateway itself: the request, its body and its guard are the "
                "kind's, and a signature's headers its scheme's"
            )
            problems.append((where, why))
        elif lowered in _CREDENTIAL_HEADERS or lowered == named:
            problems.append((where, "a credential: give it as auth, read from the environment"))
    return problems


def copy_authentication_problem(copy: Resource, production: Resource) -> str | None:
    """Why ``copy`` does not send what ``production`` sends (its scheme and static
    headers), so that a check on it would verify other requests (``None``: it does)."""
    mine, theirs = copy.credential, production.credential
    if (mine.scheme if mine else None) != (theirs.scheme if theirs else None):
        return "a test copy must be authenticated by the same scheme as the resource it copies"
    if {(n.lower(), v) for n, v in copy.headers} != {(n.lower(), v) for n, v in production.headers}:
        return "a test copy must send the same static headers as the resource it copies"
    return None


__all__ = [
    "SCHEMES",
    "AwsSigV4",
    "AzureSharedKey",
    "Basic",
    "Bearer",
    "Credentials",
    "NamedHeader",
    "Outgoing",
    "Scheme",
    "authentication",
    "copy_authentication_problem",
    "header_problems",
]
