"""Azure Storage Shared Key over one exact request, by azure-storage-blob's own policy.

There is no maintained standalone signer: the SDK's ``SharedKeyCredentialPolicy`` works
on any azure-core request, so the request the gateway will send is copied into one and
signed there (the verb, the standard headers, every ``x-ms-*`` header sorted as the
service sorts them, ``/<account><path>`` and the sorted query). The policy lives in a
private module of the SDK: pyproject.toml holds azure-storage-blob to one minor version,
and the tests against Azurite (tests/test_object_stores.py) are its contract; this is
the only module that imports it.
"""

from __future__ import annotations

from collections.abc import Mapping

from azure.core.pipeline import PipelineContext, PipelineRequest
from azure.core.rest import HttpRequest
from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy

# The service version every request names (x-ms-version): the one the tests run
# against Azurite 3.35, which Azure Storage serves too.
API_VERSION = "2021-12-02"


def authorization(method: str, url: str, headers: Mapping[str, str], account: str, key: str) -> str:
    """The ``Authorization`` value (``SharedKey <account>:<signature>``) of this exact
    request. Header names are given to the policy in lower case: the service compares
    them so, and the policy picks ``x-ms-*`` headers by a case-sensitive prefix."""
    request = HttpRequest(method, url, headers={k.lower(): v for k, v in headers.items()})
    policy = SharedKeyCredentialPolicy(account, key)
    policy.on_request(PipelineRequest(request, PipelineContext(None)))
    return str(request.headers["Authorization"])


__all__ = ["API_VERSION", "authorization"]
