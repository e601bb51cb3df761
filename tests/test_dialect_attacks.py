"""Attacks on the JSON kinds at their edges, against the real contract server: a
collection's listing that names a record by an id the record at that URL does not bear
out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.errors import Conflict

from .collections_world import CONTACTS, change, open_contacts
from .worlds import LocalGateway, prepare

Opener = Callable[[Config], LocalGateway]


def test_an_upsert_never_updates_a_record_its_evidence_did_not_match(
    server: ContractServer, data_dir: Path, open_gateway: Opener
) -> None:
    """The listing shows Ann's email on a record whose id field says ``bob`` (a listing
    that lies, or Bob's record edited between the listing and its read): an upsert by
    Ann's email is refused rather than planned onto Bob's record, which holds none of
    Ann's evidence."""
    gw, _config = open_contacts(server, data_dir, open_gateway)
    server.set_record(f"{CONTACTS}/ann", {"id": "bob", "email": "ann@example.com"})
    bob = {"id": "bob", "email": "bob@example.com", "status": "vip"}
    server.set_record(f"{CONTACTS}/bob", bob)
    writes = server.write_counts()
    with pytest.raises(Conflict) as refused:
        prepare(gw, change(upsert={"email": "ann@example.com", "status": "customer"}))
    assert refused.value.details["id"] == "bob"
    assert "vip" not in refused.value.message and "bob@" not in refused.value.message
    assert gw.ledger.read(lambda tx: tx.usage()).jobs == 0  # nothing was prepared
    assert server.collection_records(CONTACTS)["bob"] == bob
    assert server.write_counts() == writes
