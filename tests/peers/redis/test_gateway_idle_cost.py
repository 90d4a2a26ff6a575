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
from tests.support.gateway import (
    AGENT,
    STREAM,
    ScriptRunner,
    raw_ask,
    read_events,
    record_of,
    running_gateway,
    sdk_redis,
)
from tests.support.waits import eventually

pytestmark = pytest.mark.redis

LEASE = "byai_gateway:registry:worker:online:w1"
MEMBERS = f"byai_gateway:registry:agent_type:workers:{AGENT}"
# Beats fast, never reclaims during the test: what is left is the beat and the reads.
BEATING = GatewayTiming(lease_ttl_s=2, heartbeat_s=0.2, read_block_ms=30_000, reclaim_interval_s=600)
# Never beats, reads or reclaims on its own during the test: every command counted is the task's.
QUIET = GatewayTiming(lease_ttl_s=600, heartbeat_s=300, read_block_ms=300_000, reclaim_interval_s=600)
TASK_COMMANDS = 15  # issue 31: what one task may cost Redis through one worker


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
    assert written.record is not None
    assert spent.get("hset") == 1, spent  # not one per field
    stored = await redis.hgetall("byai_gateway:session:s1:registry")
    assert stored["msg_map:msg-1"] == written.execution_id == written.record["execution_id"]
    assert json.loads(stored[f"exec:{written.execution_id}"])["status"] == "RUNNING"
    assert 0 < await redis.ttl("byai_gateway:session:s1:registry")


@pytest.mark.parametrize("queued_by_client", [True, False], ids=["sdk-queued", "bare-ask"])
async def test_one_task_costs_redis_at_most_15_commands_and_still_ends_once(redis_server, queued_by_client):
    """Read, start check, RUNNING, events, terminal record, ack: each a command or a few.

    The SDK client writes a QUEUED record before its ASK (``initialize_execution``); a
    bare ASK (bench row 14's) has none. Either way the record ends COMPLETED, written by
    this worker, with the answer on the stream once. The task streams nothing before
    its answer: each streamed batch is one XADD more, its answer's own cost.
    """
    from by_framework.core.registry import WorkerRegistry

    redis = sdk_redis(redis_server.url)
    async with running_gateway(redis_server.url, ScriptRunner(), timing=QUIET) as gateway:
        await eventually(lambda: gateway.info["pending"] == 0)
        if queued_by_client:
            await WorkerRegistry(redis).initialize_execution({
                "execution_id": "exec-q1", "message_id": "msg-1", "session_id": "s1", "trace_id": "t",
                "status": "QUEUED", "source_agent_type": "client", "target_agent_type": AGENT,
                "cancel_requested": False, "cancel_reason": ""})
        before = await _calls(redis)
        await redis.xadd(STREAM, raw_ask("msg-1", "silent hi"))
        await eventually(lambda: gateway.info["counts"].get("completed", 0) == 1)
        spent = _spent(before, await _calls(redis))
    spent["xadd"] -= 1  # the client's ASK is not the worker's cost
    events = await read_events(redis, "s1", "msg-1")
    record = await record_of(redis, "s1", "msg-1")
    assert sum(spent.values()) <= TASK_COMMANDS, spent
    assert [e.event_type for e in events].count("finalAnswer") == 1
    assert record["status"] == "COMPLETED" and record["worker_id"] == "w1"
    assert [step["status"] for step in record["timeline"]][-2:] == ["RUNNING", "COMPLETED"]
    if queued_by_client:
        assert record["execution_id"] == "exec-q1"
    assert 0 < await redis.ttl("byai_gateway:session:s1:registry")


async def test_a_record_changed_since_it_was_read_is_written_over_the_change_not_instead_of_it(redis_server):
    """The client marks a cancel between our read and our write: the compare-and-set
    finds the change, hands it to the writer and writes again on top of it."""
    from by_framework.core.registry import WorkerRegistry

    from boss_agent.sources.gateway.registry import ExecutionRecords, with_status

    redis = sdk_redis(redis_server.url)
    sdk, records = WorkerRegistry(redis), ExecutionRecords(redis)
    await sdk.initialize_execution({"execution_id": "exec-q1", "message_id": "msg-1", "session_id": "s1",
                                    "status": "QUEUED", "cancel_requested": False})
    known = await records.read("s1", "msg-1")
    await sdk.update_execution_fields("exec-q1", "s1", cancel_requested=True, cancel_reason="stop")
    seen: list[dict] = []

    def mutate(record):
        seen.append(dict(record))
        return with_status(record, "RUNNING", worker_id="w1")

    written = await records.update("s1", "msg-1", mutate, known=known)
    record = await record_of(redis, "s1", "msg-1")
    assert [r["cancel_requested"] for r in seen] == [False, True]
    assert record == written.record
    assert record["status"] == "RUNNING" and record["cancel_requested"] is True
    assert record["cancel_reason"] == "stop" and record["execution_id"] == "exec-q1"


async def test_a_status_write_whose_reply_was_lost_counts_as_written_when_retried(redis_server):
    """Redis wrote the terminal record but the reply never came back: the retry finds our
    own write there and reports the task (events, ack), not "ended elsewhere"."""
    from boss_agent.errors import RedisUnavailable
    from boss_agent.sources.gateway import wire
    from boss_agent.sources.gateway.execution import Reporter, Shared
    from boss_agent.sources.gateway.registry import ExecutionRecords
    from boss_agent.sources.gateway.retry import FAST_POLICY
    from boss_agent.sources.slots import Slots

    class LostReply(ExecutionRecords):
        lost = 0

        async def update(self, *args, **kwargs):
            written = await super().update(*args, **kwargs)
            if self.lost == 0 and written.record and written.record["status"] == "COMPLETED":
                self.lost += 1
                raise RedisUnavailable("connection dropped after the write")
            return written

    redis = sdk_redis(redis_server.url)
    records = LostReply(redis)
    shared = Shared(redis, records, FAST_POLICY, "w1", "agent_engines", ScriptRunner(), Slots(1), AGENT)
    header = wire.parse_header({"message_id": "msg-1", "session_id": "s1", "trace_id": "t"})
    reporter = Reporter(shared, header, None)
    assert await reporter.set_status("RUNNING")
    await reporter.finish("COMPLETED", text="done")
    events = await read_events(redis, "s1", "msg-1")
    record = await record_of(redis, "s1", "msg-1")
    assert records.lost == 1
    assert record["status"] == "COMPLETED"
    assert [e.event_type for e in events] == ["finalAnswer", "appStreamResponse"]
    assert shared.stats["completed"] == 1


async def test_a_status_write_beaten_by_a_peers_terminal_write_is_not_reported_again(redis_server):
    """Two workers end one reclaimed task at once: the peer's COMPLETED lands between our
    read and our write. Ours must find it and stand back (no second answer on the
    stream), not count the attempt it made before the peer's write as its own."""
    import redis as sync_redis

    from boss_agent.sources.gateway import wire
    from boss_agent.sources.gateway.execution import Reporter, Shared
    from boss_agent.sources.gateway.registry import ExecutionRecords, with_status
    from boss_agent.sources.gateway.retry import FAST_POLICY
    from boss_agent.sources.slots import Slots

    peer = sync_redis.Redis.from_url(redis_server.url, decode_responses=True)
    key = "byai_gateway:session:s1:registry"

    class PeerEndsItFirst(ExecutionRecords):
        ended = False

        async def update(self, *args, **kwargs):
            mutate = args[2]

            def racing(record):
                new = mutate(record)
                if new is not None and not self.ended:  # the peer writes after our read
                    self.ended = True
                    execution_id = peer.hget(key, "msg_map:msg-1")
                    done = with_status(dict(record), "COMPLETED", worker_id="w2")
                    peer.hset(key, f"exec:{execution_id}", json.dumps(done))
                return new

            return await super().update(args[0], args[1], racing, *args[3:], **kwargs)

    from boss_agent.sources.gateway.redis_errors import MappedRedis

    redis = MappedRedis.from_url(redis_server.url, decode_responses=True)  # as the gateway's own client
    records = PeerEndsItFirst(redis)
    shared = Shared(redis, records, FAST_POLICY, "w1", "agent_engines", ScriptRunner(), Slots(1), AGENT)
    header = wire.parse_header({"message_id": "msg-1", "session_id": "s1", "trace_id": "t"})
    reporter = Reporter(shared, header, None)
    records.ended = True  # the RUNNING claim goes through untouched
    assert await reporter.set_status("RUNNING")
    records.ended = False
    await reporter.finish("COMPLETED", text="ours")
    stream = await redis.xrange("byai_gateway:session:s1:data_stream")
    record = await record_of(redis, "s1", "msg-1")
    peer.close()
    assert records.ended
    assert record["status"] == "COMPLETED" and record["worker_id"] == "w2"
    assert stream == [] and shared.stats["completed"] == 0
