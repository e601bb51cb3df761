"""json_record and json_collection against a real Kinto 26.5 (tests/kintoserver.py) in the
two dialects it speaks besides JSON Patch, each with ``If-Match`` (a strong ETag, stale
refused with 412):

- ``write: merge_patch``: ``PATCH`` with ``Content-Type: application/merge-patch+json``
  and the patch inside Kinto's envelope (``{"data": {"status": "customer", "owner":
  null}}``); Kinto merges it (a ``null`` removes).
- ``write: put``: ``PUT`` of the record as read, envelope and ``permissions`` included,
  only the touched fields changed; Kinto stamps a new ``last_modified``.

Kinto writes every record in one compact form, so the bytes of the members a write did
not touch are the same before, after and after the undo. Requests go through the kit's
proxy, which records what reached Kinto and lets another client's write land first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.config import parse_config
from undogate.jobs import ActionStatus, JobState, Operation
from undogate.operations.endpoint_check import check_endpoint
from undogate.testing.proxy import FaultProxy

from .collections_world import change
from .json_text import member_texts, untouched
from .kintoserver import PASSWORD, USER, KintoServer, kinto_server
from .worlds import OWNER, LocalGateway, confirmed, prepare

BUCKET = "/buckets/undogate"
ENV = {"KINTO_AUTH": f"{USER}:{PASSWORD}"}
START = {"status": "lead", "owner": "sam", "note": "caf\u00e9, outside the allowlist", "n": 12.5}
MODES = ("merge_patch", "put")


@pytest.fixture(scope="module")
def kinto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KintoServer]:
    with kinto_server(tmp_path_factory.mktemp("kinto")) as srv:
        srv.request("PUT", BUCKET, json={})
        yield srv


@pytest.fixture
def proxy(kinto: KintoServer) -> Iterator[FaultProxy]:
    started = FaultProxy(kinto.base_url).start()
    try:
        yield started
    finally:
        started.stop()


def records(name: str) -> str:
    return f"{BUCKET}/collections/{name}/records"


def common(rid: str, url: str, write: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "agent_id": "account-assistant",
        "name": rid,
        "url": url,
        "token_env": "KINTO_AUTH",
        "token_scheme": "basic",
        "record_pointer": "/data",
        "write": write,
        "conditional_writes": True,
        "allow_loopback_http": True,
        **extra,
    }


def open_world(
    open_gateway: Callable[..., LocalGateway], data_dir: Path, *resources: dict[str, Any]
) -> LocalGateway:
    config = parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": list(resources),
            "agents": [{"id": "account-assistant", "tools": ["list_resources"]}],
        }
    )
    return open_gateway(config, environ=ENV)


def raw(kinto: KintoServer, path: str) -> bytes:
    return kinto.request("GET", path).content


def expected_write(write: str, start: bytes) -> tuple[str, bytes]:
    """What each mode sends to set status and remove owner from START: its method and
    exact body (PUT: the record as read, those two members changed)."""
    if write == "merge_patch":
        return "PATCH", b'{"data":{"status":"customer","owner":null}}'
    return "PUT", start.replace(b'"status":"lead","owner":"sam",', b'"status":"customer",')


def outside_edit(kinto: KintoServer, path: str, edited: list[bytes]) -> Callable[[], None]:
    def edit() -> None:  # another client, between the gateway's last read and its write
        kinto.request("PATCH", path, json={"data": {"note": f"edited {len(edited)}"}})
        edited.append(raw(kinto, path))

    return edit


# -- one record ------------------------------------------------------------------------


@pytest.fixture(params=MODES)
def customer(
    request: pytest.FixtureRequest,
    kinto: KintoServer,
    proxy: FaultProxy,
    data_dir: Path,
    open_gateway: Callable[..., LocalGateway],
) -> tuple[LocalGateway, str, str]:
    """A record and its test copy (START), the gateway writing them in one mode."""
    write: str = request.param
    name = f"customers-{write.replace('_', '-')}-{request.node.name[5:30].replace('_', '-')}"
    kinto.request("PUT", f"{BUCKET}/collections/{name}", json={})
    path = f"{records(name)}/c1"
    for where in (path, f"{records(name)}/c1-copy"):
        kinto.request("PUT", where, json={"data": START})

    def entry(rid: str, at: str, **extra: Any) -> dict[str, Any]:
        url = proxy.url(kinto.url(at))
        return common(rid, url, write, kind="json_record", fields=["status", "owner"], **extra)

    gw = open_world(
        open_gateway,
        data_dir,
        entry("customer", path),
        entry("customer-copy", f"{path}-copy", test_copy_of="customer"),
    )
    return gw, path, write


def test_the_check_verifies_kinto_in_each_mode(
    kinto: KintoServer, customer: tuple[LocalGateway, str, str]
) -> None:
    gw, path, write = customer
    start = raw(kinto, path)
    result = check_endpoint(gw, "customer-copy")
    assert result.passed, [(s.name, s.summary) for s in result.steps]
    steps = {s.name: s.evidence for s in result.steps}
    assert steps["stale_write_refused"] == {"status": 412, "unchanged": True}
    assert steps["weak_if_match_refused"] == {"status": 400, "unchanged": True}  # its syntax
    # Nothing there: a merge patch finds no record (404), a PUT's If-Match fails (412).
    missing = 404 if write == "merge_patch" else 412
    assert steps["missing_not_created"] == {"status": missing, "absent_after": True}
    assert result.mode == f"{write}, version in If-Match, stale 412"
    assert result.stale_statuses == (412,)
    assert raw(kinto, path) == start
    copy = kinto.request("GET", f"{path}-copy").json()["data"]
    assert {k: copy[k] for k in START} == START


def test_a_record_applies_and_undoes_keeping_every_other_members_bytes(
    kinto: KintoServer, proxy: FaultProxy, customer: tuple[LocalGateway, str, str]
) -> None:
    gw, path, write = customer
    start = raw(kinto, path)
    tag = kinto.request("GET", path).headers["etag"]
    job_id = prepare(gw, change(resource="customer", set={"status": "customer"}, remove=["owner"]))
    assert confirmed(gw, job_id).job.state is JobState.APPLIED
    method, body = expected_write(write, start)
    [sent] = proxy.writes()
    assert (sent.method, sent.body, sent.headers["If-Match"]) == (method, body, tag)
    applied = raw(kinto, path)
    assert untouched(start, applied, {"status", "owner", "last_modified"}, ["data"])
    assert member_texts(applied)["permissions"] == member_texts(start)["permissions"]
    assert member_texts(applied, ["data"])["status"] == '"customer"'
    assert "owner" not in member_texts(applied, ["data"])

    assert confirmed(gw, job_id, Operation.UNDO).job.state is JobState.UNDONE
    undone = raw(kinto, path)
    assert untouched(start, undone, {"last_modified"}, ["data"])  # status and owner too
    assert member_texts(undone)["permissions"] == member_texts(start)["permissions"]


def test_a_stale_write_is_refused_and_nothing_is_written(
    kinto: KintoServer, proxy: FaultProxy, customer: tuple[LocalGateway, str, str]
) -> None:
    gw, path, _ = customer
    job_id = prepare(gw, change(resource="customer", set={"status": "customer"}))
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token is not None
    edited: list[bytes] = []
    proxy.arm("outside_edit", outside_edit(kinto, path, edited))
    done = gw.confirm(OWNER, job_id, preview.token).job
    assert len(proxy.writes()) == 1  # sent once, refused
    assert done.state is JobState.PREPARED
    assert [(a.status, a.response_status) for a in done.actions] == [(ActionStatus.REFUSED, 412)]
    assert raw(kinto, path) == edited[0]


# -- a collection ----------------------------------------------------------------------


@pytest.fixture(params=MODES)
def contacts(
    request: pytest.FixtureRequest,
    kinto: KintoServer,
    proxy: FaultProxy,
    data_dir: Path,
    open_gateway: Callable[..., LocalGateway],
) -> tuple[LocalGateway, str, str]:
    """A collection and its test copy, each with one record, written in one mode."""
    write: str = request.param
    name = f"contacts-{write.replace('_', '-')}-{request.node.name[5:30].replace('_', '-')}"
    for suffix in ("", "-copy"):
        kinto.request("PUT", f"{BUCKET}/collections/{name}{suffix}", json={})
        kinto.request("PUT", f"{records(name + suffix)}/seeded", json={"data": START})

    def entry(rid: str, at: str, **extra: Any) -> dict[str, Any]:
        return common(
            rid,
            proxy.url(kinto.url(at)),
            write,
            kind="json_collection",
            fields=["status", "owner", "email"],
            server_fields=["last_modified"],
            create="put",
            **extra,
        )

    gw = open_world(
        open_gateway,
        data_dir,
        entry("contacts", records(name)),
        entry("contacts-copy", records(name + "-copy"), test_copy_of="contacts"),
    )
    return gw, records(name), write


def test_the_check_verifies_a_kinto_collection_in_each_mode(
    kinto: KintoServer, contacts: tuple[LocalGateway, str, str]
) -> None:
    gw, collection, write = contacts
    listings = (collection, collection.replace("/records", "-copy/records"))
    before = [kinto.request("GET", listing).json() for listing in listings]
    result = check_endpoint(gw, "contacts-copy")
    assert result.passed, [(s.name, s.summary) for s in result.steps]
    steps = {s.name: s.evidence for s in result.steps}
    assert steps["stale_update_refused"] == {"status": 412, "unchanged": True}
    assert steps["stale_delete_refused"] == {"status": 412, "unchanged": True}
    assert result.undos == ("undo_of_create", "recreate")
    assert result.mode == f"{write}, version in If-Match, stale 412"
    assert [kinto.request("GET", listing).json() for listing in listings] == before


def test_a_collection_record_applies_and_undoes_keeping_every_other_members_bytes(
    kinto: KintoServer, proxy: FaultProxy, contacts: tuple[LocalGateway, str, str]
) -> None:
    gw, collection, write = contacts
    path = f"{collection}/seeded"
    start = raw(kinto, path)
    job_id = prepare(
        gw, change(resource="contacts", id="seeded", set={"status": "customer"}, remove=["owner"])
    )
    assert confirmed(gw, job_id).job.state is JobState.APPLIED
    method, body = expected_write(write, start)
    [sent] = proxy.writes()
    assert (sent.method, sent.body) == (method, body)
    assert untouched(start, raw(kinto, path), {"status", "owner", "last_modified"}, ["data"])
    assert confirmed(gw, job_id, Operation.UNDO).job.state is JobState.UNDONE
    assert untouched(start, raw(kinto, path), {"last_modified"}, ["data"])


def test_a_stale_update_of_a_collection_record_is_refused(
    kinto: KintoServer, proxy: FaultProxy, contacts: tuple[LocalGateway, str, str]
) -> None:
    gw, collection, _ = contacts
    path = f"{collection}/seeded"
    job_id = prepare(gw, change(resource="contacts", id="seeded", set={"status": "customer"}))
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token is not None
    edited: list[bytes] = []
    proxy.arm("outside_edit", outside_edit(kinto, path, edited))
    done = gw.confirm(OWNER, job_id, preview.token).job
    assert done.state is JobState.PREPARED
    assert [(a.status, a.response_status) for a in done.actions] == [(ActionStatus.REFUSED, 412)]
    assert raw(kinto, path) == edited[0]
