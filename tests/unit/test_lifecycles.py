"""Every lifecycle table, walked: each listed move is accepted, every other pair raises."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest

from boss_agent.errors import BossAgentError, IllegalTransition
from boss_agent.lifecycles import (
    EXECUTION,
    EXECUTION_OF,
    LIFECYCLES,
    TASK,
    TERMINAL,
    TERMINAL_EXECUTION,
    ExecutionStatus,
    TaskStatus,
)
from boss_agent.tasks import Status

TABLES = {lifecycle.name: lifecycle for lifecycle in LIFECYCLES}


@pytest.mark.parametrize("name", TABLES)
def test_every_move_in_the_table_is_accepted_and_every_other_raises(name: str) -> None:
    lifecycle = TABLES[name]
    assert set(lifecycle.moves) == set(lifecycle.kind), "every status has a row"
    for old, new in itertools.permutations(lifecycle.kind, 2):
        if new in lifecycle.moves[old]:
            assert lifecycle.check(old, new) is new
        else:
            with pytest.raises(IllegalTransition) as caught:
                lifecycle.check(old, new)
            assert (caught.value.old, caught.value.new) == (old, new)


@pytest.mark.parametrize("name", TABLES)
def test_staying_in_a_status_is_not_a_move_and_an_unknown_spelling_raises(name: str) -> None:
    lifecycle = TABLES[name]
    for status in lifecycle.kind:
        assert lifecycle.check(status, status) is status
        assert lifecycle.check(str(status), str(status)) is status  # the wire string works too
    first = next(iter(lifecycle.kind))
    with pytest.raises(IllegalTransition):
        lifecycle.check(first, "no-such-status")


def test_a_terminal_status_is_final_in_both_spellings() -> None:
    for status in TERMINAL:
        assert TASK.moves[status] == frozenset()
        assert EXECUTION.moves[EXECUTION_OF[status]] == frozenset()
    assert TERMINAL_EXECUTION == {ExecutionStatus.COMPLETED, ExecutionStatus.FAILED,
                                  ExecutionStatus.CANCELLED}
    assert set(EXECUTION_OF) == set(TaskStatus)


def test_an_illegal_transition_is_part_of_the_one_exception_tree() -> None:
    assert issubclass(IllegalTransition, BossAgentError)
    assert "completed" in str(IllegalTransition("task status", "completed", "running"))


def test_the_typed_result_status_is_the_terminal_set() -> None:
    # tasks.Status is the Literal mypy checks TaskResult.status against; it must not drift.
    assert set(get_args(Status)) == set(TERMINAL)
