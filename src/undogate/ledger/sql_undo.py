"""What the ledger knows about verified undos (docs/collections.md), in the SQL both engines speak:
endpoint checks (each recorded with its chained ``endpoint_check`` event, which the
latest check is held to), and the latest time a reviewer accepted a verified undo of a
resource (an ``undo_accepted`` event)."""

from __future__ import annotations

import time

from ..chain.seals import ENDPOINT_CHECKED, check_problem
from ..errors import LedgerTampered
from ..jsonvalue import JsonObject, dumps, loads_object
from .records import StoredCheck, UndoAcceptance
from .sql_chain import ChainVerbs, new_row


class UndoVerbs(ChainVerbs):
    """Endpoint checks and the reads of the verified-undo rule, on one connection inside
    the store's transaction (see ``store.Reader``)."""

    def record_endpoint_check(
        self,
        *,
        resource_id: str,
        test_copy_id: str,
        production_fingerprint: str,
        test_copy_fingerprint: str,
        passed: bool,
        evidence: str,
        actor: str,
        access_path: str,
    ) -> int:
        row = self.connection.execute(
            "INSERT INTO endpoint_checks(resource_id, test_copy_id, production_fingerprint, "
            "test_copy_fingerprint, at, passed, evidence) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "RETURNING id",
            (
                resource_id,
                test_copy_id,
                production_fingerprint,
                test_copy_fingerprint,
                time.time(),
                int(passed),
                evidence,
            ),
        ).fetchone()
        check_id = int(row[0])
        undos = loads_object(evidence).get("undos")
        detail: JsonObject = {
            "test_copy": test_copy_id,
            "check": str(check_id),
            "passed": passed,
            "undos": undos if isinstance(undos, list) else [],
        }
        self.append_event(
            new_row(
                job_id=None,
                actor=actor,
                access_path=access_path,
                operation=ENDPOINT_CHECKED,
                target=resource_id,
                from_state=None,
                to_state=None,
                detail=dumps(detail),
            )
        )
        return check_id

    def latest_check(self, resource_id: str, fingerprint: str) -> StoredCheck | None:
        """Raises: LedgerTampered when the check is not the one its ``endpoint_check``
        event recorded (seals.py): an undo is never offered on a forged check."""
        row = self.connection.execute(
            "SELECT id, passed, evidence, at FROM endpoint_checks WHERE resource_id = ? "
            "AND production_fingerprint = ? ORDER BY id DESC LIMIT 1",
            (resource_id, fingerprint),
        ).fetchone()
        if row is None:
            return None
        check = StoredCheck(int(row[0]), bool(row[1]), loads_object(str(row[2])), float(row[3]))
        problem = check_problem(
            passed=check.passed,
            evidence=check.evidence,
            chained=self._check_event(resource_id, check.id),
        )
        if problem:
            raise LedgerTampered(
                f"endpoint check {check.id} of {resource_id!r} is not what the hash chain "
                f"recorded: {problem}. Run `undogate ledger verify`",
                resource=resource_id,
                check=check.id,
            )
        return check

    def latest_check_passed(self, resource_id: str, fingerprint: str) -> bool:
        check = self.latest_check(resource_id, fingerprint)
        return check is not None and check.passed

    def _check_event(self, resource_id: str, check_id: int) -> JsonObject | None:
        """The detail of the ``endpoint_check`` event that recorded check ``check_id``
        (through events_outside_jobs: the resource's own check events, newest first)."""
        rows = self.connection.execute(
            "SELECT detail FROM events WHERE job_id IS NULL AND target = ? AND operation = ? "
            "ORDER BY id DESC",
            (resource_id, ENDPOINT_CHECKED),
        )
        for (detail,) in rows:
            recorded = loads_object(str(detail)) if detail is not None else {}
            if recorded.get("check") == str(check_id):
                return recorded
        return None

    def latest_undo_acceptance(self, resource_id: str) -> UndoAcceptance | None:
        # Served by the partial index events_undo_accepted.
        row = self.connection.execute(
            "SELECT id, at, actor, detail FROM events "
            "WHERE operation = 'undo_accepted' AND target = ? ORDER BY id DESC LIMIT 1",
            (resource_id,),
        ).fetchone()
        if row is None:
            return None
        detail = loads_object(str(row[3])) if row[3] is not None else {}
        return UndoAcceptance(int(row[0]), float(row[1]), str(row[2]), detail)
