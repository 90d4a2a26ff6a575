"""What the gateway adds over the SDK's worker: sharing, reclaiming, outages, duplicates."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from by_framework.core.registry import WorkerRegistry

from boss_agent.errors import DuplicateWorker
from boss_agent.sources.gateway import Gateway
from boss_agent.sources.gateway.retry import FAST_POLICY
from tests.support.gateway import (
    AGENT,
    FAST,
    GROUP,
    STREAM,
    WAIT_S,
    ScriptRunner,
    ask,
    gateway_config,
    raw_ask,
    read_events,
    record_of,
    running_gateway,
    sdk_client,
    sdk_redis,
)
from tests.support.waits import eventually

pytestmark = pytest.mark.redis
REPO = Path(__file__).resolve().parents[3]
WORKER_SCRIPT = """
import asyncio, logging, sys
logging.getLogger("by-framework").addHandler(logging.NullHandler())  # no ./by-framework.log
from boss_agent.sources.gateway import Gateway
from boss_agent.sources.gateway.retry import FAST_POLICY
from tests.support.gateway import FAST, ScriptRunner, gateway_config

async def main():
    gateway = Gateway(gateway_config(sys.argv[1]), ScriptRunner(), worker_id=sys.argv[2],
                      max_concurrent=1, timing=FAST, retry=FAST_POLICY)
    ready = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        tg.create_task(gateway.run(ready))
        await ready.wait()
        print("ready", flush=True)

asyncio.run(main())
"""


async def _status(redis, message_id: str, session: str = "s1") -> str:
    return (await record_of(redis, session, message_id)).get("status", "")


async def test_two_workers_on_one_stream_split_the_work_and_each_task_runs_once(redis_server):
    redis = sdk_redis(redis_server.url)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner, "w1", max_concurrent=1), \
            running_gateway(redis_server.url, runner, "w2", max_concurrent=1):
        client = sdk_client(redis)
        await ask(client, "s1", "hold", "msg-h1")
        await ask(client, "s1", "hold", "msg-h2")
        # One slot each: while a worker holds one task the other must take the second.
        await eventually(lambda: len(runner.runs) == 2)
        owners = {(await record_of(redis, "s1", m))["worker_id"] for m in ("msg-h1", "msg-h2")}
        assert owners == {"w1", "w2"}
        runner.gate.set()
        ids = [f"msg-e{i}" for i in range(8)]
        for message_id in ids:
            await ask(client, "s1", "echo x", message_id)
        for message_id in ids:
            await eventually(lambda m=message_id: _status_done(redis, m))
    assert sorted(runner.runs) == sorted(["msg-h1", "msg-h2", *ids])


async def _status_done(redis, message_id: str) -> bool:
    return await _status(redis, message_id) == "COMPLETED"


async def test_a_task_of_a_killed_worker_is_reclaimed_and_reported_failed_not_rerun(redis_server):
    redis = sdk_redis(redis_server.url)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WORKER_SCRIPT, redis_server.url, "w-doomed",
        cwd=REPO, stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert await asyncio.wait_for(child.stdout.readline(), WAIT_S) == b"ready\n"
        await ask(sdk_client(redis), "s1", "wait", "msg-k")
        await eventually(lambda: _status_is(redis, "msg-k", "RUNNING"))
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    assert (await redis.xpending(STREAM, GROUP))["pending"] == 1
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner, "w-survivor") as gateway:
        events = await read_events(redis, "s1", "msg-k")
        assert gateway.info["counts"]["reclaimed"] == 1
    record = await record_of(redis, "s1", "msg-k")
    assert record["status"] == "FAILED" and record["error"]["code"] == "agent_restarted"
    assert record["worker_id"] == "w-survivor" and runner.runs == []
    assert events[-1].event_type == "appStreamResponse"
    assert (await redis.xpending(STREAM, GROUP))["pending"] == 0


async def _status_is(redis, message_id: str, status: str) -> bool:
    return await _status(redis, message_id) == status


async def test_an_entry_a_dead_worker_read_but_never_started_is_reclaimed_and_run(redis_server):
    redis = sdk_redis(redis_server.url)
    await redis.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    await redis.xadd(STREAM, raw_ask("msg-g", "echo rescued"))
    await redis.xreadgroup(GROUP, "ghost", {STREAM: ">"}, count=1)  # read, then died
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner):
        events = await read_events(redis, "s1", "msg-g")
    assert runner.runs == ["msg-g"] and events[-2].event_type == "finalAnswer"
    assert await _status(redis, "msg-g") == "COMPLETED"


async def test_own_pending_entries_are_recovered_at_start_by_the_same_rule(redis_server):
    redis = sdk_redis(redis_server.url)
    await redis.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    await redis.xadd(STREAM, raw_ask("msg-p1", "echo fresh"))
    await redis.xadd(STREAM, raw_ask("msg-p2", "echo started"))
    await WorkerRegistry(redis).save_execution({
        "execution_id": "exec-p2", "message_id": "msg-p2", "session_id": "s1", "worker_id": "w1",
        "status": "RUNNING", "target_agent_type": AGENT, "parent_message_id": ""})
    await redis.xreadgroup(GROUP, "w1", {STREAM: ">"}, count=2)  # the previous w1 process
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner, "w1"):
        await read_events(redis, "s1", "msg-p1")
        await read_events(redis, "s1", "msg-p2")
        # Ordering: the closing events go out before the XACK, so wait for the ack too.
        await eventually(lambda: _no_pending(redis))
    assert runner.runs == ["msg-p1"]
    assert (await record_of(redis, "s1", "msg-p2"))["error"]["code"] == "agent_restarted"
    assert (await redis.xpending(STREAM, GROUP))["pending"] == 0


async def test_a_task_that_reached_a_terminal_state_is_never_run_twice(redis_server):
    redis = sdk_redis(redis_server.url)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner) as gateway:
        await ask(sdk_client(redis), "s1", "echo once", "msg-once")
        await read_events(redis, "s1", "msg-once")
        await redis.xadd(STREAM, raw_ask("msg-once", "echo once"))  # a replay
        await eventually(lambda: gateway.info["counts"].get("skipped") == 1)
    assert runner.runs == ["msg-once"]
    assert (await redis.xpending(STREAM, GROUP))["pending"] == 0


async def test_a_redis_restart_mid_task_is_survived(redis_server):
    redis = sdk_redis(redis_server.url)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner) as gateway:
        await ask(sdk_client(redis), "s1", "hold", "msg-r1")
        await asyncio.wait_for(runner.started_event("msg-r1").wait(), WAIT_S)
        redis_server.stop()
        await eventually(lambda: not gateway.info["connected"])
        redis_server.start()  # same port, empty data set: groups, lease, membership gone
        runner.gate.set()
        events = await read_events(redis, "s1", "msg-r1")
        assert events[-1].event_type == "appStreamResponse"
        # The worker is back in the registry, so the SDK's FAIL_FAST routing finds it.
        await eventually(lambda: _online(redis))
        await ask(sdk_client(redis), "s1", "echo after", "msg-r2")
        await read_events(redis, "s1", "msg-r2")
    assert runner.runs == ["msg-r1", "msg-r2"]
    assert await _status(redis, "msg-r1") == "COMPLETED"


async def _online(redis) -> bool:
    online, _ = await WorkerRegistry(redis).has_online_agent_type(AGENT)
    return online


async def test_a_duplicate_worker_id_refuses_to_start_and_leaves_the_first_alone(redis_server):
    redis = sdk_redis(redis_server.url)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner, "w1"):
        lease = json.loads(await redis.get("byai_gateway:registry:worker:online:w1"))
        twin = Gateway(gateway_config(redis_server.url), ScriptRunner(), worker_id="w1",
                       max_concurrent=1, timing=FAST, retry=FAST_POLICY)
        with pytest.raises(DuplicateWorker):
            await asyncio.wait_for(twin.run(), WAIT_S)
        after = json.loads(await redis.get("byai_gateway:registry:worker:online:w1"))
        assert after["token"] == lease["token"]
        assert await redis.sismember(f"byai_gateway:registry:agent_type:workers:{AGENT}", "w1")
        await ask(sdk_client(redis), "s1", "echo still here", "msg-d")
        await read_events(redis, "s1", "msg-d")
    assert runner.runs == ["msg-d"]


async def _no_pending(redis) -> bool:
    return (await redis.xpending(STREAM, GROUP))["pending"] == 0
