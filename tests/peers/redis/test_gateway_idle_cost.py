"""What an idle gateway worker costs Redis (bench row 14), on a real redis-server.

An idle fleet's traffic is its lease refreshes, blocking-read timeouts and reclaim
rounds; one Redis serves as many idle devices as that traffic allows. Commands are
counted from ``INFO commandstats`` (a script's own commands count too).
"""

from __future__ import annotations

import json

import pytest

from boss_agent.errors import DuplicateWorker
from boss_agent.sources.gateway import GatewayTiming
from boss_agent.sources.gateway.registry import WorkerPresence
from tests.support.gateway import AGENT, ScriptRunner, running_gateway, sdk_redis
from tests.support.waits import eventually

pytestmark = pytest.mark.redis

LEASE = "byai_gateway:registry:worker:online:w1"
MEMBERS = f"byai_gateway:registry:agent_type:workers:{AGENT}"
# Beats fast, never reclaims during the test: what is left is the beat and the reads.
BEATING = GatewayTiming(lease_ttl_s=2, heartbeat_s=0.2, read_block_ms=30_000, reclaim_interval_s=600)


async def _calls(redis) -> dict[str, int]:
    stats = await redis.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items() if name != "cmdstat_info"}


def _spent(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: n - before.get(name, 0) for name, n in after.items() if n > before.get(name, 0)}


async def test_refreshing_an_unchanged_lease_is_one_command_and_keeps_its_ttl_and_owner(redis_server):
    redis = sdk_redis(redis_server.url)
    presence = WorkerPresence(redis, "w1", (AGENT,), 15, {"projects": ["p1"]})
    await presence.acquire()
    value = await redis.get(LEASE)
    await redis.expire(LEASE, 3)  # as if the last refresh was 12 s ago
    before = await _calls(redis)
    assert await presence.refresh() is False
    spent = _spent(before, await _calls(redis))
    assert sum(spent.values()) == 1, spent
    assert await redis.ttl(LEASE) > 10 and await redis.get(LEASE) == value
    # A reload that changed the record rewrites the value (compare-and-set), once.
    presence.record = {"projects": ["p1", "p2"]}
    await presence.refresh()
    assert json.loads(await redis.get(LEASE))["projects"] == ["p1", "p2"]
    before = await _calls(redis)
    await presence.refresh()
    assert sum(_spent(before, await _calls(redis)).values()) == 1


async def test_a_vanished_lease_is_taken_again_with_its_membership_and_a_taken_one_is_refused(redis_server):
    redis = sdk_redis(redis_server.url)
    presence = WorkerPresence(redis, "w1", (AGENT,), 15)
    await presence.acquire()
    await redis.flushall()  # a Redis restart without persistence
    assert await presence.refresh() is True
    assert await redis.exists(LEASE) and await redis.sismember(MEMBERS, "w1")
    await redis.set(LEASE, json.dumps({"version": 1, "token": "another-process", "last_seen": 1}), ex=15)
    with pytest.raises(DuplicateWorker):
        await presence.refresh()


async def test_an_idle_worker_beats_with_one_command_and_counts_nothing_it_has_not_read(redis_server):
    redis = sdk_redis(redis_server.url)
    async with running_gateway(redis_server.url, ScriptRunner(), timing=BEATING) as gateway:
        await eventually(lambda: gateway.info["pending"] == 0)  # the start counted once
        await eventually(lambda: _calls_of(redis, "getex", 1))  # start-up's reads are over
        before = await _calls(redis)
        # Three beats go by (each refreshes the lease with one GETEX)...
        await eventually(lambda: _calls_of(redis, "getex", before.get("getex", 0) + 3))
        spent = _spent(before, await _calls(redis))
    # ...and nothing else: no membership re-adds, no pending counts, no reads (the
    # blocking reads are far longer than the test).
    assert set(spent) == {"getex"}, spent


async def _calls_of(redis, name: str, at_least: int) -> bool:
    return (await _calls(redis)).get(name, 0) >= at_least


async def test_a_record_write_sets_the_record_and_its_message_map_in_one_command(redis_server):
    from boss_agent.sources.gateway.registry import ExecutionRecords, with_status

    redis = sdk_redis(redis_server.url)
    records = ExecutionRecords(redis)
    before = await _calls(redis)
    written = await records.update("s1", "msg-1", lambda _: with_status({"message_id": "msg-1"}, "RUNNING"))
    spent = _spent(before, await _calls(redis))
    assert written is not None
    assert spent.get("hset") == 1, spent  # not one per field
    stored = await redis.hgetall("byai_gateway:session:s1:registry")
    assert stored["msg_map:msg-1"] == written["execution_id"]
    assert json.loads(stored[f"exec:{written['execution_id']}"])["status"] == "RUNNING"
    assert 0 < await redis.ttl("byai_gateway:session:s1:registry")
