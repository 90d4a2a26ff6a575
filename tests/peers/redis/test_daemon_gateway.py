"""With ``gateway.enabled`` the daemon serves the Redis gateway and the Boss control
plane at once, on the same runner (real redis-server, real ControlPlane, the
by-framework SDK as the gateway peer)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from boss_agent.config import load_config
from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon, gateway_worker_id
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.sources.gateway import keys
from boss_agent.sources.gateway.registry import worker_online
from tests.support.config import make_config
from tests.support.daemon import WAIT_S, FaultProxy, StubRunner, serving
from tests.support.waits import eventually
from tests.support.gateway import (
    ask,
    delta_text,
    read_events,
    sdk_client,
    sdk_redis,
)

pytestmark = pytest.mark.redis


@contextlib.asynccontextmanager
async def boss_and_gateway(tmp_path: Path, redis_url: str,
                           runner: StubRunner) -> AsyncIterator[tuple[ControlPlane, FaultProxy, str]]:
    """A daemon paired with a real control plane and serving Redis too, on ``runner``;
    yields the control plane, its proxy and the gateway's worker id."""
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
        config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, gateway__enabled=True,
                             gateway__redis_url=redis_url)
        identity = await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(),
                                     policy=BossApiRetry.fast())
        daemon = Daemon(config, runner=runner, retry_policy=BossApiRetry.fast(), claim_wait_ms=300,
                        handle_signals=False)
        async with serving(daemon):
            yield cp, proxy, gateway_worker_id(identity.device_id)


async def test_the_daemon_serves_the_gateway_and_the_control_plane_together(
    tmp_path: Path, redis_server,
) -> None:
    runner = StubRunner(cards=1)
    redis = sdk_redis(redis_server.url)
    async with boss_and_gateway(tmp_path, redis_server.url, runner) as (cp, proxy, worker):
        await ask(sdk_client(redis), "s1", "from redis", "msg-1",
                  extra_payload={"intentCategory": "conversation_reply", "attempt": 1})
        events = await read_events(redis, "s1", "msg-1")
        task_id = cp.submit_task("from boss")
        await proxy.wait_for(lambda: cp.task(task_id)["status"] == "completed")
        assert await worker_online(redis, worker)
        boss_result = cp.task(task_id)["result"]
    await redis.aclose()
    final = [e for e in events if e.event_type == "finalAnswer"]
    assert final and delta_text(final[0]) == "done: from redis"
    assert boss_result["resultText"] == "done: from boss"
    assert sorted(runner.runs) == ["msg-1", task_id]


async def test_a_thread_a_boss_task_started_is_published_so_redis_can_follow_it_up(
    tmp_path: Path, redis_server,
) -> None:
    """The fleet registry holds every Codex thread this device has, whichever source
    started it: while the Boss task runs, its thread and live turn name this worker;
    after it, the turn is gone and the thread stays, so a Redis follow-up naming the
    thread is run here instead of failing ``thread_not_found``."""
    runner = StubRunner(cards=1, hold=True, thread="thr-from-boss")
    redis = sdk_redis(redis_server.url)

    async def holder(key: str) -> str | None:
        return await redis.get(key)  # the SDK's client decodes

    async with boss_and_gateway(tmp_path, redis_server.url, runner) as (cp, proxy, worker):
        task_id = cp.submit_task("from boss")
        await asyncio.wait_for(runner.started_event(task_id).wait(), WAIT_S)
        await eventually(lambda: holder(keys.thread_holder("thr-from-boss")))
        assert await holder(keys.thread_holder("thr-from-boss")) == worker
        assert await holder(keys.turn_holder("turn_1")) == worker  # a live turn: a steer finds it
        runner.release.set()
        await proxy.wait_for(lambda: cp.task(task_id)["status"] == "completed")
        await eventually(lambda: _gone(redis, keys.turn_holder("turn_1")))
        assert await holder(keys.thread_holder("thr-from-boss")) == worker
        await ask(sdk_client(redis), "s1", "follow up", "msg-2",
                  extra_payload={"intentCategory": "conversation_reply", "attempt": 1,
                                 "codexThreadRef": "thr-from-boss"})
        events = await read_events(redis, "s1", "msg-2")
    await redis.aclose()
    final = [e for e in events if e.event_type == "finalAnswer"]
    assert final and delta_text(final[0]) == "done: follow up", [e.event_type for e in events]
    assert runner.runs == [task_id, "msg-2"]


async def _gone(redis, key: str) -> bool:
    return not await redis.exists(key)


async def test_a_reload_that_changes_the_projects_is_advertised_to_the_fleet(
    tmp_path: Path, redis_server,
) -> None:
    """``projects`` is a live key: after SIGHUP the worker's lease names the new project
    ids within one lease refresh, so peers route a new project's ASKs here at once."""
    web, api = tmp_path / "web", tmp_path / "api"
    web.mkdir()
    api.mkdir()
    path = tmp_path / "config.toml"

    def write(projects: str) -> None:
        path.write_text(f'state_dir = "{tmp_path / "state"}"\nworkspaces = ["{tmp_path}"]\n'
                        f'grace_period_s = 0\n[gateway]\nenabled = true\nredis_url = "{redis_server.url}"\n'
                        f'[projects]\n{projects}\n')

    write(f'web = "{web}"')
    daemon = Daemon(load_config(path, environ={}), runner=StubRunner(), handle_signals=False)
    redis = sdk_redis(redis_server.url)

    async def advertised() -> list[str]:
        raw = await redis.get(keys.worker_lease(daemon.gateway.worker_id)) if daemon.gateway else None
        return sorted(json.loads(raw).get("projects", [])) if raw else []

    async with serving(daemon):
        assert await eventually(advertised) == ["web"]
        write(f'web = "{web}"\napi = "{api}"')
        daemon.reload_config()
        await eventually(lambda: _is(advertised, ["api", "web"]))
    await redis.aclose()


async def _is(read, expected: list[str]) -> bool:
    return await read() == expected
