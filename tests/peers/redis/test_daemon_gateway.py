"""With ``gateway.enabled`` the daemon serves the Redis gateway and the Boss control
plane at once, on the same runner (real redis-server, real ControlPlane, the
by-framework SDK as the gateway peer)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon, gateway_worker_id
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.sources.gateway.registry import worker_online
from tests.support.config import make_config
from tests.support.daemon import WAIT_S, FaultProxy, StubRunner
from tests.support.gateway import (
    ask,
    delta_text,
    read_events,
    sdk_client,
    sdk_redis,
)

pytestmark = pytest.mark.redis


async def test_the_daemon_serves_the_gateway_and_the_control_plane_together(
    tmp_path: Path, redis_server,
) -> None:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
        config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, gateway__enabled=True,
                             gateway__redis_url=redis_server.url)
        identity = await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(),
                                     policy=BossApiRetry.fast())
        runner = StubRunner(cards=1)
        daemon = Daemon(config, runner=runner, retry_policy=BossApiRetry.fast(), claim_wait_ms=300,
                        handle_signals=False)
        ready = asyncio.Event()
        redis = sdk_redis(redis_server.url)
        async with asyncio.TaskGroup() as tg:
            job = tg.create_task(daemon.run(ready))
            await asyncio.wait_for(ready.wait(), WAIT_S)
            worker = gateway_worker_id(identity.device_id)
            await ask(sdk_client(redis), "s1", "from redis", "msg-1",
                      extra_payload={"intentCategory": "conversation_reply", "attempt": 1})
            events = await read_events(redis, "s1", "msg-1")
            task_id = cp.submit_task("from boss")
            await proxy.wait_for(lambda: cp.task(task_id)["status"] == "completed")
            assert await worker_online(redis, worker)
            boss_result = cp.task(task_id)["result"]
            daemon.request_stop()
            await asyncio.wait_for(job, WAIT_S)
        await redis.aclose()
    final = [e for e in events if e.event_type == "finalAnswer"]
    assert final and delta_text(final[0]) == "done: from redis"
    assert boss_result["resultText"] == "done: from boss"
    assert sorted(runner.runs) == ["msg-1", task_id]
