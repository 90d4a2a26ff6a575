"""A failure inside one task source stops neither the daemon nor the other source.

The failure comes from a real redis-server that answers something the gateway does
not expect: the test turns the worker's control stream into a plain string, so the
gateway's control reader gets ``WRONGTYPE`` (not an outage, so not retried) and the
error escapes the gateway's loops, and every restart fails the same way until the
key is repaired. Meanwhile the Boss source keeps claiming and completing tasks; once
the key is gone the supervisor's next restart brings the gateway back.

A source that fails with a turn running first interrupts that turn on the
app-server (one the daemon does not own, so nothing else would stop it) and reports
its task cancelled; the scripted model sees the turn's stream closed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.codexfeatures import CodexFeatures
from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon, gateway_worker_id
from boss_agent.demo import scripted_model as sm
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.sources.gateway import keys
from tests.support.redis_process import RedisProcess
from tests.support.config import make_config
from tests.support.daemon import WAIT_S, FaultProxy, StubRunner, serving
from tests.support.appserver import Listener
from tests.support.gateway import AGENT, ask, read_events, record_of, sdk_client, sdk_redis
from tests.support.waits import eventually

pytestmark = pytest.mark.redis

FAST = BossApiRetry.fast()
TURN_END_S = 30.0  # the wind-down interrupts the turn at once; codex ends the stream within ms


def _restarts(daemon: Daemon) -> int:
    return sum(getattr(s, "restarts", 0) for s in getattr(daemon, "supervisors", []))


async def test_a_gateway_that_keeps_failing_leaves_the_boss_source_claiming_and_completing(
    tmp_path: Path, redis_server: RedisProcess,
) -> None:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
        config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, gateway__enabled=True,
                             gateway__redis_url=redis_server.url, gateway__agent_types=[AGENT])
        identity = await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(),
                                     policy=FAST)
        daemon = Daemon(config, runner=StubRunner(cards=1), retry_policy=FAST, claim_wait_ms=300,
                        handle_signals=False)
        redis = sdk_redis(redis_server.url)
        control = keys.worker_stream(gateway_worker_id(identity.device_id))
        async with serving(daemon) as job:
            await redis.delete(control)
            await redis.set(control, "not a stream")
            # Main (before supervision) ends here: the gateway's error ends the daemon.
            await eventually(lambda: job.done() or _restarts(daemon) >= 2, WAIT_S)  # failed, again
            task_id = cp.submit_task("while the gateway is down")
            await proxy.wait_for(lambda: cp.task(task_id)["status"] == "completed")
            assert not job.done()
            boss_result = cp.task(task_id)["result"]
            await redis.delete(control)  # repaired: the next restart serves again
            await eventually(lambda: daemon.gateway.info["ready"], WAIT_S)
            await ask(sdk_client(redis), "s1", "after the repair", "msg-back",
                      extra_payload={"intentCategory": "conversation_reply"})
            events = await read_events(redis, "s1", "msg-back", timeout=60)
        await redis.aclose()
    assert boss_result["resultText"] == "done: while the gateway is down"
    assert [e.event_type for e in events][-1] == "appStreamResponse"
    assert _restarts(daemon) >= 2


@pytest.mark.codex
async def test_a_failing_gateway_interrupts_its_running_turn_before_it_restarts(
    tmp_path: Path, redis_server: RedisProcess, codex_bin: str, codex_home: Path, workdir: Path,
    scripted_model: sm.ScriptedModel, codex_features: CodexFeatures,
) -> None:
    listener = Listener(codex_bin, codex_home, [])
    try:
        await listener.ready()
        async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
            config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, codex__bin=codex_bin,
                                 codex__app_server_transport="ws",
                                 codex__app_server_url=listener.url, gateway__enabled=True,
                                 gateway__redis_url=redis_server.url, gateway__agent_types=[AGENT])
            identity = await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(),
                                         policy=FAST)
            daemon = Daemon(config, codex_home=codex_home, env={"CODEX_HOME": str(codex_home)},
                            retry_policy=FAST, claim_wait_ms=300, handle_signals=False)
            redis = sdk_redis(redis_server.url)
            control = keys.worker_stream(gateway_worker_id(identity.device_id))
            scripted_model.enqueue(sm.hang(sm.message("working on it", ["working ", "on it"])))
            async with serving(daemon) as job:
                await ask(sdk_client(redis), "s1", "take your time", "msg-hang",
                          extra_payload={"intentCategory": "conversation_reply",
                                         "workdir": str(workdir)})
                await asyncio.to_thread(scripted_model.wait_for_requests, 1, WAIT_S)
                await redis.delete(control)
                await redis.set(control, "not a stream")
                # A codex before 0.160 leaves the model request open on turn/interrupt.
                ended = await eventually(lambda: scripted_model.requests[0].stream_end != "pending"
                                         and scripted_model.requests[0].stream_end, TURN_END_S) \
                    if codex_features.interrupt_closes_stream else None
                record = await eventually(lambda: _ended_record(redis, "msg-hang"), WAIT_S)
                assert not job.done()
                await redis.delete(control)
            await redis.aclose()
    finally:
        listener.stop()
    # The turn was interrupted on the app-server (on a codex that shows it this way).
    assert ended == ("peer_closed" if codex_features.interrupt_closes_stream else None)
    assert record["status"] == "CANCELLED"


async def _ended_record(redis: object, message_id: str) -> dict[str, object] | None:
    record = await record_of(redis, "s1", message_id)  # type: ignore[arg-type]
    return record if record.get("status") in ("COMPLETED", "FAILED", "CANCELLED") else None
