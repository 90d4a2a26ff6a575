"""A fleet on one real redis-server: whole daemons on real codex with the scripted model.

by-framework 0.2.1's GatewayClient drives every test. Each device has its own state
dir and its own CODEX_HOME, so a follow-up that reached the wrong device could not
even resume its thread. No Boss server runs in any of these tests: every device is
gateway-only. One device is a real ``python -m boss_agent run`` process, SIGKILLed
while its task runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from by_framework.core.protocol.data_message import DataMessage

from boss_agent.cli.doctor import check_redis, check_server
from boss_agent.cli.status import collect_status
from boss_agent.config import Config, load_config
from boss_agent.daemon.runtime import Daemon, gateway_worker_id
from boss_agent.demo import scripted_model as sm
from boss_agent.identity import LOCAL_ID_FILE
from boss_agent.sources.gateway import keys
from tests.support.gateway import AGENT, ask, delta_text, read_events, record_of, sdk_client, sdk_redis
from tests.support.waits import eventually
from tests.support.cli import cli_env

pytestmark = [pytest.mark.codex, pytest.mark.redis, pytest.mark.asyncio]

TURN_WAIT_S = 60.0  # a real codex turn on a loaded 2-core machine, with slack
START_WAIT_S = 60.0  # a daemon start: codex app-server, lease, groups
RECLAIM_WAIT_S = 90.0  # the dead worker's 15 s lease must expire, then a reclaim round (5 s)
STOP_WAIT_S = 30.0


@pytest.fixture
def model() -> Iterator[sm.ScriptedModel]:
    with sm.ScriptedModel() as scripted:
        try:
            yield scripted
        finally:
            scripted.release()


def device(tmp: Path, name: str, model: sm.ScriptedModel, codex_bin: str, redis_url: str,
           agent: str = AGENT, max_concurrent: int = 1) -> tuple[dict[str, Any], Path]:
    """A gateway-only device's settings (no server.url) and its own CODEX_HOME."""
    home = sm.write_codex_home(tmp / name / "codex-home", model.base_url)
    workspace = tmp / name / "ws"
    workspace.mkdir(parents=True)
    settings = {"state_dir": str(tmp / name / "state"), "workspaces": [str(workspace)],
                "codex.bin": codex_bin, "codex.sandbox": "danger-full-access",
                "codex.max_sandbox": "danger-full-access", "grace_period_s": 0,
                "max_concurrent_tasks": max_concurrent, "gateway.enabled": True,
                "gateway.redis_url": redis_url, "gateway.agent_types": [agent]}
    return settings, home


def config_of(settings: dict[str, Any]) -> Config:
    return load_config(overrides=settings, environ={})


@contextlib.asynccontextmanager
async def running_daemon(config: Config, home: Path) -> AsyncIterator[Daemon]:
    daemon = Daemon(config, codex_home=home, env={"CODEX_HOME": str(home)}, handle_signals=False)
    ready = asyncio.Event()
    job = asyncio.create_task(daemon.run(ready))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({job, waiter}, timeout=START_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if job.done():
        job.result()
    assert ready.is_set(), "daemon did not start"
    try:
        yield daemon
    finally:
        daemon.request_stop()
        try:
            await asyncio.wait_for(asyncio.shield(job), STOP_WAIT_S)
        except TimeoutError:
            daemon.request_stop()  # the second request interrupts what still runs
            await asyncio.wait_for(job, STOP_WAIT_S)


def final_of(events: list[DataMessage]) -> DataMessage:
    return next(e for e in events if e.event_type == "finalAnswer")


async def test_a_gateway_only_device_serves_an_sdk_ask_with_no_boss_server(
        tmp_path: Path, model: sm.ScriptedModel, codex_bin: str, redis_server) -> None:
    settings, home = device(tmp_path, "solo", model, codex_bin, redis_server.url)
    config = config_of(settings)
    assert config.server_url is None
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    model.enqueue(sm.turn(sm.message("fleet answer", ["fleet ", "answer"])),
                  sm.text_reply("second answer"))
    async with running_daemon(config, home) as daemon:
        worker = daemon.gateway.worker_id
        await ask(client, "s-solo", "remember the word heliotrope", "m-1")
        first = await read_events(redis, "s-solo", "m-1", timeout=TURN_WAIT_S)
        thread = final_of(first).metadata["codexThreadRef"]
        await ask(client, "s-solo", "what was the word?", "m-2", extra_payload={"codexThreadRef": thread})
        second = await read_events(redis, "s-solo", "m-2", timeout=TURN_WAIT_S)
        await ask(client, "s-solo", "lost", "m-3", extra_payload={"codexThreadRef": "0199-no-such-thread"})
        lost = await read_events(redis, "s-solo", "m-3", timeout=TURN_WAIT_S)
        records = {m: await record_of(redis, "s-solo", m) for m in ("m-1", "m-2", "m-3")}
        daemon.write_state()
        status = collect_status(config)
        doctor = await check_redis(config)
        server = await check_server(config)
    await redis.aclose()
    local_id = (config.state_dir / LOCAL_ID_FILE).read_text().strip()
    assert worker == gateway_worker_id(local_id)
    assert delta_text(final_of(first)) == "fleet answer"
    assert delta_text(final_of(second)) == "second answer"
    assert any("heliotrope" in t for t in model.requests[-1].input_texts())  # the thread was resumed
    for events in (first, second):
        meta = final_of(events).metadata
        assert meta == events[-1].metadata and meta["codexThreadRef"] == thread and meta["turnId"]
    assert final_of(first).metadata["turnId"] != final_of(second).metadata["turnId"]
    assert records["m-1"]["worker_id"] == records["m-2"]["worker_id"] == worker
    assert records["m-3"]["status"] == "FAILED" and records["m-3"]["error"]["code"] == "thread_not_found"
    assert lost[-1].event_type == "appStreamResponse" and len(model.requests) == 2
    gateway = status["gateway"]
    assert status["deviceId"] == local_id and status["paired"] is False
    assert gateway["gatewayOnly"] is True and gateway["workerId"] == worker
    assert gateway["redisReachable"] is True and gateway["poison"] == 0 and gateway["threads"] == 1
    assert doctor["result"] == "ok" and "worker lease held" in doctor["detail"]
    assert server["result"] == "ok" and "gateway-only" in server["detail"]


# A steer into a hung response: a codex before 0.169 holds it until the response ends.
@pytest.mark.codex_feature("immediate_steer")
async def test_two_devices_split_tasks_and_follow_ups_and_steers_reach_the_thread_holder(
        tmp_path: Path, model: sm.ScriptedModel, codex_bin: str, redis_server) -> None:
    first_settings, first_home = device(tmp_path, "d1", model, codex_bin, redis_server.url)
    second_settings, second_home = device(tmp_path, "d2", model, codex_bin, redis_server.url)
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    model.enqueue(sm.text_reply("first answer"), sm.hang(sm.message("partial")),
                  sm.text_reply("third answer"))
    async with running_daemon(config_of(first_settings), first_home) as d1, \
            running_daemon(config_of(second_settings), second_home) as d2:
        daemons = {d.gateway.worker_id: d for d in (d1, d2)}
        await ask(client, "s-2", "start a thread", "m-1")
        first = await read_events(redis, "s-2", "m-1", timeout=TURN_WAIT_S)
        thread = final_of(first).metadata["codexThreadRef"]
        holder_id = (await record_of(redis, "s-2", "m-1"))["worker_id"]
        holder = daemons[holder_id]
        other = next(d for w, d in daemons.items() if w != holder_id)
        # A long turn on the thread: the holder's only slot is now busy.
        await ask(client, "s-2", "a long job", "m-2", extra_payload={"codexThreadRef": thread})
        running = await read_events(redis, "s-2", "m-2", timeout=TURN_WAIT_S,
                                    until=lambda m: bool(m.metadata.get("turnId")))
        turn = running[-1].metadata["turnId"]
        await eventually(lambda: len(model.requests) >= 2, timeout=TURN_WAIT_S)
        # A new task can only be read by the other device.
        await ask(client, "s-2", "something else", "m-3")
        third = await read_events(redis, "s-2", "m-3", timeout=TURN_WAIT_S)
        # A follow-up on the thread: read by the other device, forwarded, queued on the holder.
        # (m-2 was forwarded too if the other device happened to read it.)
        base = other.gateway.info["counts"].get("forwarded", 0)
        await ask(client, "s-2", "and then?", "m-4", extra_payload={"codexThreadRef": thread})
        await eventually(lambda: other.gateway.info["counts"].get("forwarded") == base + 1, TURN_WAIT_S)
        model.enqueue(sm.text_reply("steered answer"), sm.text_reply("follow-up answer"))
        # A steer of the running turn: forwarded too, and it needs no slot on the holder.
        await ask(client, "s-2", "focus on the tests", "m-5",
                  extra_payload={"codexThreadRef": thread, "targetCodexTurnId": turn})
        ends = {m: await read_events(redis, "s-2", m, timeout=TURN_WAIT_S) for m in ("m-2", "m-4", "m-5")}
        records = {m: await record_of(redis, "s-2", m) for m in ("m-1", "m-2", "m-3", "m-4", "m-5")}
        forwarded = other.gateway.info["counts"].get("forwarded")
        holder_forwarded = holder.gateway.info["counts"].get("forwarded", 0)
    await redis.aclose()
    assert {r["status"] for r in records.values()} == {"COMPLETED"}
    assert records["m-3"]["worker_id"] == other.gateway.worker_id  # the tasks were split
    assert delta_text(final_of(third)) == "third answer"
    for message_id in ("m-1", "m-2", "m-4", "m-5"):
        assert records[message_id]["worker_id"] == holder_id, message_id
    assert forwarded == base + 2 and holder_forwarded == 0
    assert delta_text(final_of(ends["m-5"])) == "steered answer"
    assert final_of(ends["m-5"]).metadata == {"codexThreadRef": thread, "turnId": turn}
    assert delta_text(final_of(ends["m-4"])) == "follow-up answer"
    assert any("focus on the tests" in t for t in model.requests[3].input_texts())
    assert any("start a thread" in t for t in model.requests[-1].input_texts())  # the holder's disk


def _subprocess_env(settings: dict[str, Any], home: Path, worker_id: str) -> dict[str, str]:
    empty = home.parent / "config.toml"
    empty.write_text("")
    return cli_env(home.parent, **{
        "BOSS_AGENT_CONFIG": str(empty), "CODEX_HOME": str(home),
        "BOSS_STATE_DIR": settings["state_dir"], "BOSS_WORKSPACES": settings["workspaces"][0],
        "BOSS_CODEX_BIN": settings["codex.bin"], "BOSS_CODEX_SANDBOX": "danger-full-access",
        "BOSS_CODEX_MAX_SANDBOX": "danger-full-access", "BOSS_MAX_CONCURRENT_TASKS": "1",
        "BOSS_GATEWAY_ENABLED": "true", "BOSS_REDIS_URL": settings["gateway.redis_url"],
        "BOSS_GATEWAY_AGENT_TYPES": ",".join(settings["gateway.agent_types"]),
        "BOSS_GATEWAY_WORKER_ID": worker_id, "BOSS_LOG_LEVEL": "debug",
    })


async def test_a_worker_killed_mid_task_has_the_task_failed_by_its_peer_and_never_run_again(
        tmp_path: Path, model: sm.ScriptedModel, codex_bin: str, redis_server) -> None:
    agent = "boss_fleet_kill"
    doomed_settings, doomed_home = device(tmp_path, "doomed", model, codex_bin, redis_server.url, agent)
    peer_settings, peer_home = device(tmp_path, "peer", model, codex_bin, redis_server.url, agent)
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    model.enqueue(sm.hang(sm.message("working on it")))
    log = (tmp_path / "doomed.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "boss_agent", "run", stdin=subprocess.DEVNULL, stdout=log,
        stderr=subprocess.STDOUT, env=_subprocess_env(doomed_settings, doomed_home, "w-doomed"))
    try:
        # Online for a client: its lease and its agent-type membership (written just after).
        await eventually(lambda: redis.sismember(keys.agent_type_members(agent), "w-doomed"), START_WAIT_S)
        response = await client.send_message(agent, "s-k", "a long job", message_id="m-k", trace_id="t")
        assert response.success, response.error
        await read_events(redis, "s-k", "m-k", timeout=TURN_WAIT_S,
                          until=lambda m: bool(m.metadata.get("turnId")))
        await eventually(lambda: len(model.requests) == 1, timeout=TURN_WAIT_S)
        running = await record_of(redis, "s-k", "m-k")
        proc.kill()
        await asyncio.wait_for(proc.wait(), STOP_WAIT_S)
        async with running_daemon(config_of(peer_settings), peer_home) as peer:
            events = await read_events(redis, "s-k", "m-k", timeout=RECLAIM_WAIT_S)
            record = await record_of(redis, "s-k", "m-k")
            counts = dict(peer.gateway.info["counts"])
    finally:
        if proc.returncode is None:
            proc.kill()
            await asyncio.wait_for(proc.wait(), STOP_WAIT_S)
        log.close()
        await redis.aclose()
    assert running["status"] == "RUNNING" and running["worker_id"] == "w-doomed"
    assert record["status"] == "FAILED" and record["error"]["code"] == "agent_restarted"
    assert record["worker_id"] == peer.gateway.worker_id
    assert events[-1].event_type == "appStreamResponse"
    assert counts.get("reclaimed") == 1
    assert len(model.requests) == 1  # never run again
