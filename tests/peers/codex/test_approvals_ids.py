"""Approval ids are per attempt and per app-server connection (real codex).

codex numbers its server requests from 0 on every connection, and the item id is
the model's call id, so a retried task on a restarted app-server asks "request 0
for call_x" again. Before the fix both attempts got the same approval id, and the
control plane handed attempt 2 attempt 1's decision.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from boss_agent.runner.approval_requests import approval_id
from boss_agent.tasks import ApprovalRequest, Task
from tests.support.runner import Sink, module_env

pytestmark = pytest.mark.codex


def _script(model: sm.ScriptedModel) -> None:
    model.enqueue(sm.turn(sm.shell_call("touch again.txt", call_id="call_same")),
                  sm.text_reply("done"))


async def _attempt(env: dict[str, Any], attempt: int, work: Path) -> ApprovalRequest:
    async def accept(_request: ApprovalRequest) -> str:
        return "accept"

    sink = Sink(accept)
    async with AppServer.from_config(env["config"], codex_home=env["home"]) as app:  # a new connection
        runner = Runner(env["config"], app, codex_home=env["home"])
        task = Task("t-retried", "make a file", workdir=str(work), approval_policy="untrusted",
                    attempt=attempt)
        result = await runner.run(task, sink, asyncio.Event())
    assert result.status == "completed", result
    (asked,) = sink.approvals
    return asked


async def test_a_retried_task_on_a_new_connection_asks_under_a_new_approval_id(
        tmp_path: Path, codex_bin: str) -> None:
    with sm.ScriptedModel() as model:
        env = module_env(tmp_path, model, codex_bin)
        work = env["root"] / "retry"
        work.mkdir()
        _script(model)
        first = await _attempt(env, 1, work)
        _script(model)
        second = await _attempt(env, 2, work)
    assert first.approval_id != second.approval_id


def test_the_id_depends_on_attempt_connection_and_request() -> None:
    base = approval_id("t", 1, "conn-a", 0)
    assert base == approval_id("t", 1, "conn-a", 0)  # a re-delivery maps to the same approval
    assert len({base, approval_id("t", 2, "conn-a", 0), approval_id("t", 1, "conn-b", 0),
                approval_id("t", 1, "conn-a", 1), approval_id("u", 1, "conn-a", 0)}) == 5
