"""The pure job state machine: every edge, and every illegal move refused."""

from __future__ import annotations

import itertools

import pytest

from undogate.errors import TransitionNotAllowed
from undogate.jobs import (
    TRANSITIONS,
    ChangeState,
    JobState,
    Transition,
    check_transition,
    state_after_apply,
    state_after_settling,
    state_after_undo,
)

EDGES = [
    (event, src, dst)
    for event, table in TRANSITIONS.items()
    for src, dsts in table.items()
    for dst in dsts
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
