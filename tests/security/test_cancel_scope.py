"""Finding 5: cancelling a task ends that turn's commands and nothing else.

The sweep used to kill every daemon descendant whose cwd lay in the workdir (so two
tasks in one repository killed each other's commands) and every "pid" the app-server
reported (codex's ``processId`` is a session number, not an OS pid), even when that
app-server was a remote one. The turn's commands are now found by the
``CODEX_THREAD_ID``/``CODEX_TOOL_CALL_ID`` codex puts in their environment, inside our
own app-server child's tree only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from boss_agent.tasks import TaskResult
from tests.support.config import make_config
from tests.support.runner import Sink, sleepers
from tests.support.security import hostile
from tests.support.appserver import Listener
from tests.support.waits import eventually

pytestmark = [pytest.mark.codex]


def _background_sleep_turn(model: sm.ScriptedModel, seconds: str) -> None:
    """The command yields to the model and runs on as a background session, which codex
    leaves running after an interrupt; the turn then waits on the model."""
    model.enqueue(sm.turn(sm.shell_call(f"sleep {seconds}", yield_time_ms=250)))
    model.enqueue(sm.hang(sm.message("still thinking")))


def _alive(proc: psutil.Process) -> bool:
    try:  # a killed child of codex stays a zombie until codex reaps it
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _sleep(marker: str) -> list[psutil.Process]:
    return [proc for proc in sleepers(f"sleep {marker}") if proc.name() == "sleep" and _alive(proc)]


@pytest.fixture
def reaper() -> Iterator[list[str]]:
    """Sleep markers this test leaves running on purpose; ended afterwards."""
    markers: list[str] = []
    yield markers
    for marker in markers:
        for proc in sleepers(f"sleep {marker}"):
            proc.kill()


async def _run(runner: Runner, workdir: Path, task_id: str, cancel: asyncio.Event) -> TaskResult:
    return await runner.run(hostile(taskId=task_id, workdir=str(workdir)), Sink(), cancel)


async def test_cancelling_one_task_leaves_the_other_task_s_command_in_the_same_workdir_running(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel,
        reaper: list[str]) -> None:
    config = make_config(tmp_path, codex_bin)
    workdir = config.workspaces[0]
    first, second = "31.1111", "31.2222"
    reaper.extend([first, second])
    cancel_first, cancel_second = asyncio.Event(), asyncio.Event()
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        runner = Runner(config, app, codex_home=codex_home)
        async with asyncio.TaskGroup() as tg:
            _background_sleep_turn(scripted_model, first)
            one = tg.create_task(_run(runner, workdir, "t-one", cancel_first))
            await eventually(lambda: _sleep(first) and len(scripted_model.requests) >= 2)
            _background_sleep_turn(scripted_model, second)
            two = tg.create_task(_run(runner, workdir, "t-two", cancel_second))
            await eventually(lambda: _sleep(second) and len(scripted_model.requests) >= 4)
            cancel_first.set()
            assert (await one).status == "cancelled"
            # SIGKILL is sent before the result; the kernel ends the process soon after.
            await eventually(lambda: _sleep(first) == [])
            assert _sleep(second), "the other task's command was killed"
            cancel_second.set()
        scripted_model.release()
        assert two.result().status == "cancelled"
        await eventually(lambda: _sleep(second) == [])


async def _cancel_background_sleep(config: Any, codex_home: Path, model: sm.ScriptedModel,
                                   marker: str, *, ended: bool) -> list[psutil.Process]:
    """Run a turn that leaves ``sleep marker`` in the background, cancel it; its sleepers."""
    _background_sleep_turn(model, marker)
    cancel = asyncio.Event()
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        runner = Runner(config, app, codex_home=codex_home)
        async with asyncio.TaskGroup() as tg:
            running = tg.create_task(_run(runner, config.workspaces[0], f"t-{marker}", cancel))
            # The command yielded and the model waits: the turn is active, the command runs on.
            sleepers = await eventually(lambda: _sleep(marker) and len(model.requests) >= 2 and _sleep(marker))
            cancel.set()
        result: Any = running.result()
        assert result.status == "cancelled"
        model.release()
        # Checked while connected: codex ends a thread's commands when its client leaves.
        if ended:  # SIGKILL is sent before the result; the kernel ends the process soon after
            await eventually(lambda: not [proc for proc in sleepers if _alive(proc)])
        return [proc for proc in sleepers if _alive(proc)]


async def test_our_own_app_server_s_reported_command_is_ended_on_cancel(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel,
        reaper: list[str]) -> None:
    reaper.append("31.5555")
    config = make_config(tmp_path, codex_bin)
    assert await _cancel_background_sleep(config, codex_home, scripted_model, "31.5555", ended=True) == []


async def test_commands_of_an_app_server_that_is_not_our_child_are_never_killed_here(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel,
        reaper: list[str]) -> None:
    reaper.append("31.3333")
    listener = Listener(codex_bin, codex_home, [])
    try:
        await listener.ready()
        config = make_config(tmp_path, codex_bin, **{"codex.app_server_transport": "ws",
                                                     "codex.app_server_url": listener.url})
        alive = await _cancel_background_sleep(config, codex_home, scripted_model, "31.3333", ended=False)
        # A server we did not start may be another machine's: its processes are not ours to kill.
        assert alive, "a command of a remote app-server was killed here"
    finally:
        listener.stop()
