"""A model-based test: random sequences of prepare, preview, confirm, undo, rewind
plans, outside edits, server faults and restarts against the real contract server and
ledger, through two gateways sharing that ledger (each with its own connections and
lease, as two processes hold them): every step goes through one or the other, and a
restart restarts one while the other keeps its work.

After every step: no value the gateway did not expect was overwritten, every write the
server took has an action in the ledger, and every recorded state change is an edge of
the state machine. It runs on a SQLite ledger and on a PostgreSQL one (a fresh database
per sequence, and fewer sequences). ``UNDOGATE_THOROUGH=1`` runs many more
sequences on both.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from undogate.config import Config
from undogate.contract_server import ContractServer
from undogate.errors import UndogateError
from undogate.jobs import TRANSITIONS, ActionStatus, ChangeRequest, Operation, PrepareRequest
from undogate.jsonvalue import JsonObject
from undogate.ledger import open_store
from undogate.net import PinnedClient
from undogate.operations.rewind import confirm_plan, create_plan, load_plan, preview_plan
from undogate.operations.rewind_plan import Selection, StepVerdict

from .postgres import PostgresCluster
from .worlds import AGENT, OWNER, LocalGateway, make_config, resource

pytestmark = pytest.mark.slow

PATH = "/records/customer-123"
FIELDS = ("status", "owner")
VALUES = st.sampled_from(["a", "b", "c", "d"])
VIA = st.integers(min_value=0, max_value=1)  # which of the two gateways
THOROUGH = os.environ.get("UNDOGATE_THOROUGH") == "1"
#: What an action that may have reached the server ends as.
WROTE = (ActionStatus.DONE, ActionStatus.UNCERTAIN, ActionStatus.ACCEPTED)
#: The events that move a job from one state to another.
MOVES = ("confirm_", "finish_")
OTHER_MOVES = ("reject", "reconciled", "crash_recovered", "invalidate")
EDGES = {
    (src.value, dst.value) for t in TRANSITIONS.values() for src, dsts in t.items() for dst in dsts
}


class GatewayModel(RuleBasedStateMachine):
    """One sequence; ``fresh_ledger`` gives a new PostgreSQL database's URL (else the
    ledger is SQLite under a temporary directory)."""

    def __init__(self, fresh_ledger: Callable[[], str] | None = None) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.server = ContractServer(None, faults=True, hang_seconds=2).start()
        on_postgres = {"ledger": fresh_ledger()} if fresh_ledger else {}
        self.config: Config = make_config(
            self.server,
            Path(self.tmp.name) / "data",
            resource(self.server, "customer", PATH, fields=list(FIELDS)),
            **on_postgres,
        )
        self.gws = [self._open(), self._open()]
        self.jobs: list[str] = []

    @property
    def gw(self) -> LocalGateway:
        """The gateway the invariants read through (either sees the one ledger)."""
        return self.gws[0]

    def _open(self) -> LocalGateway:
        ledger = open_store(self.config.server)
        gw = LocalGateway(config=self.config, ledger=ledger, http=PinnedClient(request_timeout_s=1))
        gw.recover()
        return gw

    def teardown(self) -> None:
        for gw in self.gws:
            gw.http.close()
            gw.ledger.close()
        self.server.stop()
        self.tmp.cleanup()

    @initialize()
    def start(self) -> None:
        self.server.reset()

    @rule(status=st.none() | VALUES, owner=st.none() | VALUES, via=VIA)
    def prepare(self, status: str | None, owner: str | None, via: int) -> None:
        values: JsonObject = {k: v for k, v in (("status", status), ("owner", owner)) if v}
        if not values:
            return
        req = PrepareRequest("model", (ChangeRequest(resource_id="customer", set=values),))
        with contextlib.suppress(UndogateError):
            self.jobs.append(self.gws[via].prepare(AGENT, "account-assistant", req).job.id)

    @precondition(lambda self: bool(self.jobs))
    @rule(
        pick=st.integers(min_value=0, max_value=2),
        op=st.sampled_from([Operation.APPLY, Operation.UNDO, Operation.ACCEPT_OBSERVED]),
        fault=st.sampled_from(
            [None, None, None, "status:409", "apply_then_500", "ok_without_apply"]
        ),
        shown_by=VIA,
        confirmed_by=VIA,
    )
    def operate(
        self, pick: int, op: Operation, fault: str | None, shown_by: int, confirmed_by: int
    ) -> None:
        job_id = self.jobs[-1 - pick % len(self.jobs)]  # recent jobs are the interesting ones
        try:
            preview = self.gws[shown_by].preview(OWNER, job_id, op)
        except UndogateError:
            return
        if preview.token is None:
            return
        job = self.gw.get_job(OWNER.owner_id, job_id)
        before = self.server.get_record(PATH)
        if fault:
            self.server.arm(fault, PATH)
        try:
            self.gws[confirmed_by].confirm(OWNER, job_id, preview.token)
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
        assert isinstance(expected_source, dict)  # a record's side: never absent here
        for name in FIELDS:
            if before.get(name) != after.get(name):
                assert name in change.fields
                assert before.get(name) == expected_source.get(name)

    @precondition(lambda self: bool(self.jobs))
    @rule(
        skip_blocked=st.booleans(),
        fault=st.sampled_from([None, None, "status:409", "apply_then_500"]),
    )
    def rewind(self, skip_blocked: bool, fault: str | None) -> None:
        """A rewind plan of all the agent's work (docs/rewind.md)."""
        try:
            plan = create_plan(self.gw, OWNER, Selection("account-assistant", 0.0))
            preview = preview_plan(self.gw, OWNER, plan)
        except UndogateError:
            return
        undos = [s for s in preview.plan.steps if s.verdict is StepVerdict.UNDO]
        changes = [self.gw.get_job(OWNER.owner_id, s.job_id).changes[s.change] for s in undos]
        before = self.server.get_record(PATH)
        if fault:
            self.server.arm(fault, PATH)
        try:
            fresh = load_plan(self.gw, OWNER.owner_id, plan.id)
            confirm_plan(self.gw, OWNER, fresh, preview.token, skip_blocked=skip_blocked)
        except UndogateError:
            pass
        finally:
            self.server.clear_faults()
        after = self.server.get_record(PATH)
        # A field the plan changed held what its newest undone change wrote, and now
        # holds what one of its undone changes found: never newer work lost.
        for name in FIELDS:
            if before.get(name) != after.get(name):
                touching = [c for c in changes if name in c.fields]
                assert touching, name
                assert isinstance(touching[0].after, dict)
                assert before.get(name) == touching[0].after.get(name)
                found = [c.before.get(name) for c in touching if isinstance(c.before, dict)]
                assert after.get(name) in found

    @rule(field=st.sampled_from(FIELDS), value=VALUES)
    def outside_edit(self, field: str, value: str) -> None:
        self.server.set_field(PATH, f"/{field}", value)

    @rule(via=VIA)
    def restart(self, via: int) -> None:
        gw = self.gws[via]
        gw.http.close()
        gw.ledger.close()
        self.gws[via] = self._open()

    # Only the jobs in self.jobs can have actions: a confirm is only ever asked of them.
    # Read through the store protocol, so the invariants hold the same on either engine.

    @invariant()
    def every_write_has_a_receipt(self) -> None:
        recorded = 0
        for job_id in self.jobs:
            job = self.gw.ledger.load_job(job_id)
            assert job is not None
            recorded += sum(a.status in WROTE for a in job.actions)
        assert self.server.write_count(PATH) <= recorded

    @invariant()
    def states_follow_the_machine(self) -> None:
        for job_id in self.jobs:
            for e in self.gw.ledger.events(job_id):
                if e.operation.startswith(MOVES) or e.operation in OTHER_MOVES:
                    assert (e.from_state, e.to_state) in EDGES, (e.operation, e)


def _settings(examples: int, thorough: int) -> settings:
    return settings(
        max_examples=thorough if THOROUGH else examples,
        stateful_step_count=40 if THOROUGH else 20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


GatewayModel.TestCase.settings = _settings(40, thorough=300)
test_gateway_model = GatewayModel.TestCase


def test_gateway_model_on_postgresql(postgres_cluster: PostgresCluster) -> None:
    # Fewer sequences: the same engine code runs, on a second ledger engine, and each
    # sequence makes a database (300 thorough ones outlast the 5-minute test timeout).
    run_state_machine_as_test(
        # Hypothesis takes any factory of a machine; its hints name only the class.
        lambda: GatewayModel(postgres_cluster.fresh_database),  # type: ignore[arg-type]
        settings=_settings(15, thorough=100),
    )
