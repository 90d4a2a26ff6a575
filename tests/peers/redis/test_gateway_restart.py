"""A daemon restarted right after a SIGKILL finds its predecessor's worker lease
still in Redis; the gateway waits it out instead of failing as a duplicate (found by
tests/soak/test_chaos.py: the restarted daemon died of DuplicateWorker)."""

from __future__ import annotations

import pytest

from boss_agent.sources.gateway import keys
from boss_agent.sources.gateway.registry import WorkerPresence
from tests.support.gateway import AGENT, FAST, ScriptRunner, ask, read_events, running_gateway, sdk_client, sdk_redis

pytestmark = pytest.mark.redis


async def test_a_lease_left_by_a_killed_predecessor_is_waited_out_not_fatal(redis_server) -> None:
    redis = sdk_redis(redis_server.url)
    predecessor = WorkerPresence(redis, "w1", (AGENT,), FAST.lease_ttl_s)
    await predecessor.acquire()  # then SIGKILLed: nobody refreshes it
    assert await redis.exists(keys.worker_lease("w1"))
    runner = ScriptRunner()
    async with running_gateway(redis_server.url, runner, "w1"):
        await ask(sdk_client(redis), "s1", "echo back", "msg-r")
        events = await read_events(redis, "s1", "msg-r")
    assert runner.runs == ["msg-r"] and events[-1].event_type == "appStreamResponse"
    await redis.aclose()
