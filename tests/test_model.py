"""A model-based test: random sequences of prepare, preview, confirm, undo, outside
edits, server faults and restarts against the real contract server and ledger.

After every step: no value the gateway did not expect was overwritten, every write the
server took has an action in the ledger, and every recorded state change is an edge of
the state machine. ``UNDOGATE_THOROUGH=1`` runs many more sequences.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.engine import Gateway
from undogate.errors import UndogateError
from undogate.jobs import TRANSITIONS, ActionStatus, ChangeRequest, Operation, PrepareRequest
from undogate.jsonvalue import JsonObject
from undogate.ledger import Ledger
from undogate.net import RemoteHTTP

from .conftest import AGENT, OWNER, make_config, resource

PATH = "/records/customer-123"
FIELDS = ("status", "owner")
VALUES = st.sampled_from(["a", "b", "c", "d"])
THOROUGH = os.environ.get("UNDOGATE_THOROUGH") == "1"
EDGES = {
    (src.value, dst.value) for t in TRANSITIONS.values() for src, dsts in t.items() for dst in dsts
}


class GatewayModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.server = ContractServer(None, faults=True, hang_seconds=2).start()
        self.config: Config = make_config(
            self.server,
            Path(self.tmp.name) / "data",
            resource(self.server, "customer", PATH, fields=list(FIELDS)),
        )
        self.gw = self._open()
        self.jobs: list[str] = []

    def _open(self) -> Gateway:
        ledger = Ledger.open(self.config.server.data_dir)
        gw = Gateway(config=self.config, ledger=ledger, http=RemoteHTTP(request_timeout_s=1))
        gw.recover()
        return gw

    def teardown(self) -> None:
        self.gw.http.close()
        self.gw.ledger.close()
        self.server.stop()
        self.tmp.cleanup()

    @initialize()
    def start(self) -> None:
        self.server.reset()

    @rule(status=st.none() | VALUES, owner=st.none() | VALUES)
    def prepare(self, status: str | None, owner: str | None) -> None:
        values: JsonObject = {k: v for k, v in (("status", status), ("owner", owner)) if v}
        if not values:
            return
        req = PrepareRequest("model", (ChangeRequest(resource_id="customer", set=values),))
        with contextlib.suppress(UndogateError):
            self.jobs.append(self.gw.prepare(AGENT, "account-assistant", req).job.id)

    @precondition(lambda self: bool(self.jobs))
    @rule(
        pick=st.integers(min_value=0, max_value=2),
        op=st.sampled_from([Operation.APPLY, Operation.UNDO, Operation.ACCEPT_OBSERVED]),
        fault=st.sampled_from(
            [None, None, None, "status:409", "apply_then_500", "ok_without_apply"]
        ),
    )
    def operate(self, pick: int, op: Operation, fault: str | None) -> None:
        job_id = self.jobs[-1 - pick % len(self.jobs)]  # recent jobs are the interesting ones
        try:
            preview = self.gw.preview(OWNER, job_id, op)
        except UndogateError:
            return
        if preview.token is None:
            return
        job = self.gw.get_job(OWNER.owner_id, job_id)
        before = self.server.get_record(PATH)
        if fault:
            self.server.arm(fault, PATH)
        try:
            self.gw.confirm(OWNER, job_id, preview.token)
        except UndogateError:
            pass
        finally:
            self.server.clear_faults()
        after = self.server.get_record(PATH)
        if before == after or op is Operation.ACCEPT_OBSERVED:
            assert before == after or op is not Operation.ACCEPT_OBSERVED
            return
        # The gateway may only have replaced values it expected (no newer work lost).
        change = job.changes[0]
        expected_source = change.before if op is Operation.APPLY else change.after
        for name in FIELDS:
            if before.get(name) != after.get(name):
                assert name in change.fields
                assert before.get(name) == (expected_source or {}).get(name)

    @rule(field=st.sampled_from(FIELDS), value=VALUES)
    def outside_edit(self, field: str, value: str) -> None:
        self.server.set_field(PATH, f"/{field}", value)

    @rule()
    def restart(self) -> None:
        self.gw.http.close()
        self.gw.ledger.close()
        self.gw = self._open()

    @invariant()
    def every_write_has_a_receipt(self) -> None:
        with self.gw.ledger.raw() as c:
            recorded = c.execute(
                "SELECT COUNT(*) FROM actions WHERE status IN (?, ?, ?)",
                (
                    ActionStatus.DONE.value,
                    ActionStatus.UNCERTAIN.value,
                    ActionStatus.ACCEPTED.value,
                ),
            ).fetchone()[0]
        assert self.server.write_count(PATH) <= recorded

    @invariant()
    def states_follow_the_machine(self) -> None:
        with self.gw.ledger.raw() as c:
            rows = c.execute(
                "SELECT operation, from_state, to_state FROM events WHERE job_id IS NOT NULL "
                "AND (operation LIKE 'confirm_%' OR operation LIKE 'finish_%' OR operation IN "
                "('reject', 'reconciled', 'crash_recovered', 'invalidate'))"
            ).fetchall()
        for operation, src, dst in rows:
            assert (src, dst) in EDGES, (operation, src, dst)


GatewayModel.TestCase.settings = settings(
    max_examples=300 if THOROUGH else 40,
    stateful_step_count=40 if THOROUGH else 20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_gateway_model = GatewayModel.TestCase
