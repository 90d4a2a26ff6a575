"""Finding 3: ``codex exec`` cannot ask for approvals, so it only runs tasks that ask nothing.

A task whose effective approval policy is not ``never`` used to fall back to exec when
the app-server was unavailable, and exec ran every command unasked. Now the task fails
``approval_unavailable`` and the card says why.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from tests.support.config import make_config
from tests.support.runner import Sink
from tests.support.runner import missing_app_server
from tests.support.security import hostile

pytestmark = [pytest.mark.codex]


@pytest.mark.parametrize("policy", ["untrusted", "on-request"])
async def test_a_command_needing_approval_never_runs_through_exec(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel,
        policy: str) -> None:
    config = make_config(tmp_path, codex_bin, **{"codex.max_approval_policy": "never"})
    marker = config.workspaces[0] / "ran-unasked"
    scripted_model.enqueue(sm.turn(sm.shell_call(f"touch {marker}")))
    scripted_model.enqueue(sm.text_reply("done"))
    sink = Sink()
    async with missing_app_server(tmp_path, codex_bin) as app:
        result = await Runner(config, app, codex_home=codex_home).run(
            hostile(approvalPolicy=policy), sink, asyncio.Event())
    assert result.status == "failed" and result.error_code == "approval_unavailable", result
    assert not marker.exists() and scripted_model.requests == []
    warnings = " ".join(w["message"] for w in result.execution_progress["warnings"])
    assert "cannot ask for approvals" in warnings


async def test_a_task_that_asks_nothing_still_runs_through_exec(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    config = make_config(tmp_path, codex_bin, **{"codex.max_approval_policy": "never"})
    marker = config.workspaces[0] / "ran-with-never"
    scripted_model.enqueue(sm.turn(sm.shell_call(f"touch {marker}")))
    scripted_model.enqueue(sm.text_reply("done"))
    async with missing_app_server(tmp_path, codex_bin) as app:
        result = await Runner(config, app, codex_home=codex_home).run(
            hostile(approvalPolicy="never"), Sink(), asyncio.Event())
    assert result.status == "completed" and result.backend == "exec", result
    assert marker.exists()
