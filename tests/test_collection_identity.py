"""What identifies a record of a json_collection, against the contract server: an
ambiguous upsert tells the agent only the evidence it sent, identity spellings under
IDNA 2008 and NFC, and ids that are one whole id wherever they come from (the agent, a
POST's answer, a listing, the config)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from undogate.adapters import Side, absent_snapshot, adapter_for
from undogate.adapters.evidence import normalize
from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.errors import (
    Ambiguous,
    ConfigError,
    InvalidRequest,
    RemoteContractBreach,
)
from undogate.jobs import ABSENT, Change
from undogate.net import RemoteResponse

from .collections_world import CONTACTS, change, contacts, open_contacts, seed
from .worlds import LocalGateway, make_config, prepare

Opener = Callable[[Config], LocalGateway]


# -- what an ambiguous upsert tells the agent -------------------------------------------------


def test_ambiguous_candidates_carry_only_the_evidence_the_agent_sent(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    identity = [
        {"field": "email", "evidence": "email"},
        {"field": "website", "evidence": "domain"},
    ]
    gw, _ = open_contacts(server, data_dir, open_gateway, identity=identity)
    seed(server, "one", email="private-one@example.com", website="https://shop.example/")
    seed(server, "two", email="private-two@example.com", website="www.shop.example")
    seed(server, "three", email="x@example.com", website="elsewhere.example")
    with pytest.raises(Ambiguous) as by_website:
        prepare(gw, change(upsert={"website": "shop.example", "name": "Shop"}))
    assert by_website.value.details["candidates"] == [
        {"id": "one", "evidence": {"website": "shop.example"}},
        {"id": "two", "evidence": {"website": "shop.example"}},
    ]
    assert "private" not in str(by_website.value.details)
    # Matched on one field each: only that field, never the record's other value.
    with pytest.raises(Ambiguous) as by_both:
        prepare(gw, change(upsert={"email": "x@example.com", "website": "shop.example"}))
    assert by_both.value.details["candidates"] == [
        {"id": "one", "evidence": {"website": "shop.example"}},
        {"id": "three", "evidence": {"email": "x@example.com"}},
        {"id": "two", "evidence": {"website": "shop.example"}},
    ]
    assert "elsewhere" not in str(by_both.value.details)


# -- identity spellings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("bob@fass.de", "bob@faß.de", False),  # IDNA 2003 mapped ß to ss
        ("eve@faß.de", "eve@xn--fa-hia.de", True),
        ("eve@FASS.de", "eve@fass.de", True),
        (" Ann@Bücher.Example ", "ann@xn--bcher-kva.example", True),
        ("zoe\u0308@example.com", "zo\u00eb@example.com", True),  # NFC in the local part
        ("zoe@example.com", "zo\u00eb@example.com", False),
    ],
)
def test_email_evidence_is_idna_2008_with_uts_46_and_nfc(
    first: str, second: str, same: bool
) -> None:
    assert (normalize("email", first) == normalize("email", second)) is same
    assert normalize("email", first) is not None


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("https://faß.de/about", "xn--fa-hia.de", True),
        ("fass.de", "www.faß.de", False),
        ("HTTPS://WWW.Bücher.example:443/", "xn--bcher-kva.example", True),
    ],
)
def test_domain_evidence_is_idna_2008_with_uts_46(first: str, second: str, same: bool) -> None:
    assert (normalize("domain", first) == normalize("domain", second)) is same


@pytest.mark.parametrize("value", ["a@b_c.example", "a@xn--zz.example", "a@exa mple.com", "a@"])
def test_a_domain_idna_2008_refuses_gives_no_evidence(value: str) -> None:
    assert normalize("email", value) is None


def test_an_upsert_matches_by_idna_2008(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, _ = open_contacts(server, data_dir, open_gateway)
    seed(server, "bob", email="bob@fass.de")
    seed(server, "eve", email="eve@xn--fa-hia.de")
    bob = gw.ledger.load_job(prepare(gw, change(upsert={"email": "bob@faß.de", "name": "B"})))
    assert bob is not None and bob.changes[0].before is ABSENT  # a new record, not fass.de's
    eve = gw.ledger.load_job(prepare(gw, change(upsert={"email": "eve@faß.de", "name": "E"})))
    assert eve is not None and eve.changes[0].target == "eve"


# -- ids --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rid", ["r1\n", "r1\r\n", "\nr1", "r1 ", "-r1", "r" * 129])
def test_an_agents_record_id_must_be_one_whole_id(
    server: ContractServer, data_dir: Path, open_gateway: Opener, rid: str
) -> None:
    gw, _ = open_contacts(server, data_dir, open_gateway)
    seed(server, "r1", email="r1@example.com")
    for asked in (
        change(create={"email": "n@example.com"}, record_id=rid),
        change(record_id=rid, set={"name": "x"}),
        change(record_id=rid, delete=True),
    ):
        with pytest.raises(InvalidRequest, match="a record id is"):
            prepare(gw, asked)


def test_a_listed_record_whose_id_is_not_one_whole_id_is_a_breach(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    gw, _ = open_contacts(server, data_dir, open_gateway)
    server.set_record(f"{CONTACTS}/odd", {"id": "odd\n", "email": "odd@example.com"})
    with pytest.raises(RemoteContractBreach, match="no usable 'id'"):
        prepare(gw, change(upsert={"email": "odd@example.com", "name": "x"}))


@pytest.mark.parametrize(
    ("location", "body", "landed"),
    [
        ("/collections/contacts/r1", b"{}", "r1"),
        ("/collections/contacts/r1%0A", b"{}", None),
        ("/collections/contacts/r1%0A", b'{"id": "r2"}', "r2"),
        (None, b'{"id": "r1\\n"}', None),
    ],
)
def test_a_post_learns_only_a_whole_id_from_its_answer(
    server: ContractServer, location: str | None, body: bytes, landed: str | None
) -> None:
    res = make_config(server, Path("unused"), contacts(server, create="post")).resource("contacts")
    assert res is not None
    created = Change(
        index=0,
        resource_id=res.id,
        kind=res.kind,
        fingerprint=res.fingerprint,
        fields=("email",),
        before=ABSENT,
        after={"record": {"email": "a@example.com"}, "preexisting": []},
        media_type="",
        prepared_etag="absent",
        assertion_kind=None,
    )
    adapter = adapter_for(res.kind)
    write = adapter.build_write(res, created, absent_snapshot(), Side.AFTER)
    assert write.method == "POST"
    headers = httpx.Headers({"Location": location} if location else {})
    answer = RemoteResponse(status=201, headers=headers, body=body, address=None)
    assert adapter.written_target(res, created, write, answer) == landed


@pytest.mark.parametrize(
    ("where", "spelled"),
    [
        ({"resources[0].id"}, {("resources", 0, "id"): "contacts\n"}),
        (
            {"resources[0].agent_id", "agents[0].id"},
            {("resources", 0, "agent_id"): "assistant\n", ("agents", 0, "id"): "assistant\n"},
        ),
        ({"resources[0].token_env"}, {("resources", 0, "token_env"): "CRM_TOKEN\n"}),
        ({"resources[0].fields[1]"}, {("resources", 0, "fields", 1): "name\n"}),
        ({"webhooks.endpoints[0].id"}, {("webhooks", "endpoints", 0, "id"): "hook\n"}),
        ({"webhooks.endpoints[0].secret_env"}, {("webhooks", "endpoints", 0, "secret_env"): "S\n"}),
    ],
)
def test_a_configured_name_with_a_trailing_newline_is_refused_where_it_stands(
    server: ContractServer, where: set[str], spelled: dict[tuple[Any, ...], str]
) -> None:
    """pydantic's ``pattern`` runs in pydantic-core's Rust engine, whose ``$`` is the end
    of the text (Python's ``re.match`` lets a trailing newline through)."""
    document: dict[str, Any] = copy.deepcopy(
        {
            "server": {"data_dir": "unused"},
            "resources": [contacts(server)],
            "agents": [{"id": "account-assistant", "tools": ["list_resources"]}],
            "webhooks": {
                "endpoints": [{"id": "hook", "url": "https://hooks.example/x", "secret_env": "S"}]
            },
        }
    )
    for path, value in spelled.items():
        place: Any = document
        for step in path[:-1]:
            place = place[step]
        place[path[-1]] = value
    with pytest.raises(ConfigError) as refused:
        parse_config(document)
    assert {path for path, _ in refused.value.problems} == where
