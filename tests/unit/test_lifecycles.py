"""Every lifecycle table, walked: each listed move is accepted, every other pair raises.

And the tables are the only way a status moves: no code assigns one around them, the
control plane's queue names its statuses from its table, and the card refuses a field
it does not have (a typo must not pass as a message codex sent in an unknown shape).
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path
from typing import Any, get_args

import pytest

import boss_agent
from boss_agent.errors import BossAgentError, IllegalTransition, UnknownCardField
from boss_agent.lifecycles import (
    EXECUTION,
    EXECUTION_OF,
    LIFECYCLES,
    QUEUE,
    QUEUE_FINISHED,
    TASK,
    TERMINAL,
    TERMINAL_EXECUTION,
    ExecutionStatus,
    QueueStatus,
    TaskStatus,
)
from boss_agent.progress import reducer
from boss_agent.progress.card import Card, new_card
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


# --- nothing moves a status around its table ------------------------------------------

ROOT = Path(boss_agent.__file__).parent
STATUS_ENUMS = {"TaskStatus", "ExecutionStatus", "SupervisorState", "DaemonPhase", "QueueStatus"}


def _direct_assignments(tree: ast.AST) -> list[int]:
    """Lines assigning ``<StatusEnum>.<MEMBER>`` to an attribute outside ``__init__``."""
    found: list[int] = []

    def visit(node: ast.AST, in_init: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name == "__init__")
                continue
            if isinstance(child, ast.Assign | ast.AnnAssign) and not in_init:
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                value = child.value
                if (any(isinstance(t, ast.Attribute) for t in targets) and isinstance(value, ast.Attribute)
                        and isinstance(value.value, ast.Name) and value.value.id in STATUS_ENUMS):
                    found.append(child.lineno)
            visit(child, in_init)

    visit(tree, False)
    return found


def test_no_status_is_assigned_directly_outside_a_constructor() -> None:
    # A move goes through its table's ``check`` (AppServer.__aexit__ once wrote STOPPED by hand).
    offenders = {str(path.relative_to(ROOT)): lines for path in sorted(ROOT.rglob("*.py"))
                 if (lines := _direct_assignments(ast.parse(path.read_text())))}
    assert offenders == {}


def test_the_control_plane_queue_names_its_statuses_from_the_table_not_as_sql_literals() -> None:
    source = (ROOT / "controlplane" / "queue.py").read_text()
    literals = re.findall(r"'(" + "|".join(QueueStatus) + r")'", source)
    assert literals == []


def test_the_queue_table_retries_only_an_abandoned_or_failed_task_and_a_late_result_is_taken() -> None:
    assert {s for s in QueueStatus if QUEUE.moves_to(s, QueueStatus.QUEUED)} == {
        QueueStatus.ABANDONED, QueueStatus.FAILED}
    assert QUEUE.moves_to("abandoned", "completed") and not QUEUE.moves_to("queued", "completed")
    assert not QUEUE.moves_to("running", "no-such-status")
    assert QUEUE_FINISHED == {*TERMINAL, QueueStatus.ABANDONED}


# --- the card refuses a field it does not have ------------------------------------------

def test_evolving_a_card_with_a_misspelt_field_raises_instead_of_storing_it() -> None:
    card = new_card()
    with pytest.raises(UnknownCardField, match="answr"):
        card.evolve(answr="typo")
    assert card.evolve(answer="fine").answer == "fine"


def test_a_reducer_handler_with_a_misspelt_card_field_raises_out_of_the_reducer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def writes_a_typo(card: Card, params: Any) -> Card:
        return card.evolve(answr="typo")

    def reads_a_typo(card: Card, params: Any) -> Card:
        return card.evolve(answer=card.answr)  # type: ignore[attr-defined]

    message = {"method": "thread/started", "params": {"thread": {"id": "t"}}}
    for handler in (writes_a_typo, reads_a_typo):
        monkeypatch.setitem(reducer.NOTIFICATIONS, "thread/started", (handler, "a test's bug"))
        with pytest.raises((UnknownCardField, AttributeError)):
            reducer.reduce(new_card(), message)
    # A message of a shape codex never promised is still only counted, never raised.
    monkeypatch.setitem(reducer.NOTIFICATIONS, "thread/started", (lambda card, params: params.nope, "x"))
    assert reducer.reduce(new_card(), message).ignored_count == 1
