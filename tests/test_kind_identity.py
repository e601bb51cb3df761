"""A ledger written before kinds became packages keeps working: every resource keeps its
fingerprint (a changed one would invalidate its jobs) and every prepare its idempotency
digest (a changed one would refuse a replay of an earlier job as a reused key).

The expected values were computed by the code as it was before the change, from these
exact configs and bodies; they are constants on purpose.
"""

from __future__ import annotations

from typing import Any

import pytest

from undogate.api.bodies import parse_prepare
from undogate.config import parse_config
from undogate.jsonvalue import loads_object
from undogate.operations.prepare import _request_digest

BASE = {"agent_id": "a", "name": "n", "conditional_writes": True}
RESOURCES: list[dict[str, Any]] = [
    {
        "id": "rec",
        "kind": "json_record",
        "url": "https://h.example/r/1",
        "fields": ["status", "owner"],
    },
    {
        "id": "rec2",
        "kind": "json_record",
        "url": "http://127.0.0.1:8080/r/2",
        "fields": ["b", "a"],
        "record_pointer": "/data",
        "token_env": "TOK",
        "token_scheme": "basic",
        "allow_loopback_http": True,
    },
    {"id": "doc", "kind": "webdav_text", "url": "https://dav.example/notes.md"},
    {
        "id": "doc2",
        "kind": "webdav_text",
        "url": "https://dav.example:8443/new.txt",
        "create": True,
        "token_env": "DAV",
        "allow_private_host": True,
    },
    {
        "id": "col",
        "kind": "json_collection",
        "url": "https://crm.example/v1/contacts",
        "fields": ["email", "name"],
    },
    {
        "id": "col2",
        "kind": "json_collection",
        "url": "https://crm.example/v1/c2",
        "fields": ["email", "name"],
        "create": "post",
        "identity": [{"field": "email", "evidence": "email"}],
        "lookup": {"list": True},
        "server_fields": ["last_modified"],
        "id_field": "uid",
        "record_pointer": "/data",
    },
    {
        "id": "col3",
        "kind": "json_collection",
        "url": "https://crm.example/v1/c3",
        "fields": ["email"],
        "create": "put",
        "identity": [{"field": "email", "evidence": "email"}],
        "lookup": {"query": "?email={value}"},
    },
    {
        "id": "copy",
        "kind": "json_record",
        "url": "https://h.example/r/9",
        "fields": ["status", "owner"],
        "test_copy_of": "rec",
        "require_passkey": True,
    },
]
FINGERPRINTS = {
    "rec": "sha256:d20923fce4cb4101d544a9ac43eedb3ff78cfc9c38df45552ba5d5154db89ae8",
    "rec2": "sha256:3db42dbec5fcfc4b5217d8dda99fe9216dfd8579df09094be9357bf6ecae64e9",
    "doc": "sha256:6369322c9c1e0b3d39753277451e55702dbf04a0b21491fa4f8ea9103fa61bd5",
    "doc2": "sha256:b977fb9fb431cbe1488b2e1306fe590a9c97160a17e85751deb59afa93307856",
    "col": "sha256:aee137aaba7907cb91c43ac9be7cd738d3317a6cdeeff951648a73ae6bdf4860",
    "col2": "sha256:ae3d9fa5e89acb447b4a20303d16320f3033de69912dc377127b39d807f488fe",
    "col3": "sha256:a01e010a82f97d8a116bf4c9ad87778983bdc01b07d3f9501a9939ef464cbea3",
    "copy": "sha256:a199e9fdb87728bd68f9e36295ee82b79c413d8635b2e26f6156f8c5dc28d5fb",
}


def test_every_resource_keeps_the_fingerprint_it_had() -> None:
    config = parse_config(
        {"agents": [{"id": "a"}], "resources": [{**BASE, **r} for r in RESOURCES]}
    )
    assert {r.id: r.fingerprint for r in config.resources} == FINGERPRINTS


def test_a_dumped_resource_is_flat_and_loads_back_the_same() -> None:
    config = parse_config(
        {"agents": [{"id": "a"}], "resources": [{**BASE, **r} for r in RESOURCES]}
    )
    dumped = [r.model_dump(mode="json", exclude_none=True) for r in config.resources]
    assert all("settings" not in d for d in dumped)
    again = parse_config({"agents": [{"id": "a"}], "resources": dumped})
    assert {r.id: r.fingerprint for r in again.resources} == FINGERPRINTS


# (the changes of a prepare as an agent sends them, other members, the digest the first
# release stored for that body)
DIGESTS = [
    (
        '{"resource": "rec", "set": {"status": "x"}}',
        "",
        "eb1d7705728f3d8b7c8ca91a8621e58d2f4f92cafbab8aa33fc2cb2a93246f8a",
    ),
    (
        '{"resource": "rec", "remove": ["status", "owner"]}',
        ', "idempotency_key": "k", "attribution_label": "L"',
        "b6bba1226f7fbf64bf5e7fe76dee18614b8ece34647b7ee65191d2a83db932ca",
    ),
    (
        '{"resource": "doc", "text": "hello\\n", "expected_version": "\\"1\\"", '
        '"assertion_kind": "observed"}',
        "",
        "f27ee681c0f7dd68655674e87a73da2c66b7a23c67cb5b439314e633ee767d28",
    ),
    (
        '{"resource": "col", "create": {"email": "a@b"}, "id": "r1"}',
        "",
        "026fb8c85352f6e74ca3706f77ca9b31cee4ebbbbad794be569796f8d5ca6d66",
    ),
    (
        '{"resource": "col", "id": "r1", "delete": true}',
        "",
        "2da9c03fcaa7e307da61e20c7a0e7b1f3b76ce796c1dd0473a90804388810505",
    ),
    (
        '{"resource": "col", "id": "r1", "delete": true, "set": null, "upsert": null}',
        "",
        "2da9c03fcaa7e307da61e20c7a0e7b1f3b76ce796c1dd0473a90804388810505",
    ),
    (
        '{"resource": "col", "upsert": {"email": "a@b"}, "delete": false}',
        "",
        "328ff916115df914ac6a733c3adcc0041b3714a35a4b4469efddad3eeff2e7ac",
    ),
    (
        '{"resource": "col", "id": "r1", "set": {"name": "N"}, "remove": ["email"]}',
        "",
        "1427bf787eb002150e1d695dbf16dbcc78940efb45e0aa27e685109b99aab4bb",
    ),
    (
        '{"resource": "rec", "set": {}}, {"resource": "doc", "text": ""}',
        "",
        "b2de7e82de0c22abc10e523fe083aa0e178175d0b94c66763c615bf316810ab2",
    ),
]


@pytest.mark.parametrize(("changes", "extra", "digest"), DIGESTS)
def test_a_prepare_keeps_the_idempotency_digest_it_had(
    changes: str, extra: str, digest: str
) -> None:
    body = loads_object(f'{{"summary": "s", "changes": [{changes}]{extra}}}'.encode())
    assert _request_digest("agent-1", parse_prepare(body)) == digest
