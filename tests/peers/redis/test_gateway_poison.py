"""No entry on a Redis stream can stop the daemon: poison is acked, logged once and
counted, and the next valid ASK is served (real redis-server, a real ``Daemon`` with
the gateway enabled and a real control plane for pairing; the runner is the stub)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.daemon.statefile import read_state
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.sources.gateway import wire
from tests.support.config import make_config
from tests.support.daemon import WAIT_S, StubRunner
from tests.support.gateway import AGENT, ask, read_events, sdk_client, sdk_redis, start_until_ready
from tests.support.waits import eventually

pytestmark = pytest.mark.redis
STREAM = f"byai_gateway:ctrl:agent_type:{AGENT}"
GROUP = "agent_engines"
DEEP = {"data": "[" * 200_000}  # RecursionError in json.loads, not ValueError


@asynccontextmanager
async def running_daemon(tmp_path: Path, redis_url: str) -> AsyncIterator[Daemon]:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp:
        config = make_config(tmp_path, server_url=cp.url, workspace=tmp_path,
                             gateway__enabled=True, gateway__redis_url=redis_url)
        await pair_device(config.state_dir, cp.url, cp.create_pairing_code(),
                          policy=BossApiRetry.fast())
        daemon = Daemon(config, runner=StubRunner(cards=0), retry_policy=BossApiRetry.fast(),
                        claim_wait_ms=300, handle_signals=False)
        job = await start_until_ready(daemon.run, "daemon")
        try:
            yield daemon
            assert not job.done(), f"the daemon stopped: {job.exception() if job.done() else ''}"
        finally:
            daemon.request_stop()
            await asyncio.wait_for(job, WAIT_S)


async def _serves_next_ask(redis, message_id: str) -> None:
    await ask(sdk_client(redis), "s1", "after poison", message_id,
              extra_payload={"intentCategory": "conversation_reply", "attempt": 1})
    events = await read_events(redis, "s1", message_id)
    assert events[-1].event_type == "appStreamResponse"


async def test_a_deeply_nested_entry_is_poison_and_the_daemon_serves_the_next_ask(
        tmp_path: Path, redis_server) -> None:
    redis = sdk_redis(redis_server.url)
    async with running_daemon(tmp_path, redis_server.url) as daemon:
        await redis.xadd(STREAM, DEEP)
        await redis.xadd(STREAM, {"data": "[" * 200_000, "other": "field"})
        await redis.xadd(STREAM, {"data": json.dumps({"action_type": "ASK_AGENT", "header": {
            "message_id": "msg-types", "session_id": "s1", "trace_id": "t"},
            "body": {"content": "x", "extra_payload": {"attempt": 10 ** 400}}})})
        await _serves_next_ask(redis, "msg-ok")
        await eventually(lambda: daemon.gateway.info["counts"].get("poison", 0) >= 2)
        daemon.write_state()
        state = read_state(daemon.config.state_dir)
        assert state["gateway_poison"] >= 2
    assert (await redis.xpending(STREAM, GROUP))["pending"] == 0
    await redis.aclose()


async def test_an_entry_over_the_size_cap_is_poison_without_parsing(tmp_path: Path, redis_server) -> None:
    redis = sdk_redis(redis_server.url)
    async with running_daemon(tmp_path, redis_server.url) as daemon:
        # Valid JSON, so only the cap can make it poison.
        await redis.xadd(STREAM, {"data": json.dumps({"pad": "x" * wire.MAX_ENTRY_BYTES})})
        await eventually(lambda: daemon.gateway.info["counts"].get("poison", 0) == 1)
        await _serves_next_ask(redis, "msg-ok")
    assert (await redis.xpending(STREAM, GROUP))["pending"] == 0
    await redis.aclose()


async def test_a_poison_entry_reclaimed_from_a_dead_peer_does_not_stop_the_daemon(
        tmp_path: Path, redis_server) -> None:
    redis = sdk_redis(redis_server.url)
    await redis.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    await redis.xadd(STREAM, DEEP)
    await redis.xreadgroup(GROUP, "ghost", {STREAM: ">"}, count=1)  # read, then the peer died
    # Age the pending entry past any lease TTL (XCLAIM's IDLE), as if the peer died long ago.
    [(entry_id, _)] = (await redis.xrange(STREAM))
    await redis.xclaim(STREAM, GROUP, "ghost", 0, [entry_id], idle=10 ** 8)
    async with running_daemon(tmp_path, redis_server.url) as daemon:
        await eventually(lambda: daemon.gateway.info["counts"].get("reclaimed", 0) == 1)
        await _serves_next_ask(redis, "msg-ok")
        assert daemon.gateway.info["counts"]["poison"] == 1
    assert (await redis.xpending(STREAM, GROUP))["pending"] == 0
    await redis.aclose()
