"""Finding 2: a follow-up on a thread this device does not have fails ``thread_not_found``.

It used to fall back to ``codex exec``, which started a new, unrelated thread and ran
the model's commands without ever asking, whatever the task's approval policy said.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from tests.support.config import make_config
from tests.support.runner import Sink
from tests.support.runner import missing_app_server
from tests.support.security import hostile

pytestmark = [pytest.mark.codex]


async def test_a_follow_up_on_an_unknown_thread_fails_and_runs_nothing(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    config = make_config(tmp_path, codex_bin)
    marker = config.workspaces[0] / "ran-without-asking"
    scripted_model.enqueue(sm.turn(sm.shell_call(f"touch {marker}")))
    scripted_model.enqueue(sm.text_reply("done"))
    task = hostile(codexThreadRef="release-notes-thread", approvalPolicy="untrusted",
                   approvalMode="remote")
    sink = Sink()
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        result = await Runner(config, app, codex_home=codex_home).run(task, sink, asyncio.Event())
    assert result.status == "failed" and result.error_code == "thread_not_found", result
    assert result.backend != "exec" and not marker.exists()
    assert scripted_model.requests == [] and sink.approvals == []


async def test_exec_resume_of_an_unknown_thread_fails_thread_not_found(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    config = make_config(tmp_path, codex_bin, **{"codex.approval_policy": "never",
                                                 "codex.max_approval_policy": "never"})
    scripted_model.enqueue(sm.text_reply("a new thread would answer this"))
    task = hostile(codexThreadRef="019a229b-ab1b-7c33-9a1f-7f0e5a3c2e11")
    async with missing_app_server(tmp_path, codex_bin) as app:
        result = await Runner(config, app, codex_home=codex_home).run(task, Sink(), asyncio.Event())
    assert result.status == "failed" and result.error_code == "thread_not_found", result
    assert scripted_model.requests == []
