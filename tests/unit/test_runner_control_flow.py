"""The runner's control flow on the in-memory app-server (tests/support/appserver_memory.py).

Each test drives one path of ``Runner``/``AppServerTurn`` in milliseconds: cancel while an
approval waits, a steer joining the active turn, a failed turn, the app-server lost
mid-turn, a sub-agent's approval. The same paths run on real codex in
``tests/peers/codex/test_runner_appserver.py``; ``tests/contract/test_appserver_contract.py``
keeps the fake honest.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from boss_agent.config import Config
from boss_agent.runner import Runner
from boss_agent.tasks import ApprovalRequest, Task
from tests.support.config import NO_CODEX, make_config
from tests.support.appserver_memory import FakeTurn, MemoryAppServer
from tests.support.runner import Sink

pytestmark = pytest.mark.asyncio

UNIT_WAIT_S = 5.0  # everything here is in memory; a wait this long is a hang


@pytest.fixture
def config(tmp_path: Path) -> Config:
    # No fallback: a path that fails before the turn must say so, not run codex exec.
    return make_config(tmp_path, NO_CODEX, **{"codex.fallback": []})


@pytest.fixture
def app() -> MemoryAppServer:
    return MemoryAppServer()


@pytest.fixture
def runner(config: Config, app: MemoryAppServer) -> Runner:
    return Runner(config, app)  # type: ignore[arg-type]


def _task(task_id: str, **fields: Any) -> Task:
    return Task(task_id, "do it", approval_policy="untrusted", **fields)


async def _run(runner: Runner, task: Task, sink: Sink, cancel: asyncio.Event | None = None) -> Any:
    async with asyncio.timeout(UNIT_WAIT_S):
        return await runner.run(task, sink, cancel or asyncio.Event())


async def test_a_turn_ends_with_its_last_answer(runner: Runner, app: MemoryAppServer) -> None:
    async def script(turn: FakeTurn) -> None:
        await turn.say("the answer")

    app.codex.enqueue(script)
    result = await _run(runner, _task("t-plain"), Sink())
    assert result.status == "completed" and result.result_text == "the answer"
    assert result.codex_thread_ref in app.codex.threads and result.turn_id


async def test_cancel_while_an_approval_waits_interrupts_the_turn_and_withdraws_it(
        runner: Runner, app: MemoryAppServer) -> None:
    decisions: list[str] = []

    async def script(turn: FakeTurn) -> None:
        decisions.append(await turn.ask_command("touch never.txt"))

    cancel = asyncio.Event()

    async def cancel_instead(_request: ApprovalRequest) -> str:
        cancel.set()
        await asyncio.Event().wait()  # never decides: the runner must stop waiting
        return "accept"

    app.codex.enqueue(script)
    result = await _run(runner, _task("t-cancel"), Sink(cancel_instead), cancel)
    assert result.status == "cancelled" and result.error_code == "cancelled"
    assert [a["status"] for a in result.execution_progress["approvals"]] == ["cancelled"]
    assert decisions == []  # the command never got an answer, so never ran
    assert [m for m, _ in app.codex.calls].count("turn/interrupt") == 1


async def test_a_steer_joins_the_active_turn_and_both_tasks_see_its_end(
        runner: Runner, app: MemoryAppServer) -> None:
    steered: list[Any] = []

    async def script(turn: FakeTurn) -> None:
        await turn.say("working")
        steered.append(await turn.wait_steer())
        await turn.say("steered answer")

    app.codex.enqueue(script)
    async with asyncio.TaskGroup() as tg:
        original = tg.create_task(_run(runner, _task("t-orig"), Sink()))
        async with asyncio.timeout(UNIT_WAIT_S):
            await app.codex.turn_started.wait()
        (thread_id, turn), = app.codex.active.items()
        steer = await _run(runner, _task("t-steer", codex_thread_ref=thread_id, target_turn_id=turn.id), Sink())
    assert steer.status == "completed" and steer.turn_id == turn.id
    assert steer.result_text == "steered answer"
    assert original.result().status == "completed" and original.result().turn_id == turn.id
    assert steered and "do it" in str(steered[0])
    assert [m for m, _ in app.codex.calls].count("turn/start") == 1  # a steer never starts a turn


async def test_a_steer_of_a_turn_that_is_not_active_fails_and_starts_nothing(
        runner: Runner, app: MemoryAppServer) -> None:
    async def script(turn: FakeTurn) -> None:
        await turn.say("done")

    app.codex.enqueue(script)
    first = await _run(runner, _task("t-first"), Sink())
    stale = _task("t-stale", codex_thread_ref=first.codex_thread_ref, target_turn_id=first.turn_id)
    result = await _run(runner, stale, Sink())
    assert result.status == "failed" and result.error_code == "turn_not_active"
    assert [m for m, _ in app.codex.calls].count("turn/start") == 1


async def test_a_failed_turn_fails_the_task_with_codex_s_message(runner: Runner, app: MemoryAppServer) -> None:
    async def script(turn: FakeTurn) -> None:
        turn.fail("unexpected status 401 Unauthorized: Incorrect API key provided")

    app.codex.enqueue(script)
    result = await _run(runner, _task("t-fail"), Sink())
    assert result.status == "failed" and result.error_code == "codex_turn_failed"
    assert "401" in result.error_message


async def test_the_app_server_lost_mid_turn_fails_the_task_and_never_runs_it_again(
        runner: Runner, app: MemoryAppServer) -> None:
    async def script(turn: FakeTurn) -> None:
        await turn.say("half way")
        await turn.ask_command("make")

    async def lose(_request: ApprovalRequest) -> str:
        app.codex.lose_connection()
        await asyncio.Event().wait()
        return "accept"

    app.codex.enqueue(script)
    result = await _run(runner, _task("t-lost"), Sink(lose))
    assert result.status == "failed" and result.error_code == "app_server_lost"
    assert result.turn_id  # the turn had started: no fallback, no second run
    assert [m for m, _ in app.codex.calls].count("turn/start") == 1
    assert [a["status"] for a in result.execution_progress["approvals"]] == ["cancelled"]  # as on real codex


async def test_the_app_server_unavailable_before_the_turn_fails_without_a_fallback(
        runner: Runner, app: MemoryAppServer) -> None:
    app.up = False
    result = await _run(runner, _task("t-down"), Sink())
    assert result.status == "failed" and result.error_code == "app_server_unavailable"
    assert app.codex.calls == []


async def test_a_sub_agents_approval_reaches_the_person_and_their_answer_reaches_codex(
        runner: Runner, app: MemoryAppServer) -> None:
    decisions: list[str] = []

    async def script(turn: FakeTurn) -> None:
        child = await turn.spawn_child()
        decisions.append(await child.ask_command("touch child.txt"))
        await turn.say("the sub-agent made the file")

    async def accept(_request: ApprovalRequest) -> str:
        return "accept"

    app.codex.enqueue(script)
    sink = Sink(accept)
    result = await _run(runner, _task("t-child"), sink)
    assert result.status == "completed", result
    assert decisions == ["accept"]  # before routing adopted the child: declined by default
    assert len(sink.approvals) == 1 and sink.approvals[0].kind == "command"
    assert [a["status"] for a in result.execution_progress["approvals"]] == ["accepted"]
    assert result.result_text == "the sub-agent made the file"


async def test_codex_asking_the_client_s_clock_gets_the_time_and_the_turn_goes_on(
        runner: Runner, app: MemoryAppServer) -> None:
    answers: list[dict[str, Any]] = []

    async def script(turn: FakeTurn) -> None:  # codex 0.150 … 0.169 send currentTime/read
        answers.append(await turn.ask("currentTime/read", {}))
        await turn.say("on time")

    app.codex.enqueue(script)
    before = int(time.time())
    result = await _run(runner, _task("t-clock"), Sink())
    assert result.status == "completed" and result.result_text == "on time"
    assert before <= answers[0]["currentTimeAt"] <= int(time.time())


async def test_an_unknown_server_request_is_refused_and_the_turn_goes_on(
        runner: Runner, app: MemoryAppServer) -> None:
    refusals: list[str] = []

    async def script(turn: FakeTurn) -> None:
        try:
            await turn.ask("item/somethingNew/request", {})
        except Exception as exc:  # noqa: BLE001 - the refusal is what the test looks at
            refusals.append(type(exc).__name__)
        await turn.say("still fine")

    app.codex.enqueue(script)
    result = await _run(runner, _task("t-unknown"), Sink())
    assert result.status == "completed" and result.result_text == "still fine"
    assert refusals == ["RpcError"]


async def _answer_script(turn: FakeTurn) -> None:
    await turn.say("the answer")


async def test_a_follow_up_restates_the_limits_of_now_on_the_thread_and_on_its_turn(
        runner: Runner, app: MemoryAppServer, config: Config) -> None:
    first_dir, second_dir = config.workspaces[0] / "a", config.workspaces[0] / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    app.codex.enqueue(_answer_script, _answer_script)
    first = await _run(runner, Task("t-first", "do it", workdir=str(first_dir), approval_policy="on-request"), Sink())
    follow_up = _task("t-next", workdir=str(second_dir), sandbox="read-only", codex_thread_ref=first.codex_thread_ref)
    result = await _run(runner, follow_up, Sink())
    assert result.status == "completed", result
    wanted = {"cwd": str(second_dir), "approvalPolicy": "untrusted",
              "sandboxPolicy": {"type": "readOnly", "networkAccess": False}}
    (update,) = [params for method, params in app.codex.calls if method == "thread/settings/update"]
    turn_start = [params for method, params in app.codex.calls if method == "turn/start"][-1]
    assert {k: update[k] for k in wanted} == wanted and {k: turn_start[k] for k in wanted} == wanted
    assert result.execution_progress["threadSettings"]["sandbox"] == "read-only"


async def test_a_follow_up_codex_will_not_give_the_limits_of_now_fails_and_nothing_runs(
        runner: Runner, app: MemoryAppServer) -> None:
    app.codex.enqueue(_answer_script)
    first = await _run(runner, _task("t-first", sandbox="workspace-write"), Sink())
    app.codex.keeps_settings = True  # a codex that would keep the thread's earlier limits
    result = await _run(runner, _task("t-next", sandbox="read-only", codex_thread_ref=first.codex_thread_ref),
                        Sink())
    assert (result.status, result.error_code) == ("failed", "thread_limits_unenforceable")
    assert [method for method, _ in app.codex.calls].count("turn/start") == 1  # only the first task's


async def test_an_answer_over_1_mib_is_cut_with_a_marker(runner: Runner, app: MemoryAppServer) -> None:
    from boss_agent.progress.bounds import MAX_RESULT_BYTES, RESULT_CUT_MARKER

    async def script(turn: FakeTurn) -> None:
        await turn.say("word " * (MAX_RESULT_BYTES // 4))  # 1.25 MiB

    app.codex.enqueue(script)
    result = await _run(runner, _task("t-huge"), Sink())
    assert result.status == "completed" and result.result_text.endswith(RESULT_CUT_MARKER)
    assert len(result.result_text.encode()) <= MAX_RESULT_BYTES
    assert result.result_text.startswith("word word")
