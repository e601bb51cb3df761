"""The contract server's If-Match faults (contract_server.faults), over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from undogate.contract_server import ContractServer

CUSTOMER = "/records/customer-123"
NOTES = "/docs/notes.md"
PATCH_TYPE = "application/json-patch+json"
OPS = json.dumps([{"op": "replace", "path": "/status", "value": "won"}])


@pytest.fixture
def client(server: ContractServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=5.0, trust_env=False) as http:
        yield http


def write(client: httpx.Client, method: str, path: str, body: str, if_match: str | None) -> int:
    media = PATCH_TYPE if method == "PATCH" else "text/markdown"
    headers = {"Content-Type": media, **({"If-Match": if_match} if if_match else {})}
    return client.request(method, path, content=body.encode(), headers=headers).status_code


def test_weak_if_match_lets_the_weak_form_of_the_current_tag_match(
    server: ContractServer, client: httpx.Client
) -> None:
    etag = server.etag(CUSTOMER)
    assert write(client, "PATCH", CUSTOMER, OPS, "W/" + etag) == 412  # honest: strong only
    server.arm("weak_if_match", CUSTOMER)
    assert write(client, "PATCH", CUSTOMER, OPS, 'W/"g0-not-the-tag"') == 412
    assert write(client, "PATCH", CUSTOMER, OPS, "W/" + etag) == 200
    assert server.get_record(CUSTOMER)["status"] == "won"
    assert server.armed_faults() == []  # consumed by the one weak match


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PATCH", "/records/nobody", json.dumps([{"op": "add", "path": "/status", "value": "x"}])),
        ("PUT", "/docs/nobody.md", "made\n"),
    ],
)
def test_create_under_if_match_creates_a_missing_resource_that_can_be_deleted(
    server: ContractServer, client: httpx.Client, method: str, path: str, body: str
) -> None:
    tag = server.etag(CUSTOMER)  # a tag the server issued, for another resource
    assert write(client, method, path, body, tag) == 404  # honest: nothing is created
    server.arm("create_under_if_match")
    assert write(client, method, path, body, None) == 404  # only under If-Match
    assert write(client, method, path, body, tag) == 201
    made = client.get(path)
    assert made.status_code == 200 and made.headers["etag"].startswith('"')
    assert made.content == (b'{"status":"x"}' if method == "PATCH" else b"made\n")
    assert client.delete(CUSTOMER).status_code == 405  # only what the fault made
    assert client.delete(path).status_code == 204
    assert client.get(path).status_code == 404


def test_deleting_a_created_resource_honours_write_faults_and_reset_removes_it(
    server: ContractServer, client: httpx.Client
) -> None:
    server.arm("create_under_if_match")
    assert write(client, "PUT", "/docs/x.md", "x\n", server.etag(NOTES)) == 201
    server.arm("status:500")
    assert client.delete("/docs/x.md").status_code == 500
    assert client.get("/docs/x.md").status_code == 200
    server.reset()
    assert client.get("/docs/x.md").status_code == 404
