"""A json_collection's listing, against the contract server: one that announces a next
page (RFC 8288 ``Link``, parsed) is never matched in part, and one as long as
``max_collection_records`` allows is read whole, within its byte bound."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.errors import (
    LimitReached,
    RemoteContractBreach,
)
from undogate.resources import MAX_LISTING_BYTES, Limits

from .collections_world import CONTACTS, change, contacts, open_contacts, seed
from .worlds import LocalGateway, make_config, prepare

Opener = Callable[[Config], LocalGateway]


# -- paged listings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "links",
    [
        ['<?page=2>; rel="Next"'],
        ['<?page=2>; rel="next last"'],
        ['<?page=2>; rel = "next"'],
        ["<?page=2>;rel=NEXT"],
        ['<?page=1>; rel="prev", <?page=3>; title="a, b"; rel="next"'],
        ['<?page=1>; rel="prev"', '<?page=3>; rel="next"'],
    ],
)
def test_a_listing_that_announces_a_next_page_is_never_matched_in_part(
    server: ContractServer, data_dir: Path, open_gateway: Opener, links: list[str]
) -> None:
    gw, _ = open_contacts(server, data_dir, open_gateway)
    seed(server, "ann", email="ann@example.com")
    server.link_listing(CONTACTS, *links)
    with pytest.raises(RemoteContractBreach, match="comes in pages"):
        prepare(gw, change(upsert={"email": "ann@example.com", "name": "A"}))


@pytest.mark.parametrize(
    "links",
    [
        ['<?page=1>; rel="prev"'],
        ['<https://x.example/next>; rel="last"'],
        ['<?page=2>; title="next"'],
        ['<?page=2>; rel="nextish"'],
    ],
)
def test_a_listing_whose_links_announce_no_next_page_is_matched_whole(
    server: ContractServer, data_dir: Path, open_gateway: Opener, links: list[str]
) -> None:
    gw, _ = open_contacts(server, data_dir, open_gateway)
    seed(server, "ann", email="ann@example.com")
    server.link_listing(CONTACTS, *links)
    job = gw.ledger.load_job(prepare(gw, change(upsert={"email": "ann@example.com", "name": "A"})))
    assert job is not None and job.changes[0].target == "ann"


def test_a_listing_whose_link_header_cannot_be_read_is_refused(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, _ = open_contacts(server, data_dir, open_gateway)
    server.link_listing(CONTACTS, '<?page=1>; rel="prev" <?page=3>; rel="next"')
    with pytest.raises(RemoteContractBreach, match="cannot read"):
        prepare(gw, change(upsert={"email": "ann@example.com", "name": "A"}))


# -- listings as long as the limits say -------------------------------------------------------


def test_a_listing_of_max_collection_records_ordinary_records_is_read_whole(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, _ = open_contacts(server, data_dir, open_gateway)
    limit = Limits().max_collection_records
    notes = "n" * 300  # an ordinary record: a few hundred bytes
    for n in range(limit - 1):
        server.set_record(
            f"{CONTACTS}/c{n}", {"id": f"c{n}", "email": f"c{n}@example.com", "name": notes}
        )
    seed(server, "last", email="last@example.com", name=notes)
    listing = httpx.get(server.url(CONTACTS)).content
    assert len(listing) > 4 * Limits().max_document_bytes  # the old bound
    job = gw.ledger.load_job(prepare(gw, change(upsert={"email": "LAST@example.com", "name": "L"})))
    assert job is not None and job.changes[0].target == "last"
    seed(server, "one-more", email="more@example.com")
    with pytest.raises(LimitReached) as refused:
        prepare(gw, change(upsert={"email": "last@example.com", "name": "M"}))
    assert refused.value.details["limit"] == "max_collection_records"


def test_a_listing_over_its_byte_bound_is_refused_by_the_record_limit(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    small = {"max_collection_records": 4, "max_document_bytes": 1024}
    config = make_config(server, data_dir, contacts(server))
    config = replace(config, limits=config.limits.model_copy(update=small))
    gw = open_gateway(config)
    assert config.limits.max_listing_bytes == 4 * 1024
    for n in range(3):  # three records, but over 4 KiB together
        seed(server, f"big{n}", email=f"b{n}@example.com", name="x" * 1500)
    with pytest.raises(LimitReached) as refused:
        prepare(gw, change(upsert={"email": "b0@example.com", "name": "y"}))
    assert refused.value.details["limit"] == "max_collection_records"
    assert "4096 bytes" in refused.value.message


def test_the_listing_bound_grows_with_the_record_limit_within_a_ceiling() -> None:
    assert Limits().max_listing_bytes == min(1000 * 64 * 1024, MAX_LISTING_BYTES)
    assert Limits(max_collection_records=10).max_listing_bytes == 10 * 64 * 1024
    assert Limits(max_collection_records=10**6).max_listing_bytes == MAX_LISTING_BYTES
