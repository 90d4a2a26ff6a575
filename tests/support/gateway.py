"""Helpers for the gateway tests: a small in-test runner, a running gateway, the SDK peer.

The runner is the legitimate seam here (the issue's own benchmark uses a no-op
runner): these tests are about routing on the wire, with a real redis-server and
by-framework 0.2.1's client as the peer. The real codex runner is tested elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, cast

import redis.asyncio as aioredis
import redis.exceptions as redis_errors
from by_framework.client.client import GatewayClient
from by_framework.core.protocol.commands import AskAgentCommand
from by_framework.core.protocol.message_header import MessageHeader
from by_framework.core.protocol.data_message import DataMessage
from by_framework.core.registry import WorkerRegistry

from boss_agent.config import Config, load_config
from boss_agent.progress.card import Artifact, new_card
from boss_agent.progress.reducer import reduce
from boss_agent.sources.gateway import Gateway, GatewayTiming
from boss_agent.sources.gateway.retry import FAST_POLICY
from boss_agent.tasks import ApprovalRequest, Task, TaskResult

# XREAD on a client with decode_responses (the SDK's): streams, entry ids and fields as text.
TextStreamReply = list[tuple[str, list[tuple[str, dict[str, str]]]]]

AGENT = "boss_local_agent"
STREAM = f"byai_gateway:ctrl:agent_type:{AGENT}"  # where an ask for AGENT arrives
GROUP = "agent_engines"  # the workers' consumer group on it
WAIT_S = 15.0  # generous bound for any awaited condition on a loaded 2-core machine
FAST = GatewayTiming(lease_ttl_s=2, heartbeat_s=0.3, read_block_ms=200, reclaim_interval_s=0.3)


def gateway_config(redis_url: str, agent_types: tuple[str, ...] = (AGENT,)) -> Config:
    return load_config(overrides={"gateway.redis_url": redis_url,
                                  "gateway.agent_types": list(agent_types)}, environ={})


class ScriptRunner:
    """A TaskRunner driven by the prompt: ``echo X``, ``silent X``, ``approve X``, ``wait``, ``hold``, ``card``."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()  # ``hold`` tasks finish when the test opens it
        self.runs: list[str] = []
        self.started: dict[str, asyncio.Event] = {}
        self.decisions: dict[str, Any] = {}

    def started_event(self, task_id: str) -> asyncio.Event:
        return self.started.setdefault(task_id, asyncio.Event())

    async def run(self, task: Task, sink: Any, cancel: asyncio.Event) -> TaskResult:
        self.runs.append(task.task_id)
        self.started_event(task.task_id).set()
        verb, _, rest = task.prompt.partition(" ")
        if verb == "wait":
            await cancel.wait()
            return TaskResult("cancelled", error_code="cancelled")
        if verb == "boom":
            raise RuntimeError("runner bug")
        if verb == "hold":
            await self.gate.wait()
            return TaskResult("completed", result_text="held")
        if verb == "approve":
            decision = await sink.request_approval(ApprovalRequest(
                "ap1", "command", "run the tests", "low", ("accept", "decline", "cancel")))
            self.decisions[task.task_id] = decision
            if cancel.is_set():
                return TaskResult("cancelled")
            return TaskResult("completed", result_text=f"{rest} {decision}")
        if verb == "silent":  # the answer with nothing streamed before it
            return TaskResult("completed", result_text=rest)
        if verb == "card":
            card = reduce(new_card().evolve(status="running"), {"method": "item/started", "params": {
                "item": {"type": "agentMessage", "id": "m", "text": ""}}})
            for piece in ("Hel", "lo wor", "ld"):
                card = reduce(card, {"method": "item/agentMessage/delta", "params": {"delta": piece}})
                await sink.progress(card)
            card = reduce(card, {"method": "item/completed", "params": {
                "item": {"type": "agentMessage", "id": "m", "text": "Hello world"}}})
            await sink.progress(card.evolve(status="completed", artifacts=(Artifact("report.md", "document"),)))
            return TaskResult("completed", result_text="Hello world")
        # A finished line: the streaming sanitizer holds back nothing of it, so the
        # answer goes out as one event (a half-arrived last word would wait for close).
        await sink.answer_delta(rest + "\n")
        return TaskResult("completed", result_text=rest)


async def start_until_ready(run: Callable[[asyncio.Event], Coroutine[Any, Any, None]],
                            what: str) -> asyncio.Task[None]:
    """Start ``run(ready)`` as a task and return it once ready; raise its start-up error."""
    ready = asyncio.Event()
    task = asyncio.create_task(run(ready))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiter}, timeout=WAIT_S, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if task.done():
        task.result()  # raises the start-up error
    assert ready.is_set(), f"{what} did not become ready"
    return task


@contextlib.asynccontextmanager
async def running_gateway(redis_url: str, runner: Any, worker_id: str = "w1", *,
                          max_concurrent: int = 4, agent_types: tuple[str, ...] = (AGENT,),
                          timing: GatewayTiming = FAST) -> AsyncIterator[Gateway]:
    gateway = Gateway(gateway_config(redis_url, agent_types), runner, worker_id=worker_id,
                      max_concurrent=max_concurrent, timing=timing, retry=FAST_POLICY)
    task = await start_until_ready(gateway.run, "gateway")
    try:
        yield gateway
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT_S)


def raw_ask(message_id: str, content: str, session: str = "s1") -> dict[str, str]:
    """The wire payload of an ask, as a client would XADD it to ``STREAM``."""
    header = MessageHeader(message_id=message_id, session_id=session, trace_id="t",
                           target_agent_type=AGENT)
    payload: dict[str, str] = AskAgentCommand(header=header, content=content).to_redis_payload()
    return payload


def sdk_redis(url: str) -> aioredis.Redis:
    return aioredis.Redis.from_url(url, decode_responses=True)


def sdk_client(redis: aioredis.Redis) -> GatewayClient:
    return GatewayClient(registry=WorkerRegistry(redis), redis_client=redis)


async def ask(client: GatewayClient, session: str, content: str, message_id: str,
              **kwargs: Any) -> None:
    response = await client.send_message(AGENT, session, content, message_id=message_id,
                                         trace_id="trace-1", **kwargs)
    assert response.success, response.error


async def resume(client: GatewayClient, session: str, message_id: str, reply: Any) -> None:
    """The person's answer to the task's open form: a RESUME with ``reply`` as its data."""
    await client.send_message(AGENT, session, "", action_type="RESUME", message_id=message_id,
                              extra_payload={"status": "COMPLETED", "reply_data": reply})


async def read_events(redis: aioredis.Redis, session: str, message_id: str, *,
                      until: Callable[[DataMessage], bool] | None = None,
                      timeout: float = WAIT_S) -> list[DataMessage]:
    """The task's events as the SDK parses them, up to appStreamResponse (or ``until``)."""
    stop = until or (lambda m: m.event_type == "appStreamResponse")
    stream = f"byai_gateway:session:{session}:data_stream"
    last, found = "0", []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reply = cast(TextStreamReply, await redis.xread({stream: last}, block=200, count=100))
        except redis_errors.ConnectionError:  # a test that restarts redis-server
            await asyncio.sleep(0.05)
            continue
        for _, entries in reply or ():
            for entry_id, fields in entries:
                last = entry_id
                message = DataMessage(**json.loads(fields["data"]))
                if message.message_id == message_id:
                    found.append(message)
                    if stop(message):
                        return found
    raise AssertionError(f"no end event; saw {[m.event_type for m in found]}")


async def record_of(redis: aioredis.Redis, session: str, message_id: str) -> dict[str, Any]:
    return await WorkerRegistry(redis).get_execution_by_message_id(message_id, session_id=session) or {}


def delta_text(message: DataMessage) -> Any:
    return message.data["choices"][0]["delta"]["content"]
