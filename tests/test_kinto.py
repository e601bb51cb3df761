"""json_record against a real Kinto 26.5 (PyPI ``kinto``, in its own virtual environment
``.venv-kinto``), memory backends, basic auth, a record in a bucket's collection.

What Kinto does (observed here, each point a test below):

- GET ``/v1/buckets/B/collections/C/records/R`` answers ``{"data": {...},
  "permissions": {...}}`` with a strong ETag ``"<last_modified>"``: configure
  ``record_pointer: /data``. Kinto keeps ``id`` and ``last_modified`` inside ``data``;
  ``last_modified`` changes on every write.
- ``If-Match`` must be a quoted integer: an invented tag such as ``"undogate-stale-…"``
  or a weak ``W/"…"`` is refused with 400 for its syntax. A stale tag that Kinto issued
  is refused with 412. A JSON Patch to a record that does not exist is 404.
- So Kinto honours the remote contract, and the endpoint check verifies it: its stale
  tag is one Kinto issued for the test copy earlier in the check.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.config import parse_config
from undogate.ledger import Ledger
from undogate.net import PinnedClient
from undogate.operations.context import Context
from undogate.operations.endpoint_check import check_endpoint, latest_verification

from .kintoserver import PASSWORD, USER, KintoServer, kinto_server

RECORDS = "/buckets/undogate/collections/customers/records"
START = {"status": "lead", "owner": "sam", "note": "outside the allowlist"}
ENV = {"KINTO_AUTH": f"{USER}:{PASSWORD}"}


@pytest.fixture(scope="module")
def kinto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KintoServer]:
    with kinto_server(tmp_path_factory.mktemp("kinto")) as srv:
        srv.request("PUT", "/buckets/undogate", json={})
        srv.request("PUT", "/buckets/undogate/collections/customers", json={})
        yield srv


def seed(kinto: KintoServer, record_id: str) -> str:
    """A fresh record; returns its ETag."""
    response = kinto.request("PUT", f"{RECORDS}/{record_id}", json={"data": START})
    return str(response.headers["etag"])


def kinto_resource(kinto: KintoServer, rid: str, record_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "agent_id": "account-assistant",
        "name": rid,
        "kind": "json_record",
        "url": kinto.url(f"{RECORDS}/{record_id}"),
        "token_env": "KINTO_AUTH",
        "token_scheme": "basic",
        "record_pointer": "/data",
        "fields": ["status", "owner"],
        "conditional_writes": True,
        "allow_loopback_http": True,
        **extra,
    }


def test_the_endpoint_check_verifies_kinto(kinto: KintoServer, data_dir: Path) -> None:
    prod_etag = seed(kinto, "prod-1")
    seed(kinto, "copy-1")
    config = parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": [
                kinto_resource(kinto, "customer", "prod-1"),
                kinto_resource(kinto, "customer-copy", "copy-1", test_copy_of="customer"),
            ],
            "agents": [{"id": "account-assistant", "tools": ["list_resources"]}],
        }
    )
    ledger, http = Ledger.open(data_dir), PinnedClient()
    try:
        result = check_endpoint(Context(config, ledger, http, environ=ENV), "customer-copy")
        production = config.resource("customer")
        assert production is not None and latest_verification(ledger, production)
    finally:
        http.close()
        ledger.close()

    assert result.passed, [(s.name, s.summary, s.message) for s in result.steps]
    steps = {s.name: s for s in result.steps}
    assert steps["stale_write_refused"].evidence == {"status": 412, "unchanged": True}
    # Kinto refuses W/ for its syntax: a refusal with no effect, as the endpoint check asks.
    assert steps["weak_if_match_refused"].evidence == {"status": 400, "unchanged": True}
    assert steps["missing_not_created"].evidence == {"status": 404, "absent_after": True}
    # Kinto's own last_modified inside data moved; every allow-listed field is back.
    assert steps["undo_restores"].evidence["other_fields_changed"] == 1
    copy = kinto.request("GET", f"{RECORDS}/copy-1").json()["data"]
    assert {k: copy[k] for k in START} == START
    prod = kinto.request("GET", f"{RECORDS}/prod-1")
    assert prod.headers["etag"] == prod_etag
    listed = kinto.request("GET", RECORDS).json()["data"]
    assert sorted(r["id"] for r in listed) == ["copy-1", "prod-1"]  # the probe made nothing


def test_kinto_refuses_an_invented_or_weak_tag_for_its_syntax(kinto: KintoServer) -> None:
    """Why the check's stale tag must be one Kinto issued: an invented one gets 400."""
    etag = seed(kinto, "syntax-1")
    url = kinto.url(f"{RECORDS}/syntax-1")
    patch = b'[{"op": "replace", "path": "/data/status", "value": "x"}]'
    for tag in ('"undogate-stale-0123abcd"', f"W/{etag}"):
        answer = httpx.patch(
            url,
            content=patch,
            headers={"Content-Type": "application/json-patch+json", "If-Match": tag},
            auth=kinto.auth,
            trust_env=False,
        )
        assert answer.status_code == 400, answer.text
        assert "If-Match" in answer.json()["message"]
    assert kinto.request("GET", f"{RECORDS}/syntax-1").headers["etag"] == etag
