"""What every adapter refuses in a read, whatever the resource kind."""

from __future__ import annotations

import httpx
import pytest

from undogate.adapters import Wire
from undogate.config import Limits, parse_config
from undogate.errors import RemoteContractBreach
from undogate.net import PinnedClient, RemoteResponse

CONFIG = parse_config(
    {
        "agents": [{"id": "a"}],
        "resources": [
            {
                "id": "r",
                "agent_id": "a",
                "name": "r",
                "kind": "json_record",
                "url": "https://records.example.com/r/1",
                "fields": ["status"],
            }
        ],
    }
)


def _response(**headers: bytes) -> RemoteResponse:
    """Headers as raw bytes, the way they arrive on the wire."""
    base: dict[str, bytes] = {"content-type": b"application/json", "etag": b'"v1"'}
    base.update(headers)
    raw = httpx.Headers([(name.encode(), value) for name, value in base.items()])
    return RemoteResponse(200, raw, b'{"status": "a"}', "127.0.0.1")


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"etag": b'"v1\xe9"'}, "non-ASCII"),
        ({"content-encoding": b"gzip"}, "Content-Encoding"),
        ({"etag": b'W/"v1"'}, "weak"),
    ],
)
def test_reads_that_cannot_be_trusted_are_contract_breaches(
    headers: dict[str, bytes], reason: str
) -> None:
    http = PinnedClient()
    try:
        remote = Wire(http=http, limits=Limits())
        resource = CONFIG.resources[0]
        assert remote.snapshot_from(resource, _response()).etag.opaque == "v1"
        with pytest.raises(RemoteContractBreach, match=reason):
            remote.snapshot_from(resource, _response(**headers))
    finally:
        http.close()


@pytest.mark.parametrize(
    ("media_type", "ok"),
    [
        (b"application/json", True),
        (b"Application/JSON; charset=UTF-8", True),
        (b'application/json; charset="utf-8"', True),
        (b"application/json; charset=latin-1", False),
        (b"application/json; charset=utf-8; charset=utf-8", False),
        (b"application/json; version=2", False),
        (b"application/problem+json", False),
        (b"text/json", False),
    ],
)
def test_records_accept_only_json_with_no_charset_but_utf8(media_type: bytes, ok: bool) -> None:
    http = PinnedClient()
    try:
        remote = Wire(http=http, limits=Limits())
        response = _response(**{"content-type": media_type})
        if ok:
            assert remote.snapshot_from(CONFIG.resources[0], response).content == {"status": "a"}
        else:
            with pytest.raises(RemoteContractBreach, match="media type"):
                remote.snapshot_from(CONFIG.resources[0], response)
    finally:
        http.close()
