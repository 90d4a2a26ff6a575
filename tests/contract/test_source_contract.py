"""One contract, two task sources: the Boss HTTP source and the Redis gateway.

Every test runs once per source against the same daemon, the real runner and a real
``codex app-server`` that the daemon does NOT own: the test starts the listener
itself (``--listen ws://127.0.0.1:PORT``) and points ``codex.app_server_url`` at it,
so killing or restarting the daemon leaves codex running, as with a shared
app-server. The scripted model is the witness on the far side: a turn interrupted on
the app-server closes its model stream (``stream_end == "peer_closed"``).

The contract: a task from the source runs on codex and its result is delivered
once; the same task delivered again while it runs is not run twice and takes no second
slot, and the slot goes back when the run ends; a cancel from
the source interrupts the turn and ends the task ``cancelled``; a daemon shutdown
interrupts a running turn on the app-server and ends the task ``cancelled``. One run
per thread (device API §3): a follow-up of a thread whose turn runs waits for it
holding no slot, fails ``thread_busy`` when it waits too long, and a steer joins.
Admission is the registry's, so both sources force a runner that ignores a cancel once
the grace has passed (``cancel_forced``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from boss_agent.codexfeatures import CodexFeatures
from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.demo import scripted_model as sm
from boss_agent.lifecycles import TERMINAL
from boss_agent.sources.gateway import keys
from boss_agent.sources.gateway.wire import CT_TASK
from boss_agent.sources.inflight import CANCEL_FORCED, THREAD_BUSY
from boss_agent.tasks import Task, TaskResult, TaskSink
from tests.support.redis_process import RedisProcess
from tests.support.appserver import Listener
from tests.support.config import make_config
from tests.support.daemon import WAIT_S, FaultProxy, paired_daemon
from tests.support.gateway import AGENT, read_events, record_of, sdk_client, sdk_redis
from tests.support.waits import eventually

pytestmark = [pytest.mark.codex, pytest.mark.redis]

TURN_END_S = 20.0  # codex aborts the model stream well within a second of turn/interrupt
SESSION = "contract"
THREAD_WAIT_S = 0.5  # the thread_busy test's wait for a turn that never ends (its hang is held)
FORCE_GRACE_S = 0.5  # the force test's grace: its runner never stops by itself


@dataclass
class Outcome:
    status: str
    text: str | None
    deliveries: int  # how many times the source saw the result (must be 1)
    error_code: str | None = None
    turn: str | None = None


class BossSide:
    """Tasks submitted to the embedded control plane; results read back from it."""

    name = "boss"

    def __init__(self, cp: ControlPlane, proxy: FaultProxy) -> None:
        self.cp, self.proxy = cp, proxy

    async def submit(self, prompt: str, workdir: Path, key: str, **fields: Any) -> str:
        return self.cp.submit_task(prompt, workdir=str(workdir), **fields)

    async def refs(self, key: str) -> tuple[str, str]:
        """The running task's thread and turn, once its progress carried them."""
        await self.proxy.wait_for(lambda: self.cp.task(key).get("turnId"), timeout=60)
        view = self.cp.task(key)
        return view["codexThreadRef"], view["turnId"]

    async def waits_for_thread(self, key: str) -> None:
        """Its card is queued and says it waits for the thread's running turn."""
        def waiting() -> bool:
            card = self.cp.task(key)["executionProgress"] or {}
            return card.get("status") == "queued" and any(
                w["kind"] == THREAD_BUSY for w in card.get("warnings") or ())
        await self.proxy.wait_for(waiting, timeout=60)

    async def cancel(self, key: str) -> None:
        self.cp.cancel_task(key)  # travels to the device in the next heartbeat answer

    async def redeliver(self, key: str) -> None:
        """The server hands the running task out again (a retried claim answer)."""
        view = self.cp.task(key)
        self.proxy.inject_claim([{**view["task"], "taskId": key, "attempt": view["attempt"]}])
        await self.proxy.wait_for(lambda: not self.proxy.claim_injections)
        handed = len(self.proxy.requests("/tasks/claim"))
        # One claim at a time: the next claim recorded was sent after the answer was handled.
        await self.proxy.wait_for(lambda: len(self.proxy.requests("/tasks/claim")) > handed)

    async def outcome(self, key: str) -> Outcome:
        await self.proxy.wait_for(lambda: self.cp.task(key)["status"] in TERMINAL, timeout=60)
        result = self.cp.task(key)["result"]
        posts = [s for s in self.proxy.requests(f"/{key}/complete") if s.status < 300]
        return Outcome(result["status"], result.get("resultText"), len(posts),
                       (result.get("error") or {}).get("code"), result.get("turnId"))


class GatewaySide:
    """Tasks asked with the by-framework SDK on a real redis-server; events read back."""

    name = "gateway"

    def __init__(self, redis_url: str) -> None:
        self.redis = sdk_redis(redis_url)
        self.client = sdk_client(self.redis)

    async def submit(self, prompt: str, workdir: Path, key: str, **fields: Any) -> str:
        response = await self.client.send_message(
            AGENT, SESSION, prompt, message_id=key, trace_id="trace-1",
            extra_payload={"intentCategory": "conversation_reply", "workdir": str(workdir), **fields})
        assert response.success, response.error
        return key

    async def refs(self, key: str) -> tuple[str, str]:
        """The running task's thread and turn, from its ``running`` state event."""
        events = await read_events(self.redis, SESSION, key, timeout=60,
                                   until=lambda m: bool((m.metadata or {}).get("turnId")))
        return events[-1].metadata["codexThreadRef"], events[-1].metadata["turnId"]

    async def waits_for_thread(self, key: str) -> None:
        """Its card event is queued and says it waits for the thread's running turn."""
        def waiting(message: Any) -> bool:
            if message.data["contentType"] != CT_TASK:
                return False
            card = json.loads(message.data["choices"][0]["delta"]["content"])
            return bool(card["status"] == "queued" and any(
                w["kind"] == THREAD_BUSY for w in card["warnings"]))
        await read_events(self.redis, SESSION, key, timeout=60, until=waiting)

    async def cancel(self, key: str) -> None:
        assert (await self.client.cancel_task(key, SESSION, reason="user stop")).success

    async def redeliver(self, key: str) -> None:
        """The stream carries the running task's ASK again (a duplicate entry)."""
        stream = keys.agent_type_stream(AGENT)
        entries = await self.redis.xrange(stream)
        ask = next(fields for _, fields in entries if key in fields["data"])
        await self.redis.xadd(stream, ask)
        # Read and acked (a skip), while the first entry stays pending until the task ends.
        await eventually(lambda: self._only_first_pending(stream))

    async def _only_first_pending(self, stream: str) -> bool:
        group = (await self.redis.xinfo_groups(stream))[0]
        return group["lag"] == 0 and group["pending"] == 1

    async def outcome(self, key: str) -> Outcome:
        events = await read_events(self.redis, SESSION, key, timeout=60)
        record = await record_of(self.redis, SESSION, key)
        final = [e for e in events if e.event_type == "finalAnswer"]
        text = final[0].data["choices"][0]["delta"]["content"] if final else None
        ends = [e for e in events if e.event_type == "appStreamResponse"]
        turn = (ends[-1].metadata or {}).get("turnId") if ends else None
        return Outcome(str(record.get("status", "")).lower(), text, len(ends),
                       (record.get("error") or {}).get("code"), turn)


@dataclass
class World:
    side: BossSide | GatewaySide
    daemon: Daemon
    model: sm.ScriptedModel
    workdir: Path


@pytest.fixture(params=["boss", "gateway"])
async def world(request: pytest.FixtureRequest, tmp_path: Path, codex_bin: str, codex_home: Path,
                workdir: Path, scripted_model: sm.ScriptedModel,
                redis_server: RedisProcess) -> AsyncIterator[World]:
    listener = Listener(codex_bin, codex_home, [])
    try:
        await listener.ready()
        async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
            proxy.heartbeat_interval_ms = 1000  # a Boss cancel rides the next heartbeat
            gateway = request.param == "gateway"
            config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, codex__bin=codex_bin,
                                 codex__app_server_transport="ws",
                                 codex__app_server_url=listener.url,
                                 gateway__enabled=gateway, gateway__redis_url=redis_server.url,
                                 gateway__agent_types=[AGENT])
            side = GatewaySide(redis_server.url) if gateway else BossSide(cp, proxy)
            async with paired_daemon(config, proxy.url, cp.create_pairing_code(), codex_home) as (daemon, _):
                yield World(side, daemon, scripted_model, workdir)
            if isinstance(side, GatewaySide):
                await side.redis.aclose()
    finally:
        listener.stop()


async def _hung_turn(world: World, key: str) -> str:
    """Start a task whose model stream hangs mid-turn; return the source's key once it does."""
    world.model.enqueue(sm.hang(sm.message("working on it", ["working ", "on it"])))
    key = await world.side.submit("take your time", world.workdir, key)
    await asyncio.to_thread(world.model.wait_for_requests, 1, WAIT_S)
    return key


async def _turn_ended(model: sm.ScriptedModel) -> str:
    """How the hung model stream ended, waiting up to TURN_END_S for codex to end it."""
    return await eventually(
        lambda: model.requests[0].stream_end != "pending" and model.requests[0].stream_end, TURN_END_S)


async def _interrupt_closed_the_stream(model: sm.ScriptedModel, features: CodexFeatures) -> None:
    """The turn/interrupt reached codex: it hangs up on the model (a codex before 0.160
    leaves the request open; the cancelled outcome is then what shows the interrupt)."""
    if features.interrupt_closes_stream:
        assert await _turn_ended(model) == "peer_closed"


async def test_a_task_runs_on_codex_and_its_result_is_delivered_once(world: World) -> None:
    world.model.enqueue(sm.turn(sm.message("Hello world!", ["Hello ", "world!"])))
    key = await world.side.submit("say hello", world.workdir, "msg-run")
    outcome = await world.side.outcome(key)
    assert (outcome.status, outcome.text) == ("completed", "Hello world!")
    assert outcome.deliveries == 1
    assert "say hello" in world.model.requests[0].input_texts()


async def test_a_task_delivered_again_while_it_runs_runs_one_turn_and_reports_once(
    world: World,
) -> None:
    key = await _hung_turn(world, "msg-twice")
    await world.side.redeliver(key)
    runs = world.daemon.runs
    assert runs is not None and runs.slots.used == 1  # the run holds one slot; its copy took none
    world.model.release()
    outcome = await world.side.outcome(key)
    assert (outcome.status, outcome.deliveries) == ("completed", 1)
    assert len(world.model.requests) == 1  # one model request: the turn ran once
    await eventually(lambda: runs.slots.used == 0 and len(runs) == 0)  # handed back on the way out


async def test_a_cancel_from_the_source_interrupts_the_turn_and_ends_the_task_cancelled(
    world: World, codex_features: CodexFeatures,
) -> None:
    key = await _hung_turn(world, "msg-cancel")
    await world.side.cancel(key)
    outcome = await world.side.outcome(key)
    assert outcome.status == "cancelled" and outcome.deliveries == 1
    await _interrupt_closed_the_stream(world.model, codex_features)


async def test_shutdown_interrupts_a_running_turn_on_an_app_server_the_daemon_does_not_own(
    world: World, codex_features: CodexFeatures,
) -> None:
    key = await _hung_turn(world, "msg-stop")
    world.daemon.request_stop()
    outcome = await world.side.outcome(key)
    assert outcome.status == "cancelled" and outcome.deliveries == 1
    # The listener outlives the daemon: only a turn/interrupt ends the model stream.
    await _interrupt_closed_the_stream(world.model, codex_features)


async def test_a_follow_up_of_a_running_turn_waits_without_a_slot_then_runs_its_own_turn(
    world: World,
) -> None:
    # Two slots: the held turn takes one; a waiting follow-up that kept the other would
    # leave none for the new task below.
    first = await _hung_turn(world, "msg-held")
    world.model.enqueue(sm.text_reply("new thread done"), sm.text_reply("follow-up done"))
    thread, turn = await world.side.refs(first)
    follow_up = await world.side.submit("and then this", world.workdir, "msg-follow",
                                        codexThreadRef=thread)
    await world.side.waits_for_thread(follow_up)
    other = await world.side.submit("something else", world.workdir, "msg-other")
    assert (await world.side.outcome(other)).text == "new thread done"
    assert world.model.requests[0].stream_end == "pending"  # the held turn still runs
    world.model.release()
    held, followed = await world.side.outcome(first), await world.side.outcome(follow_up)
    assert held.status == followed.status == "completed", (held, followed)
    assert followed.text == "follow-up done" and held.turn == turn
    assert followed.turn and followed.turn != turn  # its own turn, not folded into the held one


async def test_a_follow_up_still_waiting_after_the_approval_timeout_fails_thread_busy(
    world: World,
) -> None:
    world.daemon.runs.thread_wait_s = THREAD_WAIT_S
    first = await _hung_turn(world, "msg-busy")
    thread, _ = await world.side.refs(first)
    follow_up = await world.side.submit("and then this", world.workdir, "msg-late",
                                        codexThreadRef=thread)
    outcome = await world.side.outcome(follow_up)
    assert (outcome.status, outcome.error_code, outcome.deliveries) == ("failed", THREAD_BUSY, 1)
    assert len(world.model.requests) == 1  # it never reached codex
    world.model.release()
    assert (await world.side.outcome(first)).status == "completed"


# A steer into a hung response: a codex before 0.169 holds it until the response ends.
@pytest.mark.codex_feature("immediate_steer")
async def test_a_steer_joins_the_running_turn_instead_of_waiting_for_it(world: World) -> None:
    first = await _hung_turn(world, "msg-steered")
    world.model.enqueue(sm.text_reply("steered answer"))
    thread, turn = await world.side.refs(first)
    steer = await world.side.submit("focus on the tests", world.workdir, "msg-steer",
                                    codexThreadRef=thread, targetCodexTurnId=turn)
    steered, held = await world.side.outcome(steer), await world.side.outcome(first)
    assert (steered.status, steered.text, steered.turn) == ("completed", "steered answer", turn), steered
    assert held.status == "completed" and held.turn == turn
    assert "focus on the tests" in world.model.requests[-1].input_texts()


async def test_a_runner_that_ignores_a_cancel_is_forced_after_the_grace_and_reported_once(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = world.daemon.runner
    assert runner is not None
    real = runner.run

    async def deaf(task: Task, sink: TaskSink, cancel: asyncio.Event) -> TaskResult:
        return await real(task, sink, asyncio.Event())  # a cancel never reaches the turn

    monkeypatch.setattr(runner, "run", deaf)
    world.daemon.runs.cancel_grace_s = FORCE_GRACE_S
    key = await _hung_turn(world, "msg-deaf")
    await world.side.refs(key)  # its turn runs
    await world.side.cancel(key)
    outcome = await world.side.outcome(key)
    assert (outcome.status, outcome.error_code, outcome.deliveries) == ("cancelled", CANCEL_FORCED, 1), outcome
    world.model.release()
