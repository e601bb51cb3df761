"""Real object stores for the tests, on 127.0.0.1 at a free high port, each refusing a
request that is not signed with its secret.

- ``moto_s3_server``: moto's server (PyPI ``moto[server]``, in ``.venv-moto/``) speaking S3.
  moto checks signatures only once its auth is switched on, so the fixture first makes an
  IAM user with an access key and an ``s3:*`` policy (auth still off), then switches auth on
  for every later request through moto's ``/moto-api/reset-auth`` (no request left without
  auth). From then on a request signed with another secret gets 403 and writes nothing.
- ``azurite_server``: Azurite's blob service (npm ``azurite``, in ``.npm-servers/``), always
  with ``--disableTelemetry`` (nothing may leave this machine), its data in a folder of the
  test's, with one account and key of our own (``AZURITE_ACCOUNTS``; the well-known
  development account is then off). Every request needs Shared Key.

Requests are signed by maintained signers, never by hand: botocore's ``S3SigV4Auth`` over an
``AWSRequest`` holding the exact body bytes, and azure-storage-blob's
``SharedKeyCredentialPolicy`` over an azure-core request built from the exact httpx request.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import os
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from azure.core.pipeline import PipelineContext, PipelineRequest
from azure.core.rest import HttpRequest as AzureRequest
from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from defusedxml import ElementTree

from .davservers import free_port
from .processes import start, stop, wait_http
from .server_envs import npm_env, python_env

MOTO_REQUIREMENT = "moto[server]==5.2.5"
READY_TIMEOUT_S = 30.0
REGION = "us-east-1"
IAM_NAMESPACE = {"iam": "https://iam.amazonaws.com/doc/2010-05-08/"}
S3_ALL = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}'

AZURE_ACCOUNT = "undogatetest"
AZURE_KEY = base64.b64encode(b"undogate-azurite-test-key-not-a-secret-012345678").decode()
AZURE_VERSION = "2021-12-02"  # an x-ms-version both Azure and Azurite 3.35 accept


def sigv4_headers(
    method: str,
    url: str,
    body: bytes,
    headers: dict[str, str],
    credentials: Credentials,
    service: str = "s3",
) -> dict[str, str]:
    """``headers`` plus the SigV4 ones for this exact request. S3 takes botocore's
    ``S3SigV4Auth`` (it adds ``X-Amz-Content-SHA256``, the hash of ``body``); other
    services the plain ``SigV4Auth``."""
    signer = S3SigV4Auth if service == "s3" else SigV4Auth
    request = AWSRequest(method=method, url=url, data=body, headers=headers)
    signer(credentials, service, REGION).add_auth(request)
    return dict(request.headers.items())


def shared_key_authorization(request: httpx.Request, account: str, key: str) -> str:
    """The ``Authorization`` value azure-storage-blob's Shared Key policy computes for this
    exact request (its method, URL, and headers as they will be sent)."""
    azure = AzureRequest(request.method, str(request.url), headers=dict(request.headers))
    SharedKeyCredentialPolicy(account, key).on_request(
        PipelineRequest(azure, PipelineContext(None))
    )
    return str(azure.headers["Authorization"])


# The variables a gateway's resource on these stores reads its credential from.
S3_ACCESS_ENV, S3_SECRET_ENV = "UNDOGATE_TEST_S3_ACCESS_KEY", "UNDOGATE_TEST_S3_SECRET_KEY"
AZURE_KEY_ENV = "UNDOGATE_TEST_AZURE_KEY"
BLOCK_BLOB = {"x-ms-blob-type": "BlockBlob"}  # Azure's Put Blob needs it (400 without)


@dataclass
class S3Server:
    """moto's S3 with signatures enforced, one bucket, and the key allowed to use it."""

    base_url: str
    bucket: str
    access_key: str
    secret_key: str

    def url(self, key: str) -> str:
        """The object ``key``'s URL (path style); the bucket's own for ``""``."""
        return f"{self.base_url}/{self.bucket}" + (f"/{key}" if key else "")

    @property
    def auth(self) -> dict[str, str]:
        """A gateway resource's ``auth`` for this bucket (the environ: ``environ``)."""
        return {
            "scheme": "aws_sigv4",
            "region": REGION,
            "service": "s3",
            "access_key_env": S3_ACCESS_ENV,
            "secret_key_env": S3_SECRET_ENV,
        }

    @property
    def environ(self) -> dict[str, str]:
        return {S3_ACCESS_ENV: self.access_key, S3_SECRET_ENV: self.secret_key}

    def put(self, key: str, content: bytes, media_type: str) -> str:
        """Store ``content`` as another client would; its new ETag."""
        made = self.request("PUT", key, content, {"Content-Type": media_type})
        assert made.status_code == 200, made.text
        return str(made.headers["etag"])

    def get(self, key: str) -> httpx.Response:
        return self.request("GET", key)

    def request(
        self,
        method: str,
        key: str,
        content: bytes = b"",
        headers: dict[str, str] | None = None,
        secret_key: str | None = None,
    ) -> httpx.Response:
        """Signed with the bucket's key (or with ``secret_key`` in its place); any status."""
        credentials = Credentials(self.access_key, secret_key or self.secret_key)
        url = self.url(key)
        signed = sigv4_headers(method, url, content, dict(headers or {}), credentials)
        return httpx.request(
            method, url, content=content, headers=signed, trust_env=False, timeout=10.0
        )


@dataclass
class BlobServer:
    """Azurite's blob service with one account, one container, Shared Key required."""

    base_url: str  # ends with the account: http://127.0.0.1:<port>/<account>
    container: str
    debug_log: Path  # Azurite's own account of what it did, telemetry included
    account: str = AZURE_ACCOUNT
    key: str = AZURE_KEY

    def url(self, blob: str) -> str:
        return f"{self.base_url}/{self.container}/{blob}"

    @property
    def auth(self) -> dict[str, str]:
        """A gateway resource's ``auth`` for this account (the environ: ``environ``)."""
        return {"scheme": "azure_shared_key", "account": self.account, "key_env": AZURE_KEY_ENV}

    @property
    def environ(self) -> dict[str, str]:
        return {AZURE_KEY_ENV: self.key}

    def put(self, blob: str, content: bytes, media_type: str) -> str:
        """Store ``content`` as another client would; its new ETag."""
        headers = {**BLOCK_BLOB, "Content-Type": media_type}
        made = self.request("PUT", f"/{self.container}/{blob}", content, headers)
        assert made.status_code == 201, made.text
        return str(made.headers["etag"])

    def get(self, blob: str) -> httpx.Response:
        return self.request("GET", f"/{self.container}/{blob}")

    def request(
        self,
        method: str,
        path: str,
        content: bytes = b"",
        headers: dict[str, str] | None = None,
        key: str | None = None,
        signed: bool = True,
    ) -> httpx.Response:
        """``path`` under the account (``/<container>/<blob>``, a query allowed), with the
        date and version headers Azure requires, signed with the account key (or ``key``,
        or not at all); any status."""
        request = httpx.Request(
            method,
            f"{self.base_url}{path}",
            content=content,
            headers={
                "x-ms-date": email.utils.formatdate(usegmt=True),
                "x-ms-version": AZURE_VERSION,
                **(headers or {}),
            },
        )
        if signed:
            request.headers["Authorization"] = shared_key_authorization(
                request, self.account, key or self.key
            )
        with httpx.Client(trust_env=False, timeout=10.0) as client:
            return client.send(request)


@contextlib.contextmanager
def moto_s3_server(folder: Path) -> Iterator[S3Server]:
    moto = python_env("moto", MOTO_REQUIREMENT) / "moto_server"
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = folder / "moto.log"
    env = {k: v for k, v in os.environ.items() if k != "INITIAL_NO_AUTH_ACTION_COUNT"}
    proc = start([str(moto), "-H", "127.0.0.1", "-p", str(port)], folder, log, env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/moto-api/", proc, log, READY_TIMEOUT_S, lambda r: r.status_code == 200)
        access_key, secret_key = _iam_user_for_s3(base)
        switched = httpx.post(f"{base}/moto-api/reset-auth", content=b"0", trust_env=False)
        if switched.status_code != 200:
            raise RuntimeError(f"moto did not switch its auth on: {switched.status_code}")
        server = S3Server(base, f"bucket-{uuid.uuid4().hex[:8]}", access_key, secret_key)
        made = server.request("PUT", "")
        if made.status_code != 200:
            raise RuntimeError(f"moto: creating the bucket answered {made.status_code}")
        yield server
    finally:
        stop(proc, grace_s=10)


def _iam_user_for_s3(base: str) -> tuple[str, str]:
    """An IAM user allowed ``s3:*`` and its access key, made while moto's auth is off (the
    signature is then only how moto tells IAM from S3)."""
    anyone = Credentials("AKIAUNDOGATESETUP000", "unchecked-while-auth-is-off")

    def iam(action: str, **params: str) -> Any:
        body = urllib.parse.urlencode(
            {"Action": action, "Version": "2010-05-08", **params}
        ).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
        signed = sigv4_headers("POST", f"{base}/", body, headers, anyone, service="iam")
        answer = httpx.post(f"{base}/", content=body, headers=signed, trust_env=False)
        if answer.status_code != 200:
            raise RuntimeError(f"moto IAM {action}: {answer.status_code} {answer.text[:300]}")
        return ElementTree.fromstring(answer.text)

    iam("CreateUser", UserName="undogate-tests")
    iam("PutUserPolicy", UserName="undogate-tests", PolicyName="s3", PolicyDocument=S3_ALL)
    made = iam("CreateAccessKey", UserName="undogate-tests")
    access_key = made.findtext(".//iam:AccessKeyId", namespaces=IAM_NAMESPACE)
    secret_key = made.findtext(".//iam:SecretAccessKey", namespaces=IAM_NAMESPACE)
    if not access_key or not secret_key:
        raise RuntimeError("moto IAM CreateAccessKey gave no key")
    return access_key, secret_key


@contextlib.contextmanager
def azurite_server(folder: Path) -> Iterator[BlobServer]:
    azurite = npm_env() / "azurite-blob"
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = folder / "azurite.log"
    command = [
        str(azurite),
        "--disableTelemetry",  # always: nothing may leave this machine
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
        "--location",
        str(folder / "data"),
        "--silent",
        "--debug",
        str(folder / "azurite-debug.log"),
    ]
    env = {**os.environ, "AZURITE_ACCOUNTS": f"{AZURE_ACCOUNT}:{AZURE_KEY}"}
    proc = start(command, folder, log, env)
    base = f"http://127.0.0.1:{port}/{AZURE_ACCOUNT}"
    try:
        # Unsigned, the account's root answers 403: listening, and refusing the unsigned.
        wait_http(f"{base}?comp=list", proc, log, READY_TIMEOUT_S, lambda r: r.status_code == 403)
        server = BlobServer(base, f"container-{uuid.uuid4().hex[:8]}", folder / "azurite-debug.log")
        made = server.request("PUT", f"/{server.container}?restype=container")
        if made.status_code != 201:
            raise RuntimeError(f"azurite: creating the container answered {made.status_code}")
        yield server
    finally:
        stop(proc, grace_s=10)
