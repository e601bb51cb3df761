"""The reference endpoint, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.contract_server import ContractServer, seed_demo
from undogate.jsonvalue import JsonError, JsonNumber, JsonValue, dumps, loads_object
from undogate.net.etag import parse_etag

CUSTOMER = "/records/customer-123"
WRAPPED = "/records/wrapped-7"
NOTES = "/docs/notes.md"
PLAIN = "/docs/plain.txt"
PATCH_TYPE = {"Content-Type": "application/json-patch+json"}
# Building a default SSL context costs ~40 ms; every client here shares this one.
TLS = ssl.create_default_context()


def http_client(srv: ContractServer, timeout: float = 5.0) -> httpx.Client:
    return httpx.Client(base_url=srv.base_url, timeout=timeout, verify=TLS)


@pytest.fixture
def server() -> Iterator[ContractServer]:
    with ContractServer(None, faults=True) as srv:
        yield srv


@pytest.fixture
def client(server: ContractServer) -> Iterator[httpx.Client]:
    with http_client(server) as http:
        yield http


def patch(
    client: httpx.Client, path: str, ops: list[dict[str, Any]] | str, etag: str | None
) -> httpx.Response:
    headers = dict(PATCH_TYPE)
    if etag is not None:
        headers["If-Match"] = etag
    body = ops if isinstance(ops, str) else json.dumps(ops)
    return client.patch(path, content=body.encode("utf-8"), headers=headers)


def put_text(
    client: httpx.Client, path: str, body: bytes, media_type: str, etag: str | None
) -> httpx.Response:
    headers = {"Content-Type": media_type}
    if etag is not None:
        headers["If-Match"] = etag
    return client.put(path, content=body, headers=headers)


def test_get_serves_exactly_one_strong_etag(client: httpx.Client) -> None:
    for path, media_type in [(CUSTOMER, "application/json"), (NOTES, "text/markdown")]:
        response = client.get(path)
        assert response.status_code == 200
        assert response.headers["content-type"] == media_type
        etags = response.headers.get_list("etag")
        assert len(etags) == 1
        assert not parse_etag(etags[0]).weak


def test_seed_record_is_served_losslessly(client: httpx.Client) -> None:
    body = client.get(CUSTOMER).content
    assert b'"balance":123456789012345678901234567890' in body
    assert b'"ratio":0.1000000000000000055511151231257827' in body
    record = loads_object(body)
    assert list(record) == [
        "id",
        "name",
        "status",
        "owner",
        "tier",
        "balance",
        "ratio",
        "notes",
    ]
    assert record["tier"] is None


def test_unknown_path_is_404(client: httpx.Client) -> None:
    assert client.get("/records/nope").status_code == 404


def test_head_matches_get(client: httpx.Client) -> None:
    got = client.get(PLAIN)
    head = client.head(PLAIN)
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["etag"] == got.headers["etag"]
    assert head.headers["content-length"] == str(len(got.content))


def test_every_write_gets_a_new_etag_even_with_identical_bytes(
    server: ContractServer, client: httpx.Client
) -> None:
    first = client.get(CUSTOMER)
    seen = {first.headers["etag"]}
    etag = first.headers["etag"]
    for _ in range(3):
        response = patch(
            client, CUSTOMER, [{"op": "replace", "path": "/status", "value": "lead"}], etag
        )
        assert response.status_code == 200
        assert response.content == first.content
        etag = response.headers["etag"]
        assert not parse_etag(etag).weak
        assert etag not in seen
        seen.add(etag)
        assert client.get(CUSTOMER).headers["etag"] == etag
    assert server.write_count(CUSTOMER) == 3

    text = client.get(PLAIN)
    response = put_text(client, PLAIN, text.content, "text/plain", text.headers["etag"])
    assert response.status_code == 204
    assert response.headers["etag"] != text.headers["etag"]
    assert client.get(PLAIN).content == text.content

    before = server.etag(PLAIN)
    assert server.touch(PLAIN) != before
    assert server.raw_bytes(PLAIN) == text.content


def test_stale_if_match_is_412_with_no_effect(server: ContractServer, client: httpx.Client) -> None:
    stale = client.get(CUSTOMER).headers["etag"]
    server.set_field(CUSTOMER, "/owner", "alex")
    before = server.raw_bytes(CUSTOMER)
    current = server.etag(CUSTOMER)

    response = patch(
        client, CUSTOMER, [{"op": "replace", "path": "/status", "value": "won"}], stale
    )
    assert response.status_code == 412
    weak = "W/" + current
    response = patch(client, CUSTOMER, [{"op": "replace", "path": "/status", "value": "won"}], weak)
    assert response.status_code == 412
    assert server.raw_bytes(CUSTOMER) == before
    assert server.etag(CUSTOMER) == current
    assert server.write_count(CUSTOMER) == 0
    assert server.attempt_count(CUSTOMER) == 2

    text_stale = client.get(NOTES).headers["etag"]
    server.touch(NOTES)
    response = put_text(client, NOTES, b"new", "text/markdown", text_stale)
    assert response.status_code == 412
    assert server.get_text(NOTES).startswith("# Account notes")


def test_missing_if_match_is_428(server: ContractServer, client: httpx.Client) -> None:
    ops = [{"op": "replace", "path": "/status", "value": "won"}]
    assert patch(client, CUSTOMER, ops, None).status_code == 428
    assert put_text(client, PLAIN, b"x", "text/plain", None).status_code == 428
    assert server.get_record(CUSTOMER)["status"] == "lead"
    assert server.write_count(CUSTOMER) == 0


def test_wrong_patch_media_type_is_415(server: ContractServer, client: httpx.Client) -> None:
    etag = server.etag(CUSTOMER)
    body = json.dumps([{"op": "replace", "path": "/status", "value": "won"}])
    for media_type in ["application/json", "text/plain"]:
        response = client.patch(
            CUSTOMER, content=body, headers={"Content-Type": media_type, "If-Match": etag}
        )
        assert response.status_code == 415
    # A JSON Patch sent as a merge patch would replace the record with an array: refused.
    merge = {"Content-Type": "application/merge-patch+json", "If-Match": etag}
    assert client.patch(CUSTOMER, content=body, headers=merge).status_code == 422
    assert server.etag(CUSTOMER) == etag
    assert server.get_record(CUSTOMER)["status"] == "lead"


def test_a_merge_patch_and_a_record_put_are_conditional(
    server: ContractServer, client: httpx.Client
) -> None:
    etag = server.etag(CUSTOMER)
    merge = b'{"status": "won", "owner": null}'
    stale = {"Content-Type": "application/merge-patch+json", "If-Match": '"stale"'}
    assert client.patch(CUSTOMER, content=merge, headers=stale).status_code == 412
    record = b'{"status": "won"}'
    put = {"Content-Type": "application/json"}
    assert client.put(CUSTOMER, content=record, headers=put).status_code == 428
    assert (
        client.put(CUSTOMER, content=record, headers={**put, "If-Match": '"x"'}).status_code == 412
    )
    assert server.etag(CUSTOMER) == etag and server.write_count(CUSTOMER) == 0
    merged = client.patch(CUSTOMER, content=merge, headers={**stale, "If-Match": etag})
    assert merged.status_code == 200 and "owner" not in server.get_record(CUSTOMER)
    put_ok = client.put(
        CUSTOMER, content=record, headers={**put, "If-Match": server.etag(CUSTOMER)}
    )
    assert put_ok.status_code == 200 and server.raw_bytes(CUSTOMER) == record  # kept as sent


def test_failed_test_op_is_409_and_the_patch_is_atomic(
    server: ContractServer, client: httpx.Client
) -> None:
    etag = server.etag(CUSTOMER)
    before = server.raw_bytes(CUSTOMER)
    ops = [
        {"op": "replace", "path": "/status", "value": "won"},
        {"op": "test", "path": "/owner", "value": "someone-else"},
    ]
    assert patch(client, CUSTOMER, ops, etag).status_code == 409
    missing = [{"op": "test", "path": "/nope", "value": 1}]
    assert patch(client, CUSTOMER, missing, etag).status_code == 409
    assert server.raw_bytes(CUSTOMER) == before
    assert server.etag(CUSTOMER) == etag
    assert server.write_count(CUSTOMER) == 0


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ('[{"op": "frobnicate", "path": "/status"}]', 422),
        ('{"op": "replace", "path": "/status", "value": 1}', 422),
        ('[{"op": "replace", "path": "status", "value": 1}]', 422),
        ('[{"op": "replace", "path": "/missing", "value": 1}]', 422),
        ('[{"op": "replace", "path": "/status"}]', 422),
        ('[{"op": "replace", "path": "", "value": [1]}]', 422),
        ('[{"op": "replace", "path": "/status", "value": 1', 400),
        ('[{"op": "replace", "op": "add", "path": "/status", "value": 1}]', 400),
    ],
)
def test_invalid_patch_is_refused_with_no_effect(
    server: ContractServer, client: httpx.Client, body: str, status: int
) -> None:
    etag = server.etag(CUSTOMER)
    before = server.raw_bytes(CUSTOMER)
    assert patch(client, CUSTOMER, body, etag).status_code == status
    assert server.raw_bytes(CUSTOMER) == before
    assert server.etag(CUSTOMER) == etag


def test_big_numbers_survive_a_patch_round_trip_byte_exact(
    server: ContractServer, client: httpx.Client
) -> None:
    original = client.get(CUSTOMER)
    body = (
        '[{"op":"test","path":"/balance","value":123456789012345678901234567890},'
        '{"op":"test","path":"/ratio","value":0.1000000000000000055511151231257827},'
        '{"op":"replace","path":"/balance","value":1234567890123456789012345678901.50},'
        '{"op":"replace","path":"/status","value":"won"}]'
    )
    response = patch(client, CUSTOMER, body, original.headers["etag"])
    assert response.status_code == 200
    expected = original.content.replace(
        b'"balance":123456789012345678901234567890',
        b'"balance":1234567890123456789012345678901.50',
    ).replace(b'"status":"lead"', b'"status":"won"')
    assert response.content == expected
    assert client.get(CUSTOMER).content == expected
    assert server.get_record(CUSTOMER)["ratio"] == JsonNumber(
        "0.1000000000000000055511151231257827"
    )


def test_wrapped_record_patch_at_data_status(server: ContractServer, client: httpx.Client) -> None:
    etag = client.get(WRAPPED).headers["etag"]
    ops = [
        {"op": "test", "path": "/data/status", "value": "open"},
        {"op": "replace", "path": "/data/status", "value": "closed"},
    ]
    response = patch(client, WRAPPED, ops, etag)
    assert response.status_code == 200
    assert response.content == (
        b'{"data":{"status":"closed","owner":"kim","priority":2},"meta":{"rev":1}}'
    )
    assert server.write_count(WRAPPED) == 1
    assert server.write_count(CUSTOMER) == 0


def test_text_put_keeps_the_exact_media_type(server: ContractServer, client: httpx.Client) -> None:
    etag = client.get(NOTES).headers["etag"]
    body = "# Notes\n\nÜber café ✓\n".encode()
    media_type = "text/markdown; charset=utf-8"
    response = put_text(client, NOTES, body, media_type, etag)
    assert response.status_code == 204
    new_etag = response.headers["etag"]
    got = client.get(NOTES)
    assert got.content == body
    assert got.headers["content-type"] == media_type
    assert got.headers["etag"] == new_etag
    assert server.media_type(NOTES) == media_type


@pytest.mark.parametrize(
    ("body", "media_type"),
    [
        (b"caf\xe9", "text/plain"),
        (b"\xff\xfe", "text/markdown; charset=utf-8"),
        (b"fine", "text/plain; charset=latin-1"),
        (b"fine", "text/html"),
        (b"fine", "application/octet-stream"),
    ],
)
def test_text_put_refuses_non_utf8_or_unsupported_types(
    server: ContractServer, client: httpx.Client, body: bytes, media_type: str
) -> None:
    etag = server.etag(PLAIN)
    before = server.raw_bytes(PLAIN)
    assert put_text(client, PLAIN, body, media_type, etag).status_code == 415
    assert server.raw_bytes(PLAIN) == before
    assert server.etag(PLAIN) == etag
    assert server.media_type(PLAIN) == "text/plain"


def test_methods_and_unknown_paths(server: ContractServer, client: httpx.Client) -> None:
    etag = server.etag(PLAIN)
    assert put_text(client, "/docs/new.txt", b"x", "text/plain", '"x"').status_code == 404
    ops = [{"op": "replace", "path": "/x", "value": 1}]
    assert patch(client, PLAIN, ops, etag).status_code == 405
    response = client.post(CUSTOMER, content=b"{}", headers={"Content-Type": "application/json"})
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD, PATCH, PUT"
    assert client.delete(PLAIN).status_code == 405
    assert server.paths() == [NOTES, PLAIN, CUSTOMER, WRAPPED]


def test_concurrent_writes_with_one_etag_have_exactly_one_winner(server: ContractServer) -> None:
    etag = server.etag(CUSTOMER)
    statuses: list[int] = []
    barrier = threading.Barrier(8)

    def write(owner: str) -> None:
        with http_client(server) as http:
            barrier.wait(timeout=5)
            ops = [{"op": "replace", "path": "/owner", "value": owner}]
            statuses.append(patch(http, CUSTOMER, ops, etag).status_code)

    threads = [threading.Thread(target=write, args=(f"o{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(statuses) == [200] + [412] * 7
    assert server.write_count(CUSTOMER) == 1


def test_oversized_body_is_413(server: ContractServer, client: httpx.Client) -> None:
    etag = server.etag(PLAIN)
    response = put_text(client, PLAIN, b"a" * (1024 * 1024 + 1), "text/plain", etag)
    assert response.status_code == 413
    assert server.etag(PLAIN) == etag
    assert client.get(PLAIN).status_code == 200


def test_keep_alive_serves_many_requests_on_one_connection(client: httpx.Client) -> None:
    for _ in range(5):
        assert client.get(CUSTOMER).status_code == 200
        assert client.get("/nope").status_code == 404


def test_token_is_required_when_configured() -> None:
    with ContractServer(None, token="s3cret") as srv, http_client(srv) as http:
        assert http.get(CUSTOMER).status_code == 401
        assert http.get(CUSTOMER, headers={"Authorization": "Bearer wrong"}).status_code == 401
        ok = http.get(CUSTOMER, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200


def test_helpers_edit_state_from_outside(server: ContractServer, client: httpx.Client) -> None:
    etag = server.etag(WRAPPED)
    new_etag = server.set_record(WRAPPED, {"status": "held", "owner": "kim"}, pointer="/data")
    assert new_etag != etag
    assert client.get(WRAPPED).json()["data"] == {"status": "held", "owner": "kim"}
    server.set_record("/customers/9", '{"n": 10000000000000000000000000001}')  # kept as given
    assert client.get("/customers/9").content == b'{"n": 10000000000000000000000000001}'
    server.set_text("/docs/extra.md", "hi", media_type="text/markdown; charset=utf-8")
    got = client.get("/docs/extra.md")
    assert got.headers["content-type"] == "text/markdown; charset=utf-8"
    assert server.get_text("/docs/extra.md") == "hi"
    assert server.write_count(WRAPPED) == 0


def test_reset_restores_seed_with_never_repeated_etags(
    server: ContractServer, client: httpx.Client
) -> None:
    seed_etag = server.etag(CUSTOMER)
    seed_bytes = server.raw_bytes(CUSTOMER)
    patch(client, CUSTOMER, [{"op": "remove", "path": "/tier"}], seed_etag)
    server.set_text("/docs/extra.txt", "x")
    server.arm("status:503")
    server.reset()
    assert server.raw_bytes(CUSTOMER) == seed_bytes
    assert server.etag(CUSTOMER) != seed_etag
    assert server.write_count(CUSTOMER) == 0
    assert server.armed_faults() == []
    assert client.get("/docs/extra.txt").status_code == 404


# -- faults -------------------------------------------------------------------------------


def test_apply_then_drop(server: ContractServer, client: httpx.Client) -> None:
    server.arm("apply_then_drop", path=CUSTOMER)
    etag = server.etag(CUSTOMER)
    with pytest.raises(httpx.RemoteProtocolError):
        patch(client, CUSTOMER, [{"op": "replace", "path": "/status", "value": "won"}], etag)
    assert server.get_record(CUSTOMER)["status"] == "won"
    assert server.etag(CUSTOMER) != etag
    assert server.write_count(CUSTOMER) == 1
    assert client.get(CUSTOMER).status_code == 200


def test_apply_then_500(server: ContractServer, client: httpx.Client) -> None:
    server.arm("apply_then_500")
    etag = server.etag(PLAIN)
    response = put_text(client, PLAIN, b"new text", "text/plain", etag)
    assert response.status_code == 500
    assert server.get_text(PLAIN) == "new text"
    assert server.write_count(PLAIN) == 1


def test_apply_faults_wait_for_a_write_that_applies(
    server: ContractServer, client: httpx.Client
) -> None:
    server.arm("apply_then_500", path=CUSTOMER)
    ops = [{"op": "replace", "path": "/status", "value": "won"}]
    assert patch(client, CUSTOMER, ops, '"stale"').status_code == 412
    response = patch(client, CUSTOMER, ops, server.etag(CUSTOMER))
    assert response.status_code == 500
    assert server.armed_faults() == []


def test_hang_times_out_the_client_without_blocking_others_or_stop() -> None:
    srv = ContractServer(None, hang_seconds=30).start()
    try:
        srv.arm("hang", path=CUSTOMER)
        etag = srv.etag(CUSTOMER)
        with http_client(srv, timeout=0.3) as http:
            with pytest.raises(httpx.ReadTimeout):
                patch(http, CUSTOMER, [{"op": "replace", "path": "/status", "value": "x"}], etag)
            assert http.get(CUSTOMER).status_code == 200
        assert srv.etag(CUSTOMER) == etag
        assert srv.get_record(CUSTOMER)["status"] == "lead"
        assert srv.write_count(CUSTOMER) == 0
    finally:
        started = time.monotonic()
        srv.stop()
        assert time.monotonic() - started < 3.0


def test_ok_without_apply(server: ContractServer, client: httpx.Client) -> None:
    server.arm("ok_without_apply", count=2)
    etag = server.etag(CUSTOMER)
    before = server.raw_bytes(CUSTOMER)
    response = patch(client, CUSTOMER, [{"op": "replace", "path": "/status", "value": "won"}], etag)
    assert response.status_code == 200
    assert response.content == before
    assert response.headers["etag"] == etag
    assert server.raw_bytes(CUSTOMER) == before
    assert server.write_count(CUSTOMER) == 0

    text_etag = server.etag(PLAIN)
    response = put_text(client, PLAIN, b"changed", "text/plain", text_etag)
    assert response.status_code == 204
    assert server.etag(PLAIN) == text_etag
    assert server.get_text(PLAIN) != "changed"


def test_weak_etag_affects_the_next_gets_including_a_read_back(
    server: ContractServer, client: httpx.Client
) -> None:
    etag = server.etag(CUSTOMER)
    server.arm("weak_etag", path=CUSTOMER, count=2)
    assert client.get(PLAIN).headers["etag"] == server.etag(PLAIN)
    assert client.get(CUSTOMER).headers["etag"] == "W/" + etag
    response = patch(client, CUSTOMER, [{"op": "replace", "path": "/status", "value": "won"}], etag)
    assert response.status_code == 200
    new_etag = response.headers["etag"]
    assert not parse_etag(new_etag).weak
    assert client.get(CUSTOMER).headers["etag"] == "W/" + new_etag
    assert client.get(CUSTOMER).headers["etag"] == new_etag


def test_duplicate_keys(server: ContractServer, client: httpx.Client) -> None:
    server.arm("duplicate_keys")
    assert client.get(PLAIN).status_code == 200
    body = client.get(CUSTOMER).content
    with pytest.raises(JsonError) as info:
        loads_object(body)
    assert info.value.reason == "duplicate_key"
    assert loads_object(client.get(CUSTOMER).content) == server.get_record(CUSTOMER)


def test_no_etag(server: ContractServer, client: httpx.Client) -> None:
    server.arm("no_etag", path=NOTES)
    assert "etag" not in client.get(NOTES).headers
    assert "etag" in client.get(NOTES).headers


@pytest.mark.parametrize("status", [503, 409, 202])
def test_status_fault_answers_the_write_with_no_effect(
    server: ContractServer, client: httpx.Client, status: int
) -> None:
    server.arm(f"status:{status}", path=CUSTOMER)
    etag = server.etag(CUSTOMER)
    ops = [{"op": "replace", "path": "/status", "value": "won"}]
    assert patch(client, CUSTOMER, ops, etag).status_code == status
    assert server.etag(CUSTOMER) == etag
    assert server.write_count(CUSTOMER) == 0
    assert patch(client, CUSTOMER, ops, etag).status_code == 200


def test_faults_are_scoped_to_their_path(server: ContractServer, client: httpx.Client) -> None:
    server.arm("status:503", path=WRAPPED)
    ops = [{"op": "replace", "path": "/status", "value": "won"}]
    assert patch(client, CUSTOMER, ops, server.etag(CUSTOMER)).status_code == 200
    assert server.armed_faults() == [("status:503", WRAPPED, 1)]


def test_arm_refuses_unknown_faults(server: ContractServer) -> None:
    for fault in ["explode", "status:99", "status:abc", "status:"]:
        with pytest.raises(ValueError, match="unknown fault"):
            server.arm(fault)
    with pytest.raises(ValueError, match="count"):
        server.arm("hang", count=0)


def test_fault_control_routes(server: ContractServer, client: httpx.Client) -> None:
    armed = client.post("/_faults", json={"path": CUSTOMER, "fault": "status:503", "count": 1})
    assert armed.status_code == 200
    assert client.post("/_faults", json={"fault": "nonsense"}).status_code == 400
    etag = server.etag(CUSTOMER)
    ops = [{"op": "replace", "path": "/status", "value": "won"}]
    assert patch(client, CUSTOMER, ops, etag).status_code == 503
    assert patch(client, CUSTOMER, ops, etag).status_code == 200
    counts = client.get("/_counts").json()
    assert counts["writes"] == {CUSTOMER: 1}
    assert counts["attempts"] == {CUSTOMER: 2}
    assert client.post("/_reset").status_code == 200
    assert client.get(CUSTOMER).json()["status"] == "lead"
    assert client.get("/_counts").json()["writes"] == {}


def test_fault_routes_are_404_without_faults() -> None:
    with ContractServer(None) as srv, http_client(srv) as http:
        assert http.post("/_faults", json={"fault": "hang"}).status_code == 404
        assert http.post("/_reset").status_code == 404
        assert http.get("/_counts").status_code == 404
        assert srv.armed_faults() == []


# -- persistence ----------------------------------------------------------------------------


def test_seed_demo_matches_the_built_in_seed(tmp_path: Path) -> None:
    files = seed_demo(tmp_path / "data")
    assert sorted(p.name for p in files) == [
        "customer-123.json",
        "notes.md",
        "plain.txt",
        "wrapped-7.json",
    ]
    on_disk = ContractServer(tmp_path / "data")
    in_memory = ContractServer(None)
    for path in in_memory.paths():
        assert on_disk.raw_bytes(path) == in_memory.raw_bytes(path)
        assert on_disk.media_type(path) == in_memory.media_type(path)


def test_writes_persist_across_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ContractServer(data) as first, http_client(first) as http:
        seen = {first.etag(CUSTOMER)}
        ops: JsonValue = [{"op": "replace", "path": "/balance", "value": JsonNumber("9" * 40)}]
        response = patch(http, CUSTOMER, dumps(ops), first.etag(CUSTOMER))
        assert response.status_code == 200
        record_etag = response.headers["etag"]
        seen.add(record_etag)
        media_type = "text/markdown; charset=utf-8"
        response = put_text(http, NOTES, b"# Fresh\n", media_type, first.etag(NOTES))
        assert response.status_code == 204
        notes_etag = response.headers["etag"]
        record_bytes = first.raw_bytes(CUSTOMER)
    assert (data / "customer-123.json").read_bytes() == record_bytes
    assert (data / "notes.md").read_bytes() == b"# Fresh\n"

    with ContractServer(data) as second, http_client(second) as http:
        got = http.get(CUSTOMER)
        assert got.content == record_bytes
        assert b"9" * 40 in got.content
        assert got.headers["etag"] == record_etag
        notes = http.get(NOTES)
        assert notes.headers["content-type"] == media_type
        assert notes.headers["etag"] == notes_etag
        response = patch(
            http, CUSTOMER, [{"op": "replace", "path": "/status", "value": "won"}], record_etag
        )
        assert response.headers["etag"] not in seen


def test_outside_file_edit_gets_a_new_etag_on_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed_demo(data)
    before = ContractServer(data).etag(PLAIN)
    assert ContractServer(data).etag(PLAIN) == before
    (data / "plain.txt").write_bytes(b"edited\n")
    after = ContractServer(data)
    assert after.etag(PLAIN) != before
    assert after.get_text(PLAIN) == "edited\n"


def test_malformed_seed_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"a": 1, "a": 2}')
    with pytest.raises(ValueError, match=r"bad\.json"):
        ContractServer(tmp_path)


def test_stale_write_faults_break_the_contract_on_purpose(
    server: ContractServer, client: httpx.Client
) -> None:
    stale = client.get(CUSTOMER).headers["etag"]
    server.touch(CUSTOMER)
    op = [{"op": "replace", "path": "/status", "value": "won"}]
    server.arm("precondition_status:409", CUSTOMER)
    assert patch(client, CUSTOMER, op, stale).status_code == 409
    assert server.get_record(CUSTOMER)["status"] == "lead"
    assert patch(client, CUSTOMER, op, stale).status_code == 412  # consumed: normal again
    server.arm("ignore_if_match", CUSTOMER)
    assert patch(client, CUSTOMER, op, stale).status_code == 200  # the stale write lands
    assert server.get_record(CUSTOMER)["status"] == "won"


def test_clients_connecting_at_once_are_all_answered_at_once(server: ContractServer) -> None:
    """A burst of connections (16 agents, a gateway's pool) must not overflow the listen
    backlog: an overflowed SYN is retried a second later, and every timing around the
    contract server (the benchmark's floor above all) would carry that second."""
    barrier = threading.Barrier(48)
    took: list[float] = []

    def connect() -> None:
        barrier.wait()
        started = time.monotonic()
        with socket.create_connection((server.host, server.port), timeout=5):
            took.append(time.monotonic() - started)

    threads = [threading.Thread(target=connect) for _ in range(48)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(took) == 48
    assert max(took) < 0.5, sorted(took)[-5:]
