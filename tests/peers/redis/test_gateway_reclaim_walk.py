"""Reclaim walks every pending entry, a bounded page at a time, so a dead worker's
entries behind more than a page of a live worker's long-running ones are not starved
(real redis-server; the runner is the in-test ScriptRunner)."""

from __future__ import annotations

import pytest

from boss_agent.sources.gateway import keys
from boss_agent.sources.gateway.registry import worker_online
from tests.support.gateway import (
    GROUP,
    STREAM,
    ScriptRunner,
    ask,
    raw_ask,
    read_events,
    record_of,
    running_gateway,
    sdk_client,
    sdk_redis,
)
from tests.support.waits import eventually

pytestmark = pytest.mark.redis
BUSY = 130  # more than one XPENDING page of a live worker's entries, oldest first
DEAD = 120  # more than one page of the dead worker's entries behind them


async def _pending_for(redis, consumer: str, entries: list[str]) -> None:
    await redis.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=len(entries))
    # Age them past any lease TTL (XCLAIM's IDLE): idle time alone must not decide.
    await redis.xclaim(STREAM, GROUP, consumer, 0, entries, idle=10 ** 8)


async def _all_completed(redis, ids: list[str]) -> bool:
    for message_id in ids:
        if (await record_of(redis, f"s-{message_id}", message_id)).get("status") != "COMPLETED":
            return False
    return True


async def test_a_dead_workers_entries_behind_a_page_of_live_ones_are_all_reclaimed(redis_server):
    redis = sdk_redis(redis_server.url)
    await redis.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    busy = [await redis.xadd(STREAM, raw_ask(f"msg-b{i}", "echo busy", f"s-b{i}")) for i in range(BUSY)]
    await _pending_for(redis, "busy", busy)
    dead_ids = [f"msg-d{i}" for i in range(DEAD)]
    dead = [await redis.xadd(STREAM, raw_ask(m, "echo rescued", f"s-{m}")) for m in dead_ids]
    await _pending_for(redis, "ghost", dead)
    await redis.set(keys.worker_lease("busy"), "1")  # alive, just slow
    # One session per task: many tasks writing one session's registry at once contend
    # on its WATCH, which is not what this test is about.
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner, "w1", max_concurrent=8) as gateway:
        await eventually(lambda: _all_completed(redis, dead_ids), timeout=60)
        assert gateway.info["counts"]["reclaimed"] == DEAD
    assert sorted(runner.runs) == sorted(dead_ids)
    summary = await redis.xpending(STREAM, GROUP)
    assert summary["pending"] == BUSY
    await redis.aclose()


async def test_redis_losing_its_data_under_the_readers_and_the_reclaimer_is_not_fatal(redis_server):
    # Found by tests/soak/test_chaos.py: XPENDING answered NOGROUP after a redis-server
    # restart and the reclaim loop took the gateway and the daemon down with it; and a
    # blocked XREADGROUP whose stream is deleted answers "UNBLOCKED …", which did too.
    redis = sdk_redis(redis_server.url)
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner, "w1") as gateway:
        await redis.flushall()  # what a restart without persistence leaves
        await gateway.reclaimer.round(STREAM)  # one round, as the reclaim loop runs it
        # The readers may have recreated that group already; this stream has none at all.
        await gateway.reclaimer.round(keys.agent_type_stream("nobody_reads_this"))
        await eventually(lambda: worker_online(redis, "w1"))  # the heartbeat takes it again
        await ask(sdk_client(redis), "s1", "echo still here", "msg-after")
        events = await read_events(redis, "s1", "msg-after")
    assert runner.runs == ["msg-after"] and events[-1].event_type == "appStreamResponse"
    await redis.aclose()
