"""The RunRegistry on its own: early cancels, slot hand-back, idle, the runner guard.

Pure asyncio, no peers: the registry is bookkeeping. The same behaviour is driven end
to end through both sources in tests/contract/test_source_contract.py.
"""

from __future__ import annotations

import asyncio

import pytest

from boss_agent.sources.slots import Slots
from boss_agent.sources.inflight import Run, RunRegistry
from boss_agent.tasks import Task, TaskResult, TaskSink
from tests.support.waits import eventually

BOUND_S = 5.0


async def test_a_cancel_for_a_starting_task_applies_the_moment_its_run_registers() -> None:
    runs = RunRegistry(Slots(1))
    runs.begin("gateway", "m1")
    assert runs.cancel("gateway", "m1", "user stop", True)
    run = runs.register(Run("gateway", "m1"))
    assert run.cancel.is_set() and run.force.is_set() and run.reason == "user stop"
    assert not runs.is_starting("gateway", "m1")


async def test_an_abandoned_start_forgets_its_early_cancel_and_unknown_ids_are_not_cancelled() -> None:
    runs = RunRegistry(Slots(1))
    runs.begin("gateway", "m1")
    runs.cancel("gateway", "m1")
    runs.abandon("gateway", "m1")
    assert not runs.register(Run("gateway", "m1")).cancel.is_set()
    assert not runs.cancel("boss", "m1")  # same id, other source: a different task


async def test_a_suspended_run_hands_its_slot_back_and_waits_in_line_to_resume() -> None:
    runs = RunRegistry(Slots(1))
    assert runs.slots.try_acquire()
    first = runs.register(Run("gateway", "m1", holds_slot=True))
    runs.hand_back(first)  # waiting for the user
    assert runs.slots.try_acquire()
    second = runs.register(Run("boss", "t1", holds_slot=True))
    resume = asyncio.create_task(runs.take_back(first))
    await asyncio.sleep(0)
    assert not resume.done() and runs.slots.waiting == 1
    runs.finish(second)
    async with asyncio.timeout(BOUND_S):
        await resume
    assert first.holds_slot and runs.slots.used == 1
    runs.finish(first)
    assert runs.slots.used == 0 and len(runs) == 0


async def test_wait_idle_returns_once_the_last_run_of_any_source_finishes() -> None:
    runs = RunRegistry(Slots(2))
    a, b = runs.register(Run("boss", "t1")), runs.register(Run("gateway", "m1"))
    idle = asyncio.create_task(runs.wait_idle())
    runs.cancel_all("worker_shutdown")
    assert a.reason == b.reason == "worker_shutdown"
    runs.finish(a)
    await asyncio.sleep(0)
    assert not idle.done() and runs.ids("gateway") == ["m1"]
    runs.finish(b)
    async with asyncio.timeout(BOUND_S):
        await idle


class RaisingRunner:
    async def run(self, task: Task, sink: TaskSink, cancel: asyncio.Event) -> TaskResult:
        raise RuntimeError("a bug in the runner, /home/someone/secret")


async def test_a_runner_that_raises_becomes_a_failed_internal_error_result() -> None:
    result = await RunRegistry(Slots(1)).call_runner(Run("boss", "t1"), RaisingRunner(),
                                                     Task("t1", "hi"), None)  # type: ignore[arg-type]
    assert (result.status, result.error_code) == ("failed", "internal_error")
    assert result.error_message == "RuntimeError"  # the class name only, never the message


class SlowThenFailingFleet:
    """A fleet whose first publication is slow and whose second raises."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str | None]] = []
        self.first = asyncio.Event()

    async def turn_started(self, thread_ref: str, turn_id: str) -> None:
        await self.first.wait()
        self.calls.append(("started", thread_ref, turn_id))

    async def task_ended(self, thread_ref: str | None, turn_id: str | None) -> None:
        self.calls.append(("ended", thread_ref, turn_id))
        raise ConnectionError("redis is down")


async def test_threads_are_published_in_order_in_the_background_and_a_failure_is_only_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    registry = RunRegistry(Slots(1))
    registry.publish_turn("thr", "turn")  # no fleet yet: nothing to publish to, no error
    fleet = SlowThenFailingFleet()
    registry.threads = fleet
    registry.publish_turn("thr", "turn")  # returns at once: the run never waits on Redis
    registry.publish_end("thr", "turn")
    registry.publish_end(None, None)  # nothing to say
    await asyncio.sleep(0)
    assert fleet.calls == []  # the end waits for the slow start
    fleet.first.set()
    await eventually(lambda: len(fleet.calls) == 2)
    await eventually(lambda: "could not publish a thread to the fleet (ConnectionError)" in caplog.text)
    assert fleet.calls == [("started", "thr", "turn"), ("ended", "thr", "turn")]


class ThreadRunner:
    """Holds each task's turn until ``release[task_id]`` is set; records the order run."""

    def __init__(self) -> None:
        self.release: dict[str, asyncio.Event] = {}
        self.ran: list[str] = []

    async def run(self, task: Task, sink: TaskSink, cancel: asyncio.Event) -> TaskResult:
        self.ran.append(task.task_id)
        await self.release.setdefault(task.task_id, asyncio.Event()).wait()
        return TaskResult("completed", codex_thread_ref=task.codex_thread_ref)


class CardSink:
    def __init__(self) -> None:
        self.cards: list[object] = []

    async def progress(self, card: object) -> None:
        self.cards.append(card)


def _running(runs: RunRegistry, runner: ThreadRunner, task: Task) -> tuple[Run, asyncio.Task[TaskResult]]:
    holds = runs.slots.try_acquire()
    run = runs.register(Run("boss", task.task_id, holds_slot=holds))
    job = asyncio.create_task(runs.call_runner(run, runner, task, CardSink()))  # type: ignore[arg-type]
    return run, job


async def test_a_follow_up_of_a_held_thread_waits_without_its_slot_and_runs_after_it() -> None:
    runs, runner = RunRegistry(Slots(2)), ThreadRunner()
    first, first_job = _running(runs, runner, Task("t1", "a", codex_thread_ref="thr"))
    await eventually(lambda: runner.ran == ["t1"], BOUND_S)
    second, second_job = _running(runs, runner, Task("t2", "b", codex_thread_ref="thr"))
    await eventually(lambda: second.waiting, BOUND_S)
    assert not second.holds_slot and runs.slots.used == 1 and runs.waiting("boss") == 1
    steer, steer_job = _running(runs, runner, Task("t3", "c", codex_thread_ref="thr", target_turn_id="u1"))
    await eventually(lambda: runner.ran == ["t1", "t3"], BOUND_S)  # a steer joins at once
    runner.release["t1"].set()
    await first_job
    runs.finish(first)
    await eventually(lambda: runner.ran == ["t1", "t3", "t2"], BOUND_S)
    assert second.holds_slot and not second.waiting
    for task_id in ("t2", "t3"):
        runner.release[task_id].set()
    assert (await second_job).status == (await steer_job).status == "completed"


async def test_a_follow_up_waiting_too_long_fails_thread_busy_and_one_cancelled_ends_at_once() -> None:
    runs, runner = RunRegistry(Slots(2), thread_wait_s=0.05), ThreadRunner()
    _running(runs, runner, Task("t1", "a", codex_thread_ref="thr"))
    await eventually(lambda: runner.ran == ["t1"], BOUND_S)
    _, late = _running(runs, runner, Task("t2", "b", codex_thread_ref="thr"))
    assert ((await late).status, (await late).error_code) == ("failed", "thread_busy")
    runs.thread_wait_s = 60.0
    waiting, job = _running(runs, runner, Task("t3", "c", codex_thread_ref="thr"))
    await eventually(lambda: waiting.waiting, BOUND_S)
    waiting.request_cancel("user stop")
    assert (await job).status == "cancelled"
    assert runner.ran == ["t1"]  # neither reached the runner
