"""The crash harness for records that appear and disappear (docs/collections.md): a real
``undogate serve`` killed with SIGKILL at each point of a create (PUT and POST), a
delete, and the undo of a create; then started again and reconciled through the API.

After each: the ledger is whole, an interrupted write is ``uncertain``, reconciliation
says what the collection shows (a lost PUT answer: that exact URL; a lost POST answer:
the one new record matching the create's evidence), and in the end nothing was created
twice and nothing was deleted that changed. The matrix is printed at the end.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest

from undogate.contract_server import ContractServer
from undogate.jsonvalue import JsonObject, dumps
from undogate.ledger import Store, Transaction
from undogate.operations.context import CRASH_POINTS
from undogate.resources import Resource

from .fixtures.report import REPORT
from .test_crash_matrix import INTERRUPTED, Cell

CONTACTS = "/collections/contacts"  # create: put
LEADS = "/collections/leads"  # create: post
FIELDS = ["email", "name", "status"]

pytestmark = pytest.mark.slow


def _collection(server: ContractServer, rid: str, path: str, create: str) -> dict[str, Any]:
    return {
        "id": rid,
        "agent_id": "account-assistant",
        "name": rid,
        "kind": "json_collection",
        "url": server.url(path),
        "fields": FIELDS,
        "create": create,
        "identity": [{"field": "email", "evidence": "email"}],
        "lookup": {"list": True},
        "conditional_writes": True,
        "allow_loopback_http": True,
    }


class CollectionCell(Cell):
    """A cell whose collections' undos a test copy verified and a reviewer accepted
    (recorded as a passing check records it), so no step needs an acknowledgement."""

    def __init__(self, server: ContractServer, work: Path) -> None:
        self.resources = [
            _collection(server, "contacts", CONTACTS, "put"),
            _collection(server, "leads", LEADS, "post"),
        ]
        super().__init__(server, work, extra=self.resources)

    def ledger_ready(self, ledger: Store) -> None:
        from undogate.config import load_config

        config = load_config(self.config)
        for rid in ("contacts", "leads"):
            res = config.resource(rid)
            assert res is not None
            evidence: JsonObject = {
                "kind": res.kind,
                "steps": [],
                "undos": ["recreate", "undo_of_create"],
            }

            def checked(
                tx: Transaction, res: Resource = res, evidence: JsonObject = evidence
            ) -> int:
                return tx.record_endpoint_check(
                    resource_id=res.id,
                    test_copy_id=f"{res.id}-copy",
                    production_fingerprint=res.fingerprint,
                    test_copy_fingerprint="sha256:copy",
                    passed=True,
                    evidence=dumps(evidence),
                    actor="operator:tester",
                    access_path="test",
                )

            def accepted(tx: Transaction, res: Resource = res, check_id: int = 0) -> None:
                tx.add_event(
                    job_id=None,
                    actor="operator:crash-harness",
                    access_path="test",
                    operation="undo_accepted",
                    target=res.id,
                    detail={
                        # An acceptance belongs to the check it accepted.
                        "check": str(check_id),
                        "fingerprint": res.fingerprint,
                        "undos": ["recreate", "undo_of_create"],
                    },
                )

            ledger.write(partial(accepted, check_id=ledger.write(checked)))


def _settle(cell: Cell, job: str, point: str, path: str, expected: tuple[str, str]) -> str:
    """After the crash: the interrupted write is uncertain and reconciled (its
    observation ``expected[0]`` before the request left, ``expected[1]`` after)."""
    state = cell.inspect(job)
    assert state["integrity"] == "ok" and state["changes"]
    assert state["chain"] == "verified"  # a crash never leaves a broken link
    if point not in INTERRUPTED:
        assert state["actions"][-1][2] == "done", state
        return str(state["state"])
    assert state["actions"][-1][2] == "uncertain" and state["state"] == "needs_review", state
    settled = cell.operate("accept", job)
    observed = expected[0] if point == "after_intent" else expected[1]
    assert settled["observations"] == [observed], settled
    return f"needs_review → {observed} → {settled['state']}"


def _create_cell(cell: CollectionCell, point: str) -> str:
    server = cell.server
    path = f"{CONTACTS}/crash-1"
    cell.start()
    job = cell.prepare_changes(
        [{"resource": "contacts", "id": "crash-1", "create": {"email": "a@example.com"}}]
    )
    cell.crash("apply", job, point, path)
    outcome = _settle(cell, job, point, path, ("looks_not_applied", "looks_applied"))
    if cell.inspect(job)["state"] == "prepared":
        assert cell.operate("apply", job)["state"] == "applied"
        outcome += " → applied"
    assert set(server.collection_records(CONTACTS)) == {"crash-1"}
    assert server.attempt_count(path) == 1  # never created twice
    return outcome


def _post_create_cell(cell: CollectionCell, point: str) -> str:
    server = cell.server
    server.set_record(f"{LEADS}/old", {"id": "old", "email": "B@example.com"})  # there before
    cell.start()
    job = cell.prepare_changes([{"resource": "leads", "create": {"email": "b@example.com"}}])
    cell.crash("apply", job, point, LEADS)
    outcome = _settle(cell, job, point, LEADS, ("looks_not_applied", "looks_applied"))
    if cell.inspect(job)["state"] == "prepared":
        assert cell.operate("apply", job)["state"] == "applied"
        outcome += " → applied"
    assert len(server.collection_records(LEADS)) == 2 and server.attempt_count(LEADS) == 1
    # Whatever the crash, the job knows which record it made: undo removes only that.
    assert cell.operate("undo", job)["state"] == "undone"
    assert set(server.collection_records(LEADS)) == {"old"}
    return outcome + " → undone"


def _delete_cell(cell: CollectionCell, point: str) -> str:
    server = cell.server
    path = f"{CONTACTS}/victim"
    server.set_record(path, {"id": "victim", "email": "v@example.com", "name": "V"})
    start = server.get_record(path)
    cell.start()
    job = cell.prepare_changes([{"resource": "contacts", "id": "victim", "delete": True}])
    cell.crash("apply", job, point, path)
    outcome = _settle(cell, job, point, path, ("looks_not_applied", "looks_applied"))
    if cell.inspect(job)["state"] == "prepared":
        # The record changed meanwhile: the delete is refused, nothing that changed goes.
        server.set_field(path, "/name", "edited")
        refused = cell.preview(job, "apply")
        assert refused["error"]["code"] == "conflict", refused
        assert server.get_record(path)["name"] == "edited"
        server.set_field(path, "/name", "V")  # back as it was: a new version, same values
        refused = cell.operate("apply", job)
        # The DELETE carries the tag its pre-image was read with: the server refuses it.
        assert refused["state"] == "prepared", refused
        assert server.get_record(path)["name"] == "V"
        return outcome + " → outside edits → refused, kept"
    assert server.collection_records(CONTACTS) == {}
    assert server.attempt_count(path) == 1
    assert cell.operate("undo", job)["state"] == "undone"
    assert server.get_record(path) == start
    return outcome + " → undone (re-created)"


def _undo_create_cell(cell: CollectionCell, point: str) -> str:
    server = cell.server
    path = f"{CONTACTS}/made"
    cell.start()
    job = cell.prepare_changes(
        [{"resource": "contacts", "id": "made", "create": {"email": "m@example.com"}}]
    )
    assert cell.operate("apply", job)["state"] == "applied"
    cell.crash("undo", job, point, path)
    outcome = _settle(cell, job, point, path, ("looks_applied", "looks_undone"))
    if cell.inspect(job)["state"] == "applied":
        assert cell.operate("undo", job)["state"] == "undone"
        outcome += " → undone"
    assert server.collection_records(CONTACTS) == {}
    assert server.attempt_count(path) == 2  # one PUT, one DELETE
    return outcome


# A POST create's crash points beyond its lost answer behave as a PUT create's do.
POINTS = {"create (POST)": ("after_send", "after_response")}
CELLS = {
    "create (PUT)": _create_cell,
    "create (POST)": _post_create_cell,
    "delete": _delete_cell,
    "undo of create": _undo_create_cell,
}


def test_crash_matrix_for_records_that_appear_and_disappear(
    server: ContractServer, tmp_path: Path
) -> None:
    rows: list[tuple[str, str, str]] = []
    for name, run_cell in CELLS.items():
        for point in POINTS.get(name, CRASH_POINTS):
            server.reset()
            slug = name.replace(" ", "-").replace("(", "").replace(")", "")
            cell = CollectionCell(server, tmp_path / f"{slug}-{point}")
            try:
                rows.append((name, point, run_cell(cell, point)))
            finally:
                cell.stop()
    REPORT.append("crash matrix, collections (operation × kill point → what followed):")
    REPORT.extend(f"  {op:<16} {point:<15} {outcome}" for op, point, outcome in rows)
    REPORT.append(f"crash matrix, collections: {len(rows)} cells run, {len(rows)} passed")
    assert len(rows) == sum(len(POINTS.get(name, CRASH_POINTS)) for name in CELLS)
