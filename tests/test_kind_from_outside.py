"""A kind from outside undogate: ``keyvalue_entry``, its own distribution
(tests/kinds/keyvalue, installed by ``make install``), found through its ``undogate.kinds``
entry point. Nothing in undogate names it; it passes the contract every built-in kind
passes, against the key-value store it ships."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest
from undogate_keyvalue.store import KeyValueStore

from undogate.testing import KindCase, KindContract

TOKEN = "kv-secret-token"
_edits = itertools.count()


@pytest.fixture
def store() -> Iterator[KeyValueStore]:
    kv = KeyValueStore(token=TOKEN).start()
    try:
        yield kv
    finally:
        kv.stop()


class TestKeyValueEntryContract(KindContract):
    @pytest.fixture
    def kind_case(self, store: KeyValueStore) -> KindCase:
        store.set("greeting", "Hello")
        store.set("greeting-copy", "Hello")

        return KindCase(
            kind="keyvalue_entry",
            url=store.url("greeting"),
            test_copy_url=store.url("greeting-copy"),
            change={"value": "Back on Monday"},
            other_change={"value": "Away until Friday"},
            outside_edit=lambda: store.set("greeting", f"edited elsewhere {next(_edits)}"),
            state=lambda: json.dumps(store.value("greeting")).encode(),
            settings={"max_length": 80},
            token=TOKEN,
        )
