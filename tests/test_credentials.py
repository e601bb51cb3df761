"""A resource's ``auth`` and static ``headers`` (adapters/credentials.py): what a config may
say, what a resource's identity holds of them, what the preview tells of them, and the
signers over the exact bytes sent. The schemes against real servers:
tests/test_object_stores.py (moto, Azurite), tests/test_secrets.py (every scheme through
every surface)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as AwsCredentials

from undogate.adapters.credentials import Credentials, authentication
from undogate.config import Config, parse_config
from undogate.errors import ConfigError, MissingToken

BASE = {"agent_id": "a", "name": "n", "conditional_writes": True}
DOC = {**BASE, "id": "doc", "kind": "webdav_text", "url": "https://s3.example/b/notes.md"}
SIGV4 = {
    "scheme": "aws_sigv4",
    "region": "eu-west-1",
    "service": "s3",
    "access_key_env": "AWS_KEY",
    "secret_key_env": "AWS_SECRET",
}
AZURE = {"scheme": "azure_shared_key", "account": "undogatetest", "key_env": "AZ_KEY"}


def load(*resources: dict[str, Any]) -> Config:
    return parse_config({"agents": [{"id": "a"}], "resources": list(resources)})


def problems(*resources: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        load(*resources)
    return list(info.value.problems)


def fingerprint(**extra: Any) -> str:
    return load({**DOC, **extra}).resources[0].fingerprint


# -- the config ------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["bearer", "basic"])
def test_the_long_form_of_a_token_is_the_same_resource_as_its_shorthand(scheme: str) -> None:
    short = fingerprint(token_env="TOK", token_scheme=scheme)
    assert fingerprint(auth={"scheme": scheme, "token_env": "TOK"}) == short
    assert short != fingerprint(
        token_env="TOK", token_scheme="basic" if scheme == "bearer" else "bearer"
    )


def test_the_scheme_and_the_names_of_its_variables_are_identity() -> None:
    base = fingerprint(auth=SIGV4)
    changed = [
        {**SIGV4, "region": "us-east-1"},
        {**SIGV4, "service": "execute-api"},
        {**SIGV4, "access_key_env": "OTHER_KEY"},
        {**SIGV4, "secret_key_env": "OTHER_SECRET"},
        {**SIGV4, "session_token_env": "AWS_SESSION"},
    ]
    prints = {fingerprint(auth=auth) for auth in changed}
    assert base not in prints and len(prints) == len(changed)
    others = {
        fingerprint(auth=AZURE),
        fingerprint(auth={**AZURE, "account": "othertest"}),
        fingerprint(auth={"scheme": "header", "name": "X-Api-Key", "token_env": "TOK"}),
        fingerprint(auth={"scheme": "header", "name": "X-Key", "token_env": "TOK"}),
        fingerprint(token_env="TOK"),
        fingerprint(),
    }
    assert len(others | prints | {base}) == len(changed) + 7


def test_static_headers_are_identity_and_a_dump_loads_back_the_same() -> None:
    with_type = fingerprint(auth=AZURE, headers={"x-ms-blob-type": "BlockBlob"})
    assert with_type != fingerprint(auth=AZURE)
    assert with_type != fingerprint(auth=AZURE, headers={"x-ms-blob-type": "AppendBlob"})
    resource = load({**DOC, "auth": AZURE, "headers": {"x-ms-blob-type": "BlockBlob"}})
    dumped = resource.resources[0].model_dump(mode="json", exclude_none=True)
    assert dumped["headers"] == {"x-ms-blob-type": "BlockBlob"} and dumped["auth"] == AZURE
    assert "token_env" not in dumped and "token_scheme" not in dumped
    assert load(dumped).resources[0].fingerprint == with_type


def test_a_credential_is_given_one_way_only() -> None:
    both = {"auth": {"scheme": "bearer", "token_env": "TOK"}, "token_env": "TOK"}
    ((where, why),) = problems({**DOC, **both})
    assert where == "resources[0]" and "either as auth or as token_env" in why
    ((_, why),) = problems({**DOC, "auth": SIGV4, "token_scheme": "basic"})
    assert "not both" in why


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "cookie",
        "HOST",
        "Content-Length",
        "content-type",
        "Content-MD5",
        "Content-Encoding",
        "If-Match",
        "if-none-match",
        "If-Unmodified-Since",
        "Transfer-Encoding",
        "Connection",
        "Expect",
        "Accept",
        "Accept-Encoding",
        "Range",
        "Date",
        "Proxy-Authorization",
        "X-HTTP-Method-Override",
        "X-Amz-Date",
        "x-amz-content-sha256",
        "X-Amz-Security-Token",
        "x-ms-date",
        "X-MS-Version",
    ],
)
def test_a_static_header_the_gateway_sets_is_refused_at_load(name: str) -> None:
    found = problems({**DOC, "auth": SIGV4, "headers": {name: "x"}})
    assert [where for where, _ in found] == [f"resources[0].headers.{name}"]


def test_static_headers_of_the_operators_own_are_kept_as_written() -> None:
    headers = {
        "x-ms-blob-type": "BlockBlob",
        "Notion-Version": "2022-06-28",
        "x-amz-storage-class": "STANDARD_IA",
        "User-Agent": "undogate (ops@example.com)",
    }
    (resource,) = load({**DOC, "headers": headers}).resources
    assert dict(resource.headers) == headers


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"X-Api-Key": "k"}, "a credential"),  # the header scheme's own
        ({"X-Trace": "a", "x-trace": "b"}, "named twice"),
        ({"X-Trace": " padded"}, "should match pattern"),
        ({"X-Trace": "two\r\nlines"}, "should match pattern"),
        ({"X Trace": "x"}, "should match pattern"),
    ],
)
def test_static_headers_that_cannot_be_sent_as_written_are_refused(
    headers: dict[str, str], why: str
) -> None:
    auth = {"scheme": "header", "name": "X-Api-Key", "token_env": "TOK"}
    found = problems({**DOC, "auth": auth, "headers": headers})
    assert found and all(why in text for _, text in found), found


@pytest.mark.parametrize("name", ["Host", "Content-Type", "If-Match", "X-Amz-Date", "Date"])
def test_a_header_scheme_may_not_name_a_header_the_gateway_sets(name: str) -> None:
    auth = {"scheme": "header", "name": name, "token_env": "TOK"}
    assert problems({**DOC, "auth": auth}) == [
        ("resources[0].auth.name", f"{name} is set by the gateway itself")
    ]


@pytest.mark.parametrize(
    "auth",
    [
        {**AZURE, "account": "Undogate"},  # Azure account names are lower case
        {**SIGV4, "region": "EU West"},
        {**SIGV4, "secret_key_env": "not a name"},
        {"scheme": "kerberos", "token_env": "TOK"},
        {"scheme": "bearer"},
    ],
)
def test_auth_settings_are_checked_at_load(auth: dict[str, Any]) -> None:
    assert problems({**DOC, "auth": auth})


def test_a_test_copy_sends_what_its_production_resource_sends() -> None:
    prod = {**DOC, "auth": AZURE, "headers": {"x-ms-blob-type": "BlockBlob"}}
    copy = {**prod, "id": "copy", "url": "https://s3.example/b/copy.md", "test_copy_of": "doc"}
    load(prod, copy)
    load(prod, {**copy, "auth": {**AZURE, "account": "othertest", "key_env": "OTHER"}})
    for other, why in (
        ({"auth": SIGV4}, "same scheme"),
        ({"headers": {"x-ms-blob-type": "AppendBlob"}}, "same static headers"),
        ({"headers": {}}, "same static headers"),
    ):
        found = problems(prod, {**copy, **other})
        assert [where for where, _ in found] == ["resources[1].test_copy_of"]
        assert why in found[0][1]


# -- what a reviewer is told ------------------------------------------------------------


@pytest.mark.parametrize(
    ("auth", "summary", "adds"),
    [
        (
            {"scheme": "bearer", "token_env": "TOK"},
            "a bearer token from the gateway's environment, added at send time",
            ["Authorization"],
        ),
        (
            {"scheme": "header", "name": "X-Api-Key", "token_env": "TOK"},
            "a token from the gateway's environment in X-Api-Key, added at send time",
            ["X-Api-Key"],
        ),
        (
            SIGV4,
            "signed with AWS SigV4 (eu-west-1, s3) at send time, over the exact bytes shown",
            ["Authorization", "X-Amz-Date", "X-Amz-Content-SHA256"],
        ),
        (
            {**SIGV4, "service": "execute-api", "session_token_env": "AWS_SESSION"},
            "signed with AWS SigV4 (eu-west-1, execute-api) at send time, over the exact "
            "bytes shown",
            ["Authorization", "X-Amz-Date", "X-Amz-Security-Token"],
        ),
        (
            AZURE,
            "signed with Azure Shared Key (account undogatetest) at send time",
            ["Authorization", "x-ms-date", "x-ms-version"],
        ),
    ],
)
def test_the_preview_says_how_a_request_is_signed_never_with_what(
    auth: dict[str, Any], summary: str, adds: list[str]
) -> None:
    (resource,) = load({**DOC, "auth": auth}).resources
    assert authentication(resource) == {"scheme": auth["scheme"], "summary": summary, "adds": adds}
    assert authentication(load(DOC).resources[0]) is None


# -- the signers ------------------------------------------------------------------------


def test_a_sigv4_signature_covers_the_sha256_of_exactly_the_bytes_sent() -> None:
    """For a service whose requests carry no hash header (not S3), the body's SHA-256 is
    inside the canonical request botocore signs: recomputed over exactly the bytes sent,
    the signature matches; over as many bytes, one of them another, it does not."""
    auth = {**SIGV4, "service": "execute-api"}
    (resource,) = load({**DOC, "auth": auth}).resources
    environ = {"AWS_KEY": "AKIAUNDOGATETEST0001", "AWS_SECRET": "secret-" + "s" * 33}
    body = b'{"status": "customer"}\n'
    headers = {"Content-Type": "application/json", "If-Match": '"7"'}
    added = Credentials(environ).headers_for(resource, "PUT", resource.url, headers, body)
    assert set(added) == {"Authorization", "X-Amz-Date"}

    def signature(sent: bytes) -> str:
        arrived = {**headers, "Content-Length": str(len(sent)), "X-Amz-Date": added["X-Amz-Date"]}
        request = AWSRequest("PUT", resource.url, arrived, sent)
        request.context["timestamp"] = added["X-Amz-Date"]
        signer = SigV4Auth(AwsCredentials("AKIAUNDOGATETEST0001", environ["AWS_SECRET"]),
                           "execute-api", "eu-west-1")  # fmt: skip
        canonical = signer.canonical_request(request)
        assert canonical.endswith(hashlib.sha256(sent).hexdigest())
        return str(signer.signature(signer.string_to_sign(request, canonical), request))

    sent = added["Authorization"].rpartition("Signature=")[2]
    assert signature(body) == sent
    assert signature(body[:-1] + b" ") != sent


def test_an_s3_signature_carries_the_hash_of_the_body_even_over_https() -> None:
    (resource,) = load({**DOC, "auth": SIGV4}).resources
    assert resource.url.startswith("https://")
    environ = {"AWS_KEY": "AKIAUNDOGATETEST0001", "AWS_SECRET": "s" * 40}
    body = "Zoë's notes\n".encode()
    # botocore leaves an S3 body unsigned over HTTPS when a checksum header is present:
    # not here.
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()  # noqa: S324 - S3's own
    for headers in ({}, {"Content-MD5": md5}):
        added = Credentials(environ).headers_for(resource, "PUT", resource.url, headers, body)
        assert added["X-Amz-Content-SHA256"] == hashlib.sha256(body).hexdigest()
    empty = Credentials(environ).headers_for(resource, "GET", resource.url, {})
    assert empty["X-Amz-Content-SHA256"] == hashlib.sha256(b"").hexdigest()


def test_a_session_token_is_sent_and_signed() -> None:
    auth = {**SIGV4, "session_token_env": "AWS_SESSION"}
    (resource,) = load({**DOC, "auth": auth}).resources
    environ = {"AWS_KEY": "AKIAUNDOGATETEST0001", "AWS_SECRET": "s" * 40, "AWS_SESSION": "t" * 60}
    added = Credentials(environ).headers_for(resource, "GET", resource.url, {})
    assert added["X-Amz-Security-Token"] == "t" * 60
    assert "x-amz-security-token" in added["Authorization"].partition("SignedHeaders=")[2]
    del environ["AWS_SESSION"]
    with pytest.raises(MissingToken) as info:
        Credentials(environ).headers_for(resource, "GET", resource.url, {})
    assert info.value.details["variable"] == "AWS_SESSION"


@pytest.mark.parametrize(
    ("auth", "environ", "missing"),
    [
        (SIGV4, {"AWS_KEY": "AKIAUNDOGATETEST0001"}, "AWS_SECRET"),
        (SIGV4, {"AWS_SECRET": "s" * 40}, "AWS_KEY"),
        (AZURE, {}, "AZ_KEY"),
        ({"scheme": "header", "name": "X-Api-Key", "token_env": "TOK"}, {"TOK": ""}, "TOK"),
    ],
)
def test_a_missing_variable_is_named_never_a_value(
    auth: dict[str, Any], environ: dict[str, str], missing: str
) -> None:
    (resource,) = load({**DOC, "auth": auth}).resources
    for call in (
        lambda: Credentials(environ).check(resource),
        lambda: Credentials(environ).headers_for(resource, "GET", resource.url, {}),
    ):
        with pytest.raises(MissingToken) as info:
            call()
        assert info.value.details["variable"] == missing and missing in info.value.message
        assert all(value not in str(info.value.to_dict()) for value in environ.values() if value)


def test_an_azure_key_that_is_not_base64_is_named_never_shown() -> None:
    (resource,) = load({**DOC, "auth": AZURE}).resources
    key = "not base64: a password!"
    with pytest.raises(MissingToken) as info:
        Credentials({"AZ_KEY": key}).headers_for(resource, "GET", resource.url, {})
    assert "AZ_KEY" in info.value.message and key not in str(info.value.to_dict())
    good = base64.b64encode(b"k" * 32).decode()
    added = Credentials({"AZ_KEY": good}).headers_for(resource, "GET", resource.url, {})
    assert added["Authorization"].startswith("SharedKey undogatetest:")
