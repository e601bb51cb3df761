"""The store contract covers the whole protocol: every verb of ``Reader``,
``Transaction`` and ``Store`` is called by the contract files (test_store_*.py) or the
builders they share (conftest.py)."""

from __future__ import annotations

from pathlib import Path

from undogate.ledger import Reader, Store, Transaction


def test_every_verb_of_the_protocol_is_exercised_by_the_contract_files() -> None:
    here = Path(__file__).parent
    contract = sorted(here.glob("test_store_*.py"))
    source = "".join(f.read_text() for f in [here / "conftest.py", *contract])
    verbs = {
        name
        for proto in (Reader, Transaction, Store)
        for name in vars(proto)
        if not name.startswith("_") and callable(getattr(proto, name))
    }
    missing = sorted(v for v in verbs if f".{v}(" not in source)
    assert len(contract) > 1 and verbs and not missing, missing
