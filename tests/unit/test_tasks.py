"""Parsing the device API's Task: valid tasks pass, malformed ones fail with a code."""

from __future__ import annotations

from typing import Any

import pytest

from boss_agent.errors import TaskRejected
from boss_agent.tasks import MAX_PROMPT_CHARS, TaskResult, parse_task

VALID: dict[str, Any] = {
    "taskId": "tsk_1", "attempt": 1, "intentCategory": "conversation_reply",
    "prompt": "Fix the failing test", "projectId": "prj_1", "workdir": "/src/app",
    "codexThreadRef": None, "model": None, "approvalMode": "remote",
    "approvalPolicy": "on-request", "sandbox": "workspace-write", "createdAt": "2026-11-29T10:00:00Z",
    "someFutureField": {"ignored": True},
}


def test_a_contract_task_parses_and_unknown_fields_are_ignored() -> None:
    task = parse_task(VALID)
    assert task.task_id == "tsk_1"
    assert task.workdir == "/src/app"
    assert task.approval_policy == "on-request"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"taskId": None}, "invalid_task"),
        ({"taskId": 7}, "invalid_task"),
        ({"prompt": ""}, "invalid_task"),
        ({"prompt": ["not", "text"]}, "invalid_task"),
        ({"prompt": "x" * (MAX_PROMPT_CHARS + 1)}, "prompt_too_large"),
        ({"intentCategory": "launch_rockets"}, "unsupported_intent"),
        ({"attempt": "one"}, "invalid_task"),
        ({"sandbox": "root"}, "invalid_task"),
        ({"approvalMode": "yolo"}, "invalid_task"),
        ({"intentCategory": "thread_collaboration"}, "invalid_task"),
    ],
)
def test_a_malformed_task_is_rejected_with_a_device_api_code(change: dict[str, Any], code: str) -> None:
    with pytest.raises(TaskRejected) as info:
        parse_task({**VALID, **change})
    assert info.value.code == code


def test_a_non_object_task_is_rejected() -> None:
    with pytest.raises(TaskRejected):
        parse_task(["tsk_1"])


def test_the_task_repr_never_shows_the_prompt() -> None:
    assert "failing test" not in repr(parse_task(VALID))


def test_a_result_serializes_to_the_complete_body_of_the_contract() -> None:
    body = TaskResult(status="failed", backend="app_server", error_code="workdir_not_allowed",
                      error_message="workdir is outside the workspaces").to_wire()
    assert body["error"] == {"code": "workdir_not_allowed", "message": "workdir is outside the workspaces"}
    assert set(body) == {"status", "backend", "fallbackFrom", "codexThreadRef", "turnId", "resultText",
                         "error", "executionProgress"}
