"""The pure job state machine: every edge, and every illegal move refused."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from undogate.cli.inbox import COUNT_WORDS
from undogate.cli.review import SETTLED_OK
from undogate.errors import TransitionNotAllowed
from undogate.jobs import (
    STATES,
    TRANSITIONS,
    ChangeState,
    JobState,
    Transition,
    check_transition,
    require_start,
    state_after_apply,
    state_after_settling,
    state_after_undo,
)
from undogate.mcp.descriptions import JOB_STATUS_DESCRIPTION
from undogate.operations.inbox import VIEW_WORDS, VIEWS
from undogate.web.present import NAV_COUNTS_SHOWN, STATE_WORDS
from undogate.webhooks.settings import AGENT_RESUMED, AGENT_STOPPED, EVENTS, REWIND_APPLIED

EDGES = [
    (event, src, dst)
    for event, table in TRANSITIONS.items()
    for src, dsts in table.items()
    for dst in sorted(dsts)  # one order in every process: the parallel workers compare theirs
]


@pytest.mark.parametrize(("event", "src", "dst"), EDGES)
def test_every_declared_edge_is_allowed(event: Transition, src: JobState, dst: JobState) -> None:
    check_transition(event, src, dst)


def test_every_undeclared_move_is_refused() -> None:
    refused = 0
    for event, src, dst in itertools.product(TRANSITIONS, JobState, JobState):
        if dst in TRANSITIONS[event].get(src, frozenset()):
            continue
        with pytest.raises(TransitionNotAllowed):
            check_transition(event, src, dst)
        refused += 1
    assert refused > 500


def test_terminal_states_have_no_way_out() -> None:
    for state in (JobState.UNDONE, JobState.REJECTED, JobState.INVALIDATED):
        assert all(state not in table for table in TRANSITIONS.values())


def test_message_names_the_event_and_state() -> None:
    with pytest.raises(TransitionNotAllowed, match="Can't reject when in applied"):
        check_transition(Transition.REJECT, JobState.APPLIED, JobState.REJECTED)


def test_a_job_whose_write_is_in_flight_is_refused_with_what_is_true_of_it() -> None:
    expires_at = 1_796_327_000.25  # 2026-12-03 19:43:20 UTC
    for event in (Transition.ACCEPT_OBSERVED, Transition.START_UNDO, Transition.REJECT):
        with pytest.raises(TransitionNotAllowed) as refused:
            require_start(event, JobState.APPLYING, lease_expires_at=expires_at)
        said = refused.value.message
        assert said.startswith(f"Can't {event.value.replace('_', ' ')} yet: ")
        assert "a gateway process is writing this job's changes (applying), or it " in said
        assert "stopped while writing them" in said
        assert "settles the write as uncertain once its lease expires, at " in said
        assert "2026-12-03 19:43:20 UTC; the observed state can be accepted then" in said
        assert refused.value.code == "transition_not_allowed"
        assert refused.value.details == {
            "event": event.value,
            "state": "applying",
            "lease_expires_at": expires_at,
        }
    with pytest.raises(TransitionNotAllowed) as refused:  # the ledger knows no lease
        check_transition(Transition.REJECT, JobState.UNDOING, JobState.REJECTED)
    assert "(undoing)" in refused.value.message
    assert "as uncertain once its lease expires; the observed state" in refused.value.message
    assert "lease_expires_at" not in refused.value.details


def test_a_move_a_running_job_can_make_keeps_its_plain_refusal() -> None:
    """Finishing an apply may start from applying: a wrong target is the gateway's own
    mistake, not a write in flight."""
    with pytest.raises(TransitionNotAllowed) as refused:
        check_transition(Transition.FINISH_APPLY, JobState.APPLYING, JobState.UNDONE)
    assert refused.value.message == "Can't finish apply when in applying"


A, P, U, Q = ChangeState.APPLIED, ChangeState.PENDING, ChangeState.UNDONE, ChangeState.UNCERTAIN


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ([A, A], JobState.APPLIED),
        ([A, P], JobState.PARTIALLY_APPLIED),
        ([P, P], JobState.PREPARED),
        ([A, Q], JobState.NEEDS_REVIEW),
    ],
)
def test_state_after_apply(changes: list[ChangeState], expected: JobState) -> None:
    assert state_after_apply(changes) is expected


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ([U, U], JobState.UNDONE),
        ([A, U], JobState.PARTIALLY_UNDONE),
        ([A, A], JobState.APPLIED),
        ([U, Q], JobState.NEEDS_REVIEW),
        ([U, P], JobState.UNDONE),
    ],
)
def test_state_after_undo(changes: list[ChangeState], expected: JobState) -> None:
    assert state_after_undo(changes, JobState.APPLIED) is expected


def test_state_after_settling() -> None:
    assert state_after_settling([P, P], undo_started=False) is JobState.PREPARED
    assert state_after_settling([A, P], undo_started=False) is JobState.PARTIALLY_APPLIED
    assert state_after_settling([U, A], undo_started=True) is JobState.PARTIALLY_UNDONE
    assert state_after_settling([U, U], undo_started=True) is JobState.UNDONE


# -- the state table: what each state means, read by every surface ---------------------

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_state_has_its_facts() -> None:
    assert list(STATES) == list(JobState)  # every state, in the machine's order
    for state, facts in STATES.items():
        assert facts.words and facts.for_agent, state
        # A state the inbox lists as waiting is work a person owes: the quotas count it.
        assert (facts.inbox_view is None) == (facts.waiting_words is None), state
        assert facts.inbox_view is None or facts.unresolved, state
        assert not (facts.terminal and (facts.unresolved or facts.running)), state


def test_every_surface_reads_each_state_from_the_table() -> None:
    """The pages, the CLI, the inbox, webhooks and an agent's ``job_status`` text each
    cover every state the table gives them; a state missing anywhere fails here."""
    assert set(STATE_WORDS) == set(JobState)
    assert {s.value for s in JobState if STATES[s].ends_well} == SETTLED_OK
    for state, facts in STATES.items():
        assert f"- `{state.value}`: {facts.for_agent}" in JOB_STATUS_DESCRIPTION
        if facts.webhook is not None:
            assert facts.webhook in EVENTS, state
        if facts.inbox_view is not None:
            assert state in VIEWS[facts.inbox_view][0] and facts.inbox_view in VIEW_WORDS
            assert (state.value, facts.waiting_words[0]) in COUNT_WORDS  # type: ignore[index]
            assert (state.value, *facts.waiting_words, facts.inbox_view) in NAV_COUNTS_SHOWN  # type: ignore[misc]
    # Beyond the states' events: a rewind plan's run, an agent stopped and resumed
    # (docs/rewind.md).
    beyond = {REWIND_APPLIED, AGENT_STOPPED, AGENT_RESUMED}
    assert set(EVENTS) == {f.webhook for f in STATES.values() if f.webhook} | beyond


def test_the_docs_name_every_state_and_every_event() -> None:
    machine = (DOCS / "state-machine.md").read_text(encoding="utf-8")
    webhooks = (DOCS / "webhooks.md").read_text(encoding="utf-8")
    for state, facts in STATES.items():
        assert re.search(rf"\b{state.value}\b", machine), state
        if facts.webhook is not None:
            row = re.search(rf"^\| `{re.escape(facts.webhook)}` \|.*$", webhooks, re.M)
            assert row is not None and f"`{state.value}`" in row.group(0), state
