"""The JSON kinds' dialects against the reference endpoint (the contract server, which
takes a JSON Merge Patch and a whole-record PUT besides a JSON Patch): the exact requests
each mode sends, apply and undo, what a merge patch cannot say (``not_expressible``), the
dialect settings refused at config load, and the seam that lets a stale status other
than 412 count as a refusal only once an endpoint check saw it.

The real servers that speak these dialects are in tests/test_kinto_dialects.py and
tests/test_pouchdb.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from undogate.adapters.records.dialects import merge_patch_of
from undogate.adapters.records.jsontext import set_members
from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.contract_server.resources import merge_patch
from undogate.errors import ConfigError, NotExpressible, UndogateError
from undogate.jobs import ActionStatus, JobState, Operation
from undogate.jsonvalue import JsonNumber, JsonObject, JsonValue, loads, loads_object
from undogate.operations.endpoint_check import check_endpoint, stale_statuses_seen

from .collections_world import change
from .worlds import OWNER, LocalGateway, confirmed, make_config, prepare, resource

PATH = "/records/customer-123"
COPY = "/records/customer-copy"


# A record as a server may hold it: indented, a 30-digit integer, a 34-digit decimal, a
# null, an escape another serializer would not write, keys in no order.
TEXT = """{
  "id": "123",
  "name": "Ada Lovelace",
  "status": "lead",
  "owner": "sam",
  "tier": null,
  "balance": 123456789012345678901234567890,
  "ratio": 0.1000000000000000055511151231257827,
  "motto": "caf\\u00e9 \\/ t\\u00e9",
  "notes": {"source": "web"}
}
"""


@pytest.fixture
def seeded(server: ContractServer) -> ContractServer:
    """The reference endpoint holding the customer record as ``TEXT``, byte for byte."""
    server.set_record(PATH, TEXT)
    return server


def open_customer(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[..., LocalGateway],
    **settings: Any,
) -> LocalGateway:
    server.set_record(COPY, server.raw_bytes(PATH))
    config = make_config(
        server,
        data_dir,
        resource(server, "customer", PATH, **settings),
        resource(server, "customer-copy", COPY, test_copy_of="customer", **settings),
    )
    return open_gateway(config)


# -- merge_patch ---------------------------------------------------------------------


def test_merge_patch_sends_the_rfc_7396_patch_and_its_undo_patches_back(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    gw = open_customer(server, data_dir, open_gateway, write="merge_patch")
    start = server.get_record(PATH)
    tag = server.etag(PATH)
    job_id = prepare(
        gw,
        change(
            resource="customer",
            set={"status": "customer", "notes": {"source": "fair"}},
            remove=["owner"],
        ),
    )
    [request] = confirmed(gw, job_id, Operation.APPLY, dry_run=True).requests
    assert request == {
        "method": "PATCH",
        "url": server.url(PATH),
        "headers": {"Content-Type": "application/merge-patch+json", "If-Match": tag},
        "body": '{"status":"customer","notes":{"source":"fair"},"owner":null}',
        "authentication": None,  # the resource has no credential
    }
    assert confirmed(gw, job_id).job.state is JobState.APPLIED
    applied = server.get_record(PATH)
    assert applied == {
        **{k: v for k, v in start.items() if k != "owner"},
        "status": "customer",
        "notes": {"source": "fair"},
    }
    [undo] = confirmed(gw, job_id, Operation.UNDO, dry_run=True).requests
    assert undo["headers"]["If-Match"] == server.etag(PATH)
    assert undo["body"] == '{"status":"lead","notes":{"source":"web"},"owner":"sam"}'
    assert confirmed(gw, job_id, Operation.UNDO).job.state is JobState.UNDONE
    assert server.get_record(PATH) == start


@pytest.mark.parametrize(
    ("members", "field", "undo"),
    [
        ({"set": {"status": None}}, "status", False),  # a null to store
        ({"set": {"notes": {"source": None}}}, "notes.source", False),  # inside an object
        ({"set": {"status": {"code": None}}}, "status", False),  # a new object holding one
        ({"set": {"tier": "gold"}}, "tier", True),  # its undo would store tier's null
    ],
)
def test_what_a_merge_patch_cannot_say_is_refused_at_prepare(
    server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[..., LocalGateway],
    members: dict[str, Any],
    field: str,
    undo: bool,
) -> None:
    gw = open_customer(server, data_dir, open_gateway, write="merge_patch")
    with pytest.raises(NotExpressible) as refused:
        prepare(gw, change(resource="customer", **members))
    assert refused.value.code == "not_expressible"
    assert refused.value.details == {"resource": "customer", "field": field, "undo": undo}
    assert gw.ledger.list_jobs(OWNER.owner_id, "account-assistant") == []
    assert server.write_count(PATH) == 0


def test_a_null_inside_an_array_is_said_and_other_modes_store_nulls(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    """Arrays are replaced whole by a merge patch, nulls and all; JSON Patch and PUT say
    a null as it is."""
    gw = open_customer(server, data_dir, open_gateway, write="merge_patch")
    job_id = prepare(gw, change(resource="customer", set={"notes": [None, {"a": None}]}))
    assert confirmed(gw, job_id).job.state is JobState.APPLIED
    assert server.get_record(PATH)["notes"] == [None, {"a": None}]
    for mode in ("json_patch", "put"):
        other = open_customer(server, data_dir / mode, open_gateway, write=mode)
        stored = prepare(other, change(resource="customer", set={"status": None}))
        assert confirmed(other, stored).job.state is JobState.APPLIED
        assert server.get_record(PATH)["status"] is None
        assert confirmed(other, stored, Operation.UNDO).job.state is JobState.UNDONE


@pytest.mark.parametrize(
    ("source", "goal"),
    [
        ({"a": 1}, {"a": 2}),
        ({"a": {"x": 1, "y": [1, None]}}, {"a": {"x": 1, "z": {"q": "r"}}}),
        ({"a": {"x": {"deep": 1}}}, {"a": {"x": {"deep": 1, "more": 2}}}),
        ({"a": [1, 2]}, {"a": {"now": "an object"}}),
        ({"a": {"was": "an object"}}, {"a": "text"}),
        ({"a": 1}, {}),
        ({}, {"a": {"b": [None]}}),
    ],
)
def test_the_merge_patch_turns_the_read_fields_into_the_planned_ones(
    source: dict[str, Any], goal: dict[str, Any]
) -> None:
    """Applied by the RFC's own algorithm (the contract server's), the patch gives the
    planned fields exactly, whatever else the record holds."""
    before: JsonObject = loads_object(_json(source))
    after: JsonObject = loads_object(_json(goal))
    patch = merge_patch_of(["a"], before, after)
    record: JsonValue = {**before, "other": "kept"}
    assert merge_patch(record, patch) == {**after, "other": "kept"}


def _json(value: Any) -> str:
    return json.dumps(value)


# -- put -------------------------------------------------------------------------------


def test_put_sends_the_record_as_read_with_only_the_touched_fields_changed(
    seeded: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    server = seeded
    """The seed is indented text with a 30-digit integer, a 34-digit decimal and a null:
    every byte the change does not touch goes back as read, and the undo restores the
    document byte for byte (the reference endpoint keeps a PUT's bytes as sent)."""
    gw = open_customer(server, data_dir, open_gateway, write="put")
    start = server.raw_bytes(PATH)
    assert start == TEXT.encode()
    tag = server.etag(PATH)
    job_id = prepare(gw, change(resource="customer", set={"status": "customer"}))
    [request] = confirmed(gw, job_id, Operation.APPLY, dry_run=True).requests
    expected = start.replace(b'"status": "lead"', b'"status": "customer"')
    assert request == {
        "method": "PUT",
        "url": server.url(PATH),
        "headers": {"Content-Type": "application/json", "If-Match": tag},
        "body": expected.decode(),
        "authentication": None,  # the resource has no credential
    }
    assert confirmed(gw, job_id).job.state is JobState.APPLIED
    assert server.raw_bytes(PATH) == expected
    assert confirmed(gw, job_id, Operation.UNDO).job.state is JobState.UNDONE
    assert server.raw_bytes(PATH) == start


def test_put_removes_and_adds_members_without_touching_the_others(
    seeded: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    server = seeded
    gw = open_customer(server, data_dir, open_gateway, write="put")
    start = server.raw_bytes(PATH)
    job_id = prepare(gw, change(resource="customer", set={"status": "customer"}, remove=["owner"]))
    assert confirmed(gw, job_id).job.state is JobState.APPLIED
    applied = start.replace(b'"status": "lead"', b'"status": "customer"').replace(
        b'"owner": "sam",\n  ', b""
    )
    assert server.raw_bytes(PATH) == applied
    assert confirmed(gw, job_id, Operation.UNDO).job.state is JobState.UNDONE
    # The removed member comes back after the last one; nothing else moves.
    undone = applied.replace(b'"status": "customer"', b'"status": "lead"').replace(
        b'"notes": {"source": "web"}', b'"notes": {"source": "web"},"owner":"sam"'
    )
    assert server.raw_bytes(PATH) == undone
    assert loads(undone) == loads(start)


def test_put_under_a_record_pointer_keeps_the_envelope(
    seeded: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    server = seeded
    path = "/records/wrapped-7"
    server.set_record(
        path,
        '{\n "data": {"status": "open", "owner": "kim", "priority": 2},\n "meta": {"rev": 1}\n}\n',
    )
    config = make_config(
        server,
        data_dir,
        resource(
            server,
            "customer",
            path,
            record_pointer="/data",
            fields=["status", "priority"],
            write="put",
        ),
    )
    gw = open_gateway(config)
    start = server.raw_bytes(path)
    job_id = prepare(
        gw, change(resource="customer", set={"status": "closed", "priority": JsonNumber("5")})
    )
    assert confirmed(gw, job_id).job.state is JobState.APPLIED
    assert server.raw_bytes(path) == start.replace(b'"open"', b'"closed"').replace(
        b'"priority": 2', b'"priority": 5'
    )
    assert confirmed(gw, job_id, Operation.UNDO).job.state is JobState.UNDONE
    assert server.raw_bytes(path) == start


@pytest.mark.parametrize(
    ("text", "path", "updates", "expected"),
    [
        ('{"a":1}', [], {"a": None}, "{}"),
        ("{ }", [], {"a": "1"}, '{"a":1 }'),
        ('{"a":1, "b":2}', [], {"b": None}, '{"a":1}'),
        ('{"a":1, "b":2}', [], {"a": None}, '{"b":2}'),
        (
            '{"x\\u00e9":1,"d":{"k":[1,{"k":2}]}}',
            ["d"],
            {"k": '"v"'},
            '{"x\\u00e9":1,"d":{"k":"v"}}',
        ),
        ('{"xé":1}', [], {"xé": "2"}, '{"xé":2}'),
    ],
)
def test_set_members_changes_only_the_named_members(
    text: str, path: list[str], updates: dict[str, str | None], expected: str
) -> None:
    assert set_members(text, path, updates) == expected


# -- the dialect settings at config load ----------------------------------------------


def test_dialect_settings_that_cannot_work_are_refused_at_config_load(
    server: ContractServer, data_dir: Path
) -> None:
    record = resource(server, "customer", PATH)
    collection = {
        "id": "contacts",
        "agent_id": "account-assistant",
        "name": "Contacts",
        "kind": "json_collection",
        "url": server.url("/collections/contacts"),
        "fields": ["email", "status"],
    }
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({**record, "write": "patch"}, "resources[0].write", "Input should be"),
        ({**record, "stale_status": [500]}, "resources[0].stale_status[0]", "4xx"),
        ({**record, "stale_status": [409, 409]}, "resources[0].stale_status", "duplicate"),
        (
            {**record, "version": {"pointer": "_rev"}},
            "resources[0].version.pointer",
            "JSON Pointer",
        ),
        (
            {**record, "version": {"pointer": "/status"}},
            "resources[0].version.pointer",
            "allow-listed",
        ),
        (
            {**record, "record_pointer": "/data", "version": {"pointer": "/data"}},
            "resources[0].version.pointer",
            "above it",
        ),
        (
            {**record, "version": {"pointer": "/_rev", "delete_query": "rev"}},
            "resources[0].version.delete_query",
            "never sends a DELETE",
        ),
        (
            {**collection, "version": {"pointer": "/_rev"}},
            "resources[0].version.delete_query",
            "only its query can carry the version",
        ),
        (
            {**collection, "version": {"pointer": "/_rev", "delete_query": "rev&x=1"}},
            "resources[0].version.delete_query",
            "String should match",
        ),
        (
            {**collection, "listing": {"path": "../other", "records": "/rows/*/doc"}},
            "resources[0].listing.path",
            "never '.' or '..'",
        ),
        (
            {**collection, "listing": {"path": "_all_docs#x", "records": ""}},
            "resources[0].listing.path",
            "optional query",
        ),
        (
            {**collection, "listing": {"path": "_all_docs", "records": "rows"}},
            "resources[0].listing.records",
            "JSON Pointer",
        ),
    ]
    for entry, where, words in cases:
        with pytest.raises(ConfigError) as refused:
            parse_config(
                {
                    "server": {"data_dir": str(data_dir)},
                    "resources": [entry],
                    "agents": [{"id": "account-assistant", "tools": ["list_resources"]}],
                }
            )
        problems = dict(refused.value.problems)
        assert where in problems and words in problems[where], (entry, problems)


def test_a_test_copy_must_speak_its_productions_dialect(
    server: ContractServer, data_dir: Path
) -> None:
    with pytest.raises(ConfigError) as refused:
        make_config(
            server,
            data_dir,
            resource(server, "customer", PATH, write="merge_patch"),
            resource(server, "customer-copy", COPY, test_copy_of="customer", write="put"),
        )
    assert dict(refused.value.problems)["resources[1].test_copy_of"] == (
        "the write must be the same as 'customer''s"
    )


def test_the_dialect_is_part_of_the_identity_and_the_default_changes_nothing(
    server: ContractServer, data_dir: Path
) -> None:
    def fingerprint(**settings: Any) -> str:
        config: Config = make_config(server, data_dir, resource(server, "c", PATH, **settings))
        found = config.resource("c")
        assert found is not None
        return found.fingerprint

    plain = fingerprint()
    assert fingerprint(write="json_patch", stale_status=[412]) == plain
    others = {
        fingerprint(write="merge_patch"),
        fingerprint(write="put"),
        fingerprint(stale_status=[409]),
        fingerprint(version={"pointer": "/_rev"}),
    }
    assert plain not in others and len(others) == 4


# -- a stale status other than 412 ---------------------------------------------------


def _stale_confirm(gw: LocalGateway, server: ContractServer, value: str) -> tuple[str, bytes]:
    """Confirm a change while another client's write lands just before ours (held at
    the endpoint), which answers the stale version with 409. Returns the job and the
    record as the other client left it."""
    job_id = prepare(gw, change(resource="customer", set={"status": value}))
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token is not None
    gate = server.hold_next_write(PATH)
    failures: list[UndogateError] = []

    def confirm() -> None:
        try:
            gw.confirm(OWNER, job_id, preview.token or "")
        except UndogateError as exc:
            failures.append(exc)

    confirming = threading.Thread(target=confirm)
    confirming.start()
    assert gate.arrived.wait(30)
    server.set_field(PATH, "/owner", f"another client {value}")
    server.arm("precondition_status:409", PATH)
    edited = server.raw_bytes(PATH)
    gate.release()
    confirming.join(30)
    assert not failures
    return job_id, edited


def test_a_stale_status_other_than_412_is_a_refusal_only_once_a_check_saw_it(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    gw = open_customer(server, data_dir, open_gateway, stale_status=[409])
    production = gw.config.resource("customer")
    assert production is not None

    job_id, edited = _stale_confirm(gw, server, "first")
    job = gw.ledger.load_job(job_id)
    assert job is not None and job.state is JobState.NEEDS_REVIEW  # the operator's word only
    assert [(a.status, a.response_status) for a in job.actions] == [(ActionStatus.UNCERTAIN, 409)]
    assert server.raw_bytes(PATH) == edited  # nothing of ours landed
    assert gw.ledger.read(lambda tx: stale_statuses_seen(tx, production)) == frozenset()
    assert (
        confirmed(gw, job_id, Operation.ACCEPT_OBSERVED).job.state is JobState.PREPARED
    )  # a reviewer's look

    server.arm("precondition_status:409", COPY)  # the copy answers its stale probe so
    result = check_endpoint(gw, "customer-copy")
    assert result.passed, [(s.name, s.summary) for s in result.steps]
    stale = {s.name: s for s in result.steps}["stale_write_refused"]
    assert stale.evidence == {"status": 409, "unchanged": True}
    assert result.stale_statuses == (409,)
    assert gw.ledger.read(lambda tx: stale_statuses_seen(tx, production)) == {409}

    again, edited = _stale_confirm(gw, server, "second")
    job = gw.ledger.load_job(again)
    assert job is not None and job.state is JobState.PREPARED  # refused, nothing written
    assert [(a.status, a.response_status) for a in job.actions] == [(ActionStatus.REFUSED, 409)]
    assert server.raw_bytes(PATH) == edited

    server.arm("status:500", COPY)  # a later check that fails takes the evidence away
    assert not check_endpoint(gw, "customer-copy").passed
    assert gw.ledger.read(lambda tx: stale_statuses_seen(tx, production)) == frozenset()
    third, _ = _stale_confirm(gw, server, "third")
    job = gw.ledger.load_job(third)
    assert job is not None and job.actions[-1].status is ActionStatus.UNCERTAIN


def test_a_check_that_saw_412_proves_nothing_about_409(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    """The evidence is the status seen: a check whose stale probe got 412 leaves a 409
    from a live write uncertain."""
    gw = open_customer(server, data_dir, open_gateway, stale_status=[412, 409])
    result = check_endpoint(gw, "customer-copy")
    assert result.passed and result.stale_statuses == (412,)
    job_id, _ = _stale_confirm(gw, server, "first")
    job = gw.ledger.load_job(job_id)
    assert job is not None and job.state is JobState.NEEDS_REVIEW
    assert job.actions[-1].status is ActionStatus.UNCERTAIN


@pytest.mark.parametrize("write", ["merge_patch", "put"])
def test_a_copy_that_takes_a_stale_write_fails_its_check_in_every_dialect_and_is_put_back(
    seeded: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway], write: str
) -> None:
    """A server that answers 200 to a stale ``If-Match`` (and applies it) is the one a
    merge patch or a whole-record PUT would clobber others through: the check says so,
    and puts the copy back (a PATCH's server writes its own JSON text: by value)."""
    server = seeded
    gw = open_customer(server, data_dir, open_gateway, write=write)
    assert check_endpoint(gw, "customer-copy").passed
    start = server.raw_bytes(COPY)
    server.arm("ignore_if_match", COPY)
    result = check_endpoint(gw, "customer-copy")
    assert not result.passed
    stale = {s.name: s for s in result.steps}["stale_write_refused"]
    assert not stale.passed and stale.evidence == {"status": 200, "unchanged": False}
    assert loads(server.raw_bytes(COPY)) == loads(start)
    assert server.raw_bytes(PATH) == TEXT.encode()  # production never touched
