"""The RunRegistry on its own: admission, early cancels, slot hand-back, idle, the runner
guard, the force after the grace.

Pure asyncio, no peers: the registry is bookkeeping. The same behaviour is driven end
to end through both sources in tests/contract/test_source_contract.py.
"""

from __future__ import annotations

import asyncio

import pytest

from boss_agent.config import load_config
from boss_agent.sources.gateway import Gateway
from boss_agent.sources.slots import Slots
from boss_agent.sources.inflight import Run, RunRegistry
from boss_agent.tasks import Task, TaskResult, TaskSink
from tests.support.waits import eventually

BOUND_S = 5.0


async def test_a_cancel_for_a_starting_task_is_seen_by_its_run_and_a_second_copy_is_refused() -> None:
    runs = RunRegistry(Slots(1))
    async with runs.admit("gateway", "m1") as admission:
        assert runs.knows("gateway", "m1") and len(runs) == 0  # starting: not yet in flight
        with pytest.raises(ValueError, match="already here"):
            runs.admit("gateway", "m1")
        assert runs.cancel("gateway", "m1", "user stop", True)
        run = admission.register()
        assert run.cancel.is_set() and run.force.is_set() and run.reason == "user stop"
        assert runs.get("gateway", "m1") is run
    assert not runs.knows("gateway", "m1") and runs.slots.used == 0
    assert not runs.cancel("boss", "m1")  # same id, other source: a different task


async def test_an_admission_takes_a_free_slot_at_once_and_gives_it_back_on_every_path() -> None:
    runs = RunRegistry(Slots(1))
    with pytest.raises(RuntimeError):
        async with runs.admit("gateway", "m1") as admission:
            assert admission.ready and runs.slots.used == 1  # taken by admit, before any await
            raise RuntimeError("the source gave up on it")
    assert runs.slots.used == 0 and not runs.knows("gateway", "m1")
    async with runs.admit("boss", "t1") as admission:
        admission.register()
    assert runs.slots.used == 0 and len(runs) == 0


async def test_an_admission_without_a_free_slot_waits_in_line_and_a_cancel_ends_the_wait() -> None:
    runs = RunRegistry(Slots(1))
    async with runs.admit("boss", "t1") as holder:
        holder.register()
        async with runs.admit("gateway", "m1") as waiting:
            assert not waiting.ready
            job = asyncio.create_task(waiting.slot())
            await eventually(lambda: runs.slots.waiting == 1, BOUND_S)
            runs.cancel("gateway", "m1")
            assert await job is False and runs.slots.waiting == 0
        async with runs.admit("gateway", "m2") as next_in_line:
            job = asyncio.create_task(next_in_line.slot())
            await eventually(lambda: runs.slots.waiting == 1, BOUND_S)
            runs.finish(holder.run)  # the holder ends: its slot passes on
            assert await job is True and next_in_line.run.holds_slot
    assert runs.slots.used == 0


async def test_a_steer_takes_no_slot_and_does_not_wait_for_one() -> None:
    runs = RunRegistry(Slots(1))
    async with runs.admit("boss", "t1") as holder, runs.admit("boss", "t2", steer=True) as steer:
        holder.register()
        steer.register()
        assert steer.ready and await steer.slot() and not steer.run.holds_slot
        assert runs.slots.used == 1 and runs.turns("boss") == 1  # a steer is not a turn of its own
    assert runs.slots.used == 0


async def test_a_suspended_run_hands_its_slot_back_and_waits_in_line_to_resume() -> None:
    runs = RunRegistry(Slots(1))
    async with runs.admit("gateway", "m1") as first_admission:
        first = first_admission.register()
        runs.hand_back(first)  # waiting for the user
        async with runs.admit("boss", "t1") as second:
            second.register()
            resume = asyncio.create_task(runs.take_back(first))
            await asyncio.sleep(0)
            assert not resume.done() and runs.slots.waiting == 1
        async with asyncio.timeout(BOUND_S):
            await resume
        assert first.holds_slot and runs.slots.used == 1
    assert runs.slots.used == 0 and len(runs) == 0


async def test_wait_idle_returns_once_the_last_run_of_any_source_finishes() -> None:
    runs = RunRegistry(Slots(2))
    a, b = runs.admit("boss", "t1").register(), runs.admit("gateway", "m1").register()
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
    run = runs.admit("boss", task.task_id, steer=task.target_turn_id is not None).register()
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


class DeafRunner:
    """A runner whose turn ignores the cancel event: it runs until it is cancelled outright."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def run(self, task: Task, sink: TaskSink, cancel: asyncio.Event) -> TaskResult:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("never reached")


@pytest.mark.parametrize("source", ["boss", "gateway"])
async def test_a_runner_that_ignores_a_cancel_is_forced_after_the_grace_for_either_source(source: str) -> None:
    runs, runner = RunRegistry(Slots(1), cancel_grace_s=0.05), DeafRunner()
    async with runs.admit(source, "t1") as admission:
        run = admission.register()
        job = asyncio.create_task(runs.call_runner(run, runner, Task("t1", "hi"), CardSink()))  # type: ignore[arg-type]
        await asyncio.wait_for(runner.started.wait(), BOUND_S)
        runs.cancel(source, "t1", "user stop")
        result = await asyncio.wait_for(job, BOUND_S)
    assert (result.status, result.error_code) == ("cancelled", "cancel_forced") and run.forced


async def test_a_forced_cancel_does_not_wait_for_the_grace_and_a_shutdown_abort_still_propagates() -> None:
    runs = RunRegistry(Slots(2), cancel_grace_s=3600.0)  # a grace this test never sees end
    runner = DeafRunner()
    run = runs.admit("gateway", "m1").register()
    job = asyncio.create_task(runs.call_runner(run, runner, Task("m1", "hi"), CardSink()))  # type: ignore[arg-type]
    await asyncio.wait_for(runner.started.wait(), BOUND_S)
    runs.cancel("gateway", "m1", "user stop", force=True)
    assert (await asyncio.wait_for(job, BOUND_S)).error_code == "cancel_forced"
    other, runner = runs.admit("boss", "t2").register(), DeafRunner()
    aborted = asyncio.create_task(runs.call_runner(other, runner, Task("t2", "hi"), CardSink()))  # type: ignore[arg-type]
    await asyncio.wait_for(runner.started.wait(), BOUND_S)
    aborted.cancel()  # the drain's abort: not the registry's to turn into a result
    with pytest.raises(asyncio.CancelledError):
        await aborted


async def test_a_gateway_is_idle_when_its_own_runs_end_though_a_boss_run_goes_on() -> None:
    runs = RunRegistry(Slots(2))
    config = load_config(overrides={"gateway.redis_url": "redis://127.0.0.1:9/0"}, environ={})
    gateway = Gateway(config, ThreadRunner(), worker_id="w1",
                      max_concurrent=2, runs=runs)  # never connects: only its registry is read
    try:
        boss = runs.admit("boss", "t1").register()
        mine = runs.admit("gateway", "m1").register()
        idle = asyncio.create_task(gateway.wait_idle())
        await asyncio.sleep(0)
        assert not idle.done()  # its own run still goes on
        runs.finish(mine)
        await asyncio.wait_for(idle, BOUND_S)
        assert runs.get("boss", "t1") is boss  # the Boss run goes on; the gateway did not wait for it
    finally:
        await gateway.redis.aclose()


@pytest.mark.parametrize("registered", [False, True])
async def test_a_run_whose_task_is_cancelled_before_it_ever_ran_still_leaves_the_registry(
        registered: bool) -> None:
    runs = RunRegistry(Slots(1))
    admission = runs.admit("gateway", "m1")
    if registered:
        admission.register()
    entered = asyncio.Event()

    async def work() -> None:
        async with admission:
            entered.set()

    with pytest.raises(ExceptionGroup):
        async with asyncio.TaskGroup() as tg:
            admission.start_in(tg, work(), "task m1")
            raise ExceptionGroup("its source failed at once", [RuntimeError("boom")])
    assert not entered.is_set()  # the task never ran its first step
    assert not runs.knows("gateway", "m1") and runs.slots.used == 0 and len(runs) == 0
