"""What real object stores do, pinned as plain HTTP: the ground the S3 and Azure Blob
modes stand on (docs/compatibility.md will cite these).

moto 5.2 speaking S3 with signatures enforced, and Azurite 3.35's blob service with Shared
Key (tests/object_stores.py). Each test writes objects of its own names.
"""

from __future__ import annotations

import hashlib
import re
import uuid

import httpx
from botocore.credentials import Credentials

from .object_stores import BlobServer, S3Server, sigv4_headers

TEXT = {"Content-Type": "text/plain; charset=utf-8"}
WRONG_SECRET = "not-the-secret-0123456789abcdefghijklmnopq"
BLOCK_BLOB = {**TEXT, "x-ms-blob-type": "BlockBlob"}
WRONG_AZURE_KEY = "bm90LXRoZS1hY2NvdW50LWtleS0wMTIzNDU2Nzg5YWJjZGVm"


def fresh() -> str:
    return f"notes/{uuid.uuid4().hex[:10]}.txt"


# -- moto (S3) ------------------------------------------------------------------------------


def test_moto_refuses_a_wrong_secret_with_403_and_writes_nothing(moto_s3: S3Server) -> None:
    key, other = fresh(), fresh()
    assert moto_s3.request("PUT", key, b"kept\n", TEXT).status_code == 200
    for method, target, body in (("PUT", key, b"evil\n"), ("PUT", other, b"new\n")):
        refused = moto_s3.request(method, target, body, TEXT, secret_key=WRONG_SECRET)
        assert refused.status_code == 403
        assert b"<Code>SignatureDoesNotMatch</Code>" in refused.content
    refused = moto_s3.request("DELETE", key, secret_key=WRONG_SECRET)
    assert refused.status_code == 403
    assert moto_s3.request("GET", key).content == b"kept\n"
    assert moto_s3.request("GET", other).status_code == 404


def test_moto_refuses_unsigned_requests(moto_s3: S3Server) -> None:
    """Anonymous requests to a user's bucket are refused by its ACL even while moto's auth
    is off; that signatures are checked is shown by the wrong secret above."""
    key = fresh()
    assert moto_s3.request("PUT", key, b"kept\n", TEXT).status_code == 200
    assert httpx.get(moto_s3.url(key), trust_env=False).status_code == 403
    put = httpx.put(moto_s3.url(key), content=b"evil\n", headers=TEXT, trust_env=False)
    assert put.status_code == 403
    assert moto_s3.request("GET", key).content == b"kept\n"


def test_moto_does_not_compare_the_body_with_its_signed_hash(moto_s3: S3Server) -> None:
    """A gap to know: S3 itself refuses a body whose SHA-256 differs from the signed
    ``X-Amz-Content-SHA256`` (400 XAmzContentSHA256Mismatch); moto stores it. So moto proves
    the signature and the key, not that the payload hash covers the bytes sent."""
    key = fresh()
    credentials = Credentials(moto_s3.access_key, moto_s3.secret_key)
    headers = sigv4_headers("PUT", moto_s3.url(key), b"signed\n", dict(TEXT), credentials)
    assert headers["X-Amz-Content-SHA256"] == hashlib.sha256(b"signed\n").hexdigest()
    sent = httpx.put(moto_s3.url(key), content=b"SWAPPED\n", headers=headers, trust_env=False)
    assert sent.status_code == 200
    assert moto_s3.request("GET", key).content == b"SWAPPED\n"


def test_moto_gives_strong_etags_and_honours_if_match_and_if_none_match(
    moto_s3: S3Server,
) -> None:
    key = fresh()
    made = moto_s3.request("PUT", key, b"v1\n", {**TEXT, "If-None-Match": "*"})
    assert made.status_code == 200
    first = made.headers["etag"]
    assert re.fullmatch(r'"[0-9a-f]{32}"', first)  # strong: the body's MD5
    assert moto_s3.request("GET", key).headers["etag"] == first
    assert moto_s3.request("PUT", key, b"x", {**TEXT, "If-None-Match": "*"}).status_code == 412
    updated = moto_s3.request("PUT", key, b"v2\n", {**TEXT, "If-Match": first})
    assert updated.status_code == 200
    current = updated.headers["etag"]
    for stale in (first, f"W/{current}"):
        assert moto_s3.request("PUT", key, b"v3\n", {**TEXT, "If-Match": stale}).status_code == 412
        assert moto_s3.request("DELETE", key, headers={"If-Match": stale}).status_code == 412
    read = moto_s3.request("GET", key)
    assert (read.content, read.headers["etag"]) == (b"v2\n", current)
    assert moto_s3.request("DELETE", key, headers={"If-Match": current}).status_code == 204
    assert moto_s3.request("GET", key).status_code == 404


def test_moto_answers_if_match_on_a_missing_object_with_404_and_creates_nothing(
    moto_s3: S3Server,
) -> None:
    key = fresh()
    tag = '"0123456789abcdef0123456789abcdef"'
    refused = moto_s3.request("PUT", key, b"x", {**TEXT, "If-Match": tag})
    assert refused.status_code == 404
    assert b"<Code>NoSuchKey</Code>" in refused.content
    assert moto_s3.request("GET", key).status_code == 404


# -- Azurite (Azure Blob) ----------------------------------------------------------------


def blob_path(azurite: BlobServer, name: str) -> str:
    return f"/{azurite.container}/{name}"


def test_azurite_runs_with_its_telemetry_off(azurite: BlobServer) -> None:
    log = azurite.debug_log.read_text()
    assert "Don't need initialize Telemetry. enableTelemetry: false" in log
    assert "Telemetry initialize successfully" not in log


def test_azurite_requires_shared_key_and_writes_nothing_without_it(azurite: BlobServer) -> None:
    kept, other = blob_path(azurite, fresh()), blob_path(azurite, fresh())
    assert azurite.request("PUT", kept, b"kept\n", BLOCK_BLOB).status_code == 201
    attempts = (
        azurite.request("PUT", kept, b"evil\n", BLOCK_BLOB, signed=False),
        azurite.request("PUT", kept, b"evil\n", BLOCK_BLOB, key=WRONG_AZURE_KEY),
        azurite.request("PUT", other, b"new\n", BLOCK_BLOB, key=WRONG_AZURE_KEY),
        azurite.request("DELETE", kept, key=WRONG_AZURE_KEY),
    )
    for refused in attempts:
        assert refused.status_code == 403
        assert refused.headers["x-ms-error-code"] == "AuthorizationFailure"
    assert azurite.request("GET", kept).content == b"kept\n"
    assert azurite.request("GET", other).status_code == 404


def test_azurite_needs_the_blob_type_header_to_put_a_blob(azurite: BlobServer) -> None:
    path = blob_path(azurite, fresh())
    assert azurite.request("PUT", path, b"x", TEXT).status_code == 400
    assert azurite.request("GET", path).status_code == 404


def test_azurite_answers_201_and_202_gives_strong_etags_and_honours_if_match(
    azurite: BlobServer,
) -> None:
    path = blob_path(azurite, fresh())
    made = azurite.request("PUT", path, b"v1\n", {**BLOCK_BLOB, "If-None-Match": "*"})
    assert made.status_code == 201
    first = made.headers["etag"]
    assert re.fullmatch(r'"0x[0-9A-F]+"', first)  # strong
    read = azurite.request("GET", path)
    assert (read.content, read.headers["etag"]) == (b"v1\n", first)
    assert read.headers["content-type"] == TEXT["Content-Type"]
    updated = azurite.request("PUT", path, b"v2\n", {**BLOCK_BLOB, "If-Match": first})
    assert updated.status_code == 201
    current = updated.headers["etag"]
    assert current != first
    for stale in (first, f"W/{current}"):
        refused = azurite.request("PUT", path, b"v3\n", {**BLOCK_BLOB, "If-Match": stale})
        assert refused.status_code == 412
        assert refused.headers["x-ms-error-code"] == "ConditionNotMet"
        assert azurite.request("DELETE", path, headers={"If-Match": stale}).status_code == 412
    read = azurite.request("GET", path)
    assert (read.content, read.headers["etag"]) == (b"v2\n", current)
    assert azurite.request("DELETE", path, headers={"If-Match": current}).status_code == 202
    assert azurite.request("GET", path).status_code == 404


def test_azurite_refuses_if_none_match_star_on_an_existing_blob_with_409(
    azurite: BlobServer,
) -> None:
    """Not 412: Azure answers a create over an existing blob with 409 BlobAlreadyExists."""
    path = blob_path(azurite, fresh())
    assert azurite.request("PUT", path, b"kept\n", BLOCK_BLOB).status_code == 201
    refused = azurite.request("PUT", path, b"x", {**BLOCK_BLOB, "If-None-Match": "*"})
    assert refused.status_code == 409
    assert refused.headers["x-ms-error-code"] == "BlobAlreadyExists"
    assert azurite.request("GET", path).content == b"kept\n"


def test_azurite_answers_if_match_on_a_missing_blob_with_412_and_creates_nothing(
    azurite: BlobServer,
) -> None:
    path = blob_path(azurite, fresh())
    refused = azurite.request("PUT", path, b"x", {**BLOCK_BLOB, "If-Match": '"0x8DC0123456789AB"'})
    assert refused.status_code == 412
    assert refused.headers["x-ms-error-code"] == "ConditionNotMet"
    assert azurite.request("GET", path).status_code == 404


def test_azurite_creates_a_missing_blob_under_if_match_star(azurite: BlobServer) -> None:
    """A deviation to know (RFC 9110 says ``If-Match: *`` fails when nothing is there):
    Azurite writes. A guard must send the tag it read, never ``*``."""
    path = blob_path(azurite, fresh())
    written = azurite.request("PUT", path, b"x", {**BLOCK_BLOB, "If-Match": "*"})
    assert written.status_code == 201
    assert azurite.request("GET", path).content == b"x"
