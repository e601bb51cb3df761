"""How a request to a resource is authenticated: the one place a credential is read.

``Wire`` asks ``Credentials.headers_for`` for every request it sends, with the exact
method, URL, headers and body that will leave; the answer is added to the request and
nothing else ever holds it. A kind builds its requests without credentials and never
sees one (docs/kinds.md). Reading the variable at each request makes rotation need no
restart. A scheme that signs what is sent (a signature over the exact bytes of the
body, over chosen headers) is one more ``Scheme`` here, not a change in any kind.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from ..errors import MissingToken
from ..resources import Resource


class Scheme(Protocol):
    """One way of authenticating: the headers to add to one exact request."""

    def headers(
        self, secret: str, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]: ...


class Bearer:
    def headers(
        self, secret: str, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret}"}


class Basic:
    """The variable holds ``user:password``."""

    def headers(
        self, secret: str, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]:
        encoded = base64.b64encode(secret.encode("utf-8")).decode("ascii")
        return {"Authorization": f"Basic {encoded}"}


SCHEMES: dict[str, Scheme] = {"bearer": Bearer(), "basic": Basic()}


@dataclass(frozen=True)
class Credentials:
    """The resources' credentials, read from the process environment at each request."""

    environ: Mapping[str, str]

    def secret(self, resource: Resource) -> str | None:
        """The resource's secret now (None: it has none).

        Raises:
            MissingToken: its variable is unset or empty (named, never its value).
        """
        if resource.token_env is None:
            return None
        value = self.environ.get(resource.token_env)
        if not value:
            raise MissingToken(
                f"the token variable {resource.token_env} is not set; "
                "set it in the gateway's environment",
                variable=resource.token_env,
                resource=resource.id,
            )
        return value

    def headers_for(
        self,
        resource: Resource,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes = b"",
    ) -> dict[str, str]:
        """The headers that authenticate exactly this request (none without a secret).

        Raises:
            MissingToken: as ``secret``.
        """
        secret = self.secret(resource)
        if secret is None:
            return {}
        return SCHEMES[resource.token_scheme].headers(secret, method, url, headers, body)


__all__ = ["SCHEMES", "Basic", "Bearer", "Credentials", "Scheme"]
