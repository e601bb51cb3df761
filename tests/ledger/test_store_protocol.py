"""The store contract covers the whole protocol: every verb of ``Reader``,
``Transaction`` and ``Store`` is called by a test in this directory or by the builders
they share (conftest.py). The contract files (test_store_*.py, one topic each) run on
every engine; a topic's verbs may have a file of their own."""

from __future__ import annotations

from pathlib import Path

from undogate.ledger import Reader, Store, Transaction


def test_every_verb_of_the_protocol_is_exercised_by_the_contract_files() -> None:
    here = Path(__file__).parent
    tests = sorted(here.glob("test_*.py"))
    source = "".join(f.read_text() for f in [here / "conftest.py", *tests])
    verbs = {
        name
        for proto in (Reader, Transaction, Store)
        for part in proto.__mro__  # with the topic protocols they include (store_outbox)
        if part.__module__.startswith("undogate.ledger")
        for name in vars(part)
        if not name.startswith("_") and callable(getattr(part, name))
    }
    missing = sorted(v for v in verbs if f".{v}(" not in source)
    assert len(tests) > 1 and verbs and not missing, missing
