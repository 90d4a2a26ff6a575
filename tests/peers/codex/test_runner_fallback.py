"""The exec fallback and its boundary: codex exec runs only when no app-server turn started."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psutil
import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.appserver.client import AppServer
from boss_agent.appserver.methods import AppServerClient
from boss_agent.runner import Runner
from boss_agent.tasks import Task
from tests.support.config import make_config
from tests.support.runner import Sink, missing_app_server
from tests.support.waits import eventually

pytestmark = [
    pytest.mark.codex,
]


async def test_without_an_app_server_codex_exec_runs_the_task_and_resumes_its_thread(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    # exec cannot ask, so it runs only tasks the owner lets run unasked.
    config = make_config(tmp_path, codex_bin, **{"codex.approval_policy": "never",
                                                 "codex.max_approval_policy": "never"})
    scripted_model.enqueue(sm.text_reply("from exec"))
    scripted_model.enqueue(sm.text_reply("resumed in exec"))
    async with missing_app_server(tmp_path, codex_bin) as app:
        runner = Runner(config, app, codex_home=codex_home)
        sink = Sink()
        result = await runner.run(Task("t-exec", "first prompt"), sink, asyncio.Event())
        assert result.status == "completed", result
        assert (result.backend, result.fallback_from) == ("exec", "app_server")
        assert result.result_text == "from exec" and result.codex_thread_ref
        card = result.execution_progress
        assert card["backend"] == "exec" and card["status"] == "completed"
        assert any(w["kind"] == "fallback" for w in card["warnings"])
        again = await runner.run(Task("t-exec-2", "second prompt", codex_thread_ref=result.codex_thread_ref),
                                 Sink(), asyncio.Event())
    assert again.status == "completed" and again.result_text == "resumed in exec"
    assert again.codex_thread_ref == result.codex_thread_ref
    texts = scripted_model.requests[-1].input_texts()
    assert "first prompt" in texts and texts[-1] == "second prompt"
    assert texts.count("second prompt") == 1  # the prompt came once (stdin `-`, nothing appended)


async def test_without_an_app_server_and_no_exec_fallback_the_task_fails_cleanly(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    config = make_config(tmp_path, codex_bin, **{"codex.fallback": ["cua"]})
    async with missing_app_server(tmp_path, codex_bin) as app:
        result = await Runner(config, app, codex_home=codex_home).run(Task("t-none", "x"), Sink(),
                                                                      asyncio.Event())
    assert result.status == "failed" and result.error_code == "app_server_unavailable"
    assert scripted_model.requests == []


def _app_server_processes() -> list[psutil.Process]:
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "app-server" in proc.cmdline():
                found.append(proc)
        except psutil.Error:
            continue
    return found


async def test_an_app_server_lost_after_the_turn_started_fails_the_task_and_never_runs_exec(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    config = make_config(tmp_path, codex_bin)
    scripted_model.enqueue(sm.hang(sm.message("half an answer")))
    scripted_model.enqueue(sm.text_reply("exec would have answered this"))
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        runner = Runner(config, app, codex_home=codex_home)
        async with asyncio.TaskGroup() as tg:
            running = tg.create_task(runner.run(Task("t-lost", "long job"), Sink(), asyncio.Event()))
            await eventually(lambda: scripted_model.requests)  # the turn reached the model
            for proc in _app_server_processes():
                proc.kill()
    result: Any = running.result()
    assert result.status == "failed" and result.error_code == "app_server_lost"
    assert result.backend == "app_server" and result.fallback_from is None
    assert len(scripted_model.requests) == 1
    assert all(r.headers.get("originator") != "codex_exec" for r in scripted_model.requests)


async def test_an_app_server_lost_before_the_turn_is_waited_for_and_the_task_runs_on_its_restart(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """codex dies while thread/start is in flight (seen under the chaos schedule): no turn
    was sent, so the runner waits for the supervisor's restart and runs the task there,
    instead of failing it (exec cannot ask under on-request) or handing it to exec."""
    config = make_config(tmp_path, codex_bin)  # approval policy on-request: exec may not run it
    scripted_model.enqueue(sm.text_reply("answered after the restart"))
    original = AppServerClient.thread_start
    killed: list[int] = []

    async def dies_under_the_first_thread_start(self: AppServerClient, **params: Any) -> dict[str, Any]:
        if not killed:
            for proc in _app_server_processes():  # the real codex child, SIGKILL
                killed.append(proc.pid)
                proc.kill()
        return await original(self, **params)

    monkeypatch.setattr(AppServerClient, "thread_start", dies_under_the_first_thread_start)
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        runner = Runner(config, app, codex_home=codex_home)
        result = await runner.run(Task("t-restart", "job"), Sink(), asyncio.Event())
        restarts = app.restarts
    assert killed
    assert result.status == "completed", result
    assert restarts == 1
    assert (result.backend, result.fallback_from) == ("app_server", None)
    assert result.result_text == "answered after the restart"
    assert len(scripted_model.requests) == 1  # one turn, on the restarted app-server
    assert all(r.headers.get("originator") != "codex_exec" for r in scripted_model.requests)


async def test_an_exec_follow_up_runs_under_the_limits_of_now_not_its_thread_s_first(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel,
        outside_tmp: Path) -> None:
    """``codex exec resume`` takes its folder and sandbox from the follow-up: a thread that
    began with full access in ``a`` continues, after the owner narrowed the device to
    ``b`` and workspace-write, in ``b`` without write access outside it; and a follow-up
    naming no folder is refused, since its thread's folder is no workspace any more."""
    root = tmp_path / "ws"
    first, second = root / "a", root / "b"
    never = {"codex.approval_policy": "never", "codex.max_approval_policy": "never"}
    loose = make_config(tmp_path, codex_bin, **never, **{"codex.sandbox": "danger-full-access",
                                                         "codex.max_sandbox": "danger-full-access"})
    first.mkdir()
    second.mkdir()
    scripted_model.enqueue(sm.turn(sm.shell_call(f"touch first.txt {outside_tmp}/first.txt")), sm.text_reply("one"))
    scripted_model.enqueue(sm.turn(sm.shell_call(f"pwd; touch here.txt {outside_tmp}/second.txt")),
                           sm.text_reply("two"))
    async with missing_app_server(tmp_path, codex_bin) as app:
        runner = Runner(loose, app, codex_home=codex_home)
        begun = await runner.run(Task("t-x1", "first", workdir=str(first)), Sink(), asyncio.Event())
        assert begun.status == "completed" and begun.backend == "exec", begun
        assert (first / "first.txt").exists() and (outside_tmp / "first.txt").exists()
        runner.config = make_config(tmp_path, codex_bin, workspace=second, **never)  # what a reload does
        unplaced = await runner.run(Task("t-x2", "where?", codex_thread_ref=begun.codex_thread_ref),
                                    Sink(), asyncio.Event())
        assert (unplaced.status, unplaced.error_code) == ("failed", "workdir_not_allowed")
        moved = await runner.run(Task("t-x3", "second", workdir=str(second), sandbox="danger-full-access",
                                      codex_thread_ref=begun.codex_thread_ref), Sink(), asyncio.Event())
    output = list(scripted_model.requests[-1].tool_outputs().values())[-1]
    assert moved.status == "completed" and moved.codex_thread_ref == begun.codex_thread_ref, moved
    assert (second / "here.txt").exists() and not (first / "here.txt").exists(), output
    assert not (outside_tmp / "second.txt").exists(), output
    assert any("workspace-write" in w["message"] for w in moved.execution_progress["warnings"])
    assert moved.execution_progress["threadSettings"]["sandbox"] == "workspace-write"
