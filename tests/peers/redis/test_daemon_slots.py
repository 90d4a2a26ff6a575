"""One task-slot budget for the whole device: ``Slots`` itself, and the daemon running
the Boss source and the Redis gateway on it (real ControlPlane, real redis-server).

The daemon test uses an in-test runner that records how many tasks run at once: the
subject is the daemon's scheduling, which a real codex turn would only slow down.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.sources.slots import Slots
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.sources.inflight import RunRegistry
from boss_agent.tasks import Task, TaskResult, TaskSink
from tests.support.config import make_config
from tests.support.daemon import FaultProxy, serving
from tests.support.gateway import AGENT, record_of, sdk_redis
from tests.support.waits import eventually


async def test_a_released_slot_goes_to_the_oldest_waiter_not_to_a_newcomer() -> None:
    slots = Slots(1)
    assert slots.try_acquire() and slots.free == 0
    async with asyncio.TaskGroup() as tg:
        first = tg.create_task(slots.acquire())
        second = tg.create_task(slots.acquire())
        await asyncio.sleep(0)  # both are queued now
        slots.release()
        assert not slots.try_acquire()  # the slot went to ``first``, not to a poll loop
        await first
        assert not second.done()
        slots.release()
    assert slots.used == 1 and slots.free == 0
    slots.release()
    assert slots.free == 1


async def test_a_waiter_cancelled_after_being_handed_a_slot_passes_it_on() -> None:
    slots = Slots(1)
    await slots.acquire()
    async with asyncio.TaskGroup() as tg:
        doomed = tg.create_task(slots.acquire())
        heir = tg.create_task(slots.acquire())
        await asyncio.sleep(0)
        slots.release()  # hands the slot to ``doomed`` ...
        doomed.cancel()  # ... which is cancelled before it resumes
        await heir
    assert doomed.cancelled() and slots.used == 1


async def test_wait_free_returns_when_a_slot_frees_and_takes_nothing() -> None:
    slots = Slots(1)
    await slots.acquire()
    async with asyncio.TaskGroup() as tg:
        waiting = tg.create_task(slots.wait_free())
        await asyncio.sleep(0)
        assert not waiting.done()
        slots.release()
    assert slots.free == 1 and slots.used == 0


async def test_a_boss_task_waiting_in_line_for_a_slot_stops_waiting_when_cancelled() -> None:
    slots = Slots(1)
    await slots.acquire()  # the gateway's task holds the device's one slot
    runs = RunRegistry(slots)
    async with runs.admit("boss", "t1") as admission, asyncio.TaskGroup() as tg:
        waiting = tg.create_task(admission.slot())
        await eventually(lambda: slots.waiting == 1)
        runs.cancel("boss", "t1")
    assert waiting.result() is False
    assert slots.waiting == 0 and slots.used == 1
    slots.release()
    assert slots.free == 1  # nothing leaked to the cancelled waiter


class CountingRunner:
    """Records how many tasks run at once; each task runs until the test opens its gate."""

    capabilities: ClassVar[dict[str, Any]] = {"codexExec": {"available": True, "version": "test"}}

    def __init__(self) -> None:
        self.active: list[str] = []
        self.peak = 0
        self.runs: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}

    def gate(self, task_id: str) -> asyncio.Event:
        return self.gates.setdefault(task_id, asyncio.Event())

    async def run(self, task: Task, sink: TaskSink, cancel: asyncio.Event) -> TaskResult:
        self.runs.append(task.task_id)
        self.active.append(task.task_id)
        self.peak = max(self.peak, len(self.active))
        try:
            await self.gate(task.task_id).wait()
        finally:
            self.active.remove(task.task_id)
        return TaskResult("completed", backend="app_server", result_text=f"done: {task.prompt}")


def _raw_ask(message_id: str, prompt: str) -> dict[str, str]:
    header = {"message_id": message_id, "session_id": "s1", "trace_id": "t1", "source_agent_type": "",
              "target_agent_type": AGENT, "parent_message_id": "", "task_group_id": "",
              "user_code": "", "user_name": "", "metadata": {}}
    command = {"action_type": "ASK_AGENT", "header": header,
               "body": {"content": prompt, "wait_for_reply": False, "extra_payload": {}}}
    return {"data": json.dumps(command)}


@pytest.mark.redis
async def test_with_one_slot_the_device_never_runs_a_boss_task_and_a_gateway_task_at_once(
    tmp_path: Path, redis_server,
) -> None:
    stream = f"byai_gateway:ctrl:agent_type:{AGENT}"
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
        config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path,
                             max_concurrent_tasks=1, gateway__enabled=True,
                             gateway__redis_url=redis_server.url, gateway__agent_types=[AGENT])
        await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(), policy=BossApiRetry.fast())
        # Work waits on both sources before the daemon starts: each grabs its own at once.
        task_id = cp.submit_task("from boss")
        redis = sdk_redis(redis_server.url)
        await redis.xadd(stream, _raw_ask("msg-1", "from redis"))
        runner = CountingRunner()
        daemon = Daemon(config, runner=runner, retry_policy=BossApiRetry.fast(), claim_wait_ms=300,
                        handle_signals=False)

        async def both_sources_settled() -> bool:
            # Each source either runs its task, or took it and waits in line for the
            # device's one slot, or holds off fetching because that slot is taken. With
            # a budget per source, both would be running theirs by now.
            if not runner.active:
                return False
            runs, gateway_slots = daemon.source.runs, daemon.gateway.shared.slots
            claimed = task_id in runs.running_ids()
            boss = task_id in runner.runs or (claimed and runs.slots.waiting > 0) or \
                (not claimed and runs.free_slots == 0)
            read = (await redis.xpending(stream, "agent_engines"))["pending"] >= 1
            gateway = "msg-1" in runner.runs or (read and gateway_slots.waiting > 0) or \
                (not read and gateway_slots.free == 0)
            return boss and gateway

        async with serving(daemon):
            await eventually(both_sources_settled)
            assert len(runner.active) == 1
            first = runner.active[0]
            runner.gate(first).set()
            await eventually(lambda: len(runner.runs) == 2 and runner.active)
            assert len(runner.active) == 1 and runner.active[0] != first
            runner.gate(runner.active[0]).set()
            await proxy.wait_for(lambda: cp.task(task_id)["status"] == "completed")
            await eventually(lambda: _completed(redis))
        await redis.aclose()
    assert sorted(runner.runs) == sorted(["msg-1", task_id])
    assert runner.peak == 1


async def _completed(redis: Any) -> bool:
    return (await record_of(redis, "s1", "msg-1")).get("status") == "COMPLETED"

