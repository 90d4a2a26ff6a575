"""The thread made ahead (runner/thread_ahead.py) against the real codex app-server.

A task's first words used to wait for codex to make its thread (``thread/start``,
6–17 ms here). After a task, the runner has codex make the next one; the next task in
the same folder under the same limits takes it, and a task it would not fit makes its
own: the owner's limits of now, codex's own configuration of now, a fresh folder.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from boss_agent.tasks import Task, TaskResult
from tests.support.config import make_config
from tests.support.runner import Sink

# An older codex keeps a thread let go loaded: no thread is made ahead there
# (test_an_older_codex_gets_no_thread_made_ahead, the fallback's own test).
pytestmark = [pytest.mark.codex, pytest.mark.asyncio, pytest.mark.codex_feature("thread_unload")]

UNLOAD_DELAY = "thread_unload_delay_secs = 1\n"  # codex unloads a thread let go within a second


@pytest.fixture
def home(tmp_path: Path, scripted_model: sm.ScriptedModel) -> Path:
    return sm.write_codex_home(tmp_path / "codex-home", scripted_model.base_url, extra_toml=UNLOAD_DELAY)


@pytest.fixture
def config(tmp_path: Path, codex_bin: str) -> Any:
    return make_config(tmp_path, codex_bin, workspace=tmp_path, **{
        "codex.sandbox": "danger-full-access", "codex.max_sandbox": "danger-full-access",
        "codex.approval_policy": "never", "codex.max_approval_policy": "never"})


@pytest_asyncio.fixture
async def app(config: Any, home: Path) -> AsyncIterator[AppServer]:
    async with AppServer.from_config(config, codex_home=home) as server:
        yield server


@pytest_asyncio.fixture
async def runner(config: Any, app: AppServer, home: Path) -> AsyncIterator[Runner]:
    runner = Runner(config, app, codex_home=home)
    try:
        yield runner
    finally:
        await runner.aclose()


class ThreadStarts:
    """Counts the ``thread/start`` requests boss-agent sends on the app-server's client;
    with ``gate``, each waits for it before it goes to codex."""

    def __init__(self, client: Any, gate: asyncio.Event | None = None) -> None:
        self.count = 0
        self.sent = asyncio.Event()
        self.made: list[str] = []
        real = client.thread_start

        async def counted(**params: Any) -> dict[str, Any]:
            self.count += 1
            self.sent.set()
            if gate is not None:
                await gate.wait()
            answer = await real(**params)
            self.made.append(answer["thread"]["id"])
            return answer

        client.thread_start = counted


async def _task(runner: Runner, model: sm.ScriptedModel, name: str, workdir: Path | None,
                *replies: sm.Response) -> TaskResult:
    model.enqueue(*(replies or (sm.text_reply(f"answer of {name}"),)))
    task = Task(name, f"prompt of {name}", workdir=str(workdir) if workdir else None)
    result = await asyncio.wait_for(runner.run(task, Sink(), asyncio.Event()), 60)
    assert result.status == "completed", (result.error_code, result.error_message)
    return result


async def _made_ahead(runner: Runner) -> str:
    await asyncio.wait_for(runner.ahead.settled(), 30)
    held = runner.ahead.held
    assert held is not None, "no thread was made ahead"
    return held


async def _loaded(app: AppServer) -> list[str]:
    listed = await (await app.client()).call("thread/loaded/list", {})
    return list(listed["data"])


async def _until_unloaded(app: AppServer, thread_id: str) -> None:
    for _ in range(100):
        if thread_id not in await _loaded(app):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the thread made ahead was never let go")


async def test_the_next_task_in_the_same_folder_runs_on_the_thread_made_ahead(
        runner: Runner, app: AppServer, scripted_model: sm.ScriptedModel, workdir: Path, home: Path) -> None:
    first = await _task(runner, scripted_model, "first", workdir)
    held = await _made_ahead(runner)
    assert held != first.codex_thread_ref
    assert not list((home / "sessions").rglob(f"*{held}*.jsonl")), "an unused thread left a rollout"
    starts = ThreadStarts(await app.client())
    second = await _task(runner, scripted_model, "second", workdir)
    assert second.codex_thread_ref == held and second.result_text == "answer of second"
    assert starts.count == 0  # the task asked codex for no thread of its own
    assert "prompt of second" in scripted_model.requests[-1].input_texts()
    assert list((home / "sessions").rglob(f"*{held}*.jsonl")), "the thread's turn was not recorded"
    assert await _made_ahead(runner) not in (first.codex_thread_ref, held)  # and the next one


async def test_a_tightened_sandbox_is_never_run_on_a_thread_made_under_the_old_one(
        runner: Runner, app: AppServer, config: Any, scripted_model: sm.ScriptedModel, workdir: Path,
        outside_tmp: Path) -> None:
    await _task(runner, scripted_model, "loose", workdir)
    held = await _made_ahead(runner)  # made under danger-full-access
    # The owner tightens the sandbox (what a reload does: a new Config for new tasks).
    runner.config = replace(config, codex=replace(config.codex, sandbox="workspace-write",
                                                  max_sandbox="workspace-write"))
    starts = ThreadStarts(await app.client())
    tight = await _task(runner, scripted_model, "tight", workdir,
                        sm.turn(sm.shell_call(f"touch {outside_tmp}/escaped.txt")), sm.text_reply("done"))
    assert tight.codex_thread_ref != held and starts.count == 1
    output = list(scripted_model.requests[-1].tool_outputs().values())[-1]
    assert not (outside_tmp / "escaped.txt").exists(), output
    await _until_unloaded(app, held)  # let go, and codex unloaded it


async def test_an_edit_of_codex_s_own_config_reaches_the_next_task(
        runner: Runner, app: AppServer, scripted_model: sm.ScriptedModel, workdir: Path, home: Path) -> None:
    await _task(runner, scripted_model, "before", workdir)
    held = await _made_ahead(runner)
    # codex reads config.toml when it makes a thread: a thread made before the edit
    # would run the next task under the old file.
    text = (home / "config.toml").read_text()
    (home / "config.toml").write_text('developer_instructions = "EDITED-AFTER-THE-THREAD"\n' + text)
    after = await _task(runner, scripted_model, "after", workdir)
    assert after.codex_thread_ref != held
    assert "EDITED-AFTER-THE-THREAD" in str(scripted_model.requests[-1].body)
    await _until_unloaded(app, held)


async def test_a_project_config_added_in_the_folder_reaches_the_next_task(
        runner: Runner, scripted_model: sm.ScriptedModel, workdir: Path) -> None:
    await _task(runner, scripted_model, "before", workdir)
    held = await _made_ahead(runner)
    (workdir / ".codex").mkdir()
    (workdir / ".codex" / "config.toml").write_text("# the project's own settings\n")
    after = await _task(runner, scripted_model, "after", workdir)
    assert after.codex_thread_ref != held


async def test_a_task_elsewhere_or_asking_for_another_model_makes_its_own_thread(
        runner: Runner, app: AppServer, scripted_model: sm.ScriptedModel, workdir: Path, tmp_path: Path) -> None:
    await _task(runner, scripted_model, "here", workdir)
    held = await _made_ahead(runner)
    other = tmp_path / "other"
    other.mkdir()
    starts = ThreadStarts(await app.client())
    elsewhere = await _task(runner, scripted_model, "elsewhere", other)
    assert elsewhere.codex_thread_ref != held and starts.count == 1
    await _until_unloaded(app, held)
    held = await _made_ahead(runner)  # now for the other folder
    scripted_model.enqueue(sm.text_reply("other model"))
    result = await asyncio.wait_for(runner.run(Task("model", "x", workdir=str(other), model="gpt-5.4"),
                                               Sink(), asyncio.Event()), 60)
    assert result.status == "completed" and result.codex_thread_ref != held
    assert scripted_model.requests[-1].body["model"] == "gpt-5.4"


async def test_a_thread_made_ahead_too_long_ago_is_let_go(
        runner: Runner, app: AppServer, scripted_model: sm.ScriptedModel, workdir: Path) -> None:
    await _task(runner, scripted_model, "early", workdir)
    held = await _made_ahead(runner)
    runner.ahead.max_age_s = 0.0
    late = await _task(runner, scripted_model, "late", workdir)
    assert late.codex_thread_ref != held
    await _until_unloaded(app, held)


async def test_a_task_in_a_scratch_folder_of_its_own_neither_takes_nor_leaves_one(
        runner: Runner, scripted_model: sm.ScriptedModel) -> None:
    result = await _task(runner, scripted_model, "scratch", None)
    await asyncio.wait_for(runner.ahead.settled(), 30)
    assert result.codex_thread_ref and runner.ahead.held is None


async def test_thread_ahead_off_makes_none(
        app: AppServer, config: Any, home: Path, scripted_model: sm.ScriptedModel, workdir: Path) -> None:
    runner = Runner(replace(config, codex=replace(config.codex, thread_ahead=False)), app, codex_home=home)
    try:
        await _task(runner, scripted_model, "off", workdir)
        await asyncio.wait_for(runner.ahead.settled(), 30)
        assert runner.ahead.held is None
    finally:
        await runner.aclose()


async def test_a_task_that_comes_while_the_thread_is_made_waits_for_it(
        runner: Runner, app: AppServer, scripted_model: sm.ScriptedModel, workdir: Path) -> None:
    runner.ahead.make_after_s = 0.2
    await _task(runner, scripted_model, "first", workdir)
    gate = asyncio.Event()
    starts = ThreadStarts(await app.client(), gate)
    await asyncio.wait_for(starts.sent.wait(), 30)  # the thread made ahead, held at the gate
    second = asyncio.create_task(_task(runner, scripted_model, "second", workdir))
    await asyncio.sleep(0.2)  # the second task reaches it meanwhile (if not, it finds it ready)
    gate.set()
    result = await second
    assert starts.count == 1 and result.codex_thread_ref == starts.made[0]


async def test_closing_the_runner_lets_go_of_the_thread_held(
        app: AppServer, config: Any, home: Path, scripted_model: sm.ScriptedModel, workdir: Path) -> None:
    runner = Runner(config, app, codex_home=home)
    await _task(runner, scripted_model, "last", workdir)
    held = await _made_ahead(runner)
    await runner.aclose()
    assert runner.ahead.held is None
    await _until_unloaded(app, held)


async def test_a_task_waiting_for_the_thread_being_made_survives_the_runner_closing(
        app: AppServer, config: Any, home: Path, scripted_model: sm.ScriptedModel, workdir: Path) -> None:
    runner = Runner(config, app, codex_home=home)
    await _task(runner, scripted_model, "first", workdir)
    gate = asyncio.Event()
    starts = ThreadStarts(await app.client(), gate)
    await asyncio.wait_for(starts.sent.wait(), 30)  # the thread made ahead, held at the gate
    second = asyncio.create_task(_task(runner, scripted_model, "second", workdir))
    await asyncio.sleep(0.2)  # the second task waits for the thread being made
    await runner.aclose()  # gives up on it (bounded) and cancels the making
    gate.set()
    result = await second  # the task made its own thread; it was not cancelled with the making
    assert result.codex_thread_ref and starts.count == 2
