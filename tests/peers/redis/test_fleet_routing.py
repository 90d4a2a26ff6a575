"""Fleet routing on a real redis-server, with by-framework 0.2.1's client as the peer.

Threads, live turns and projects decide which worker runs an ASK. The runner here is
a small in-test one (the seam these routing tests need: they are about the wire); the
same paths run on real codex in tests/e2e/test_fleet_e2e.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from boss_agent.sources.gateway import Gateway
from boss_agent.sources.gateway.keys import held_threads, thread_holder, turn_holder
from boss_agent.sources.gateway.retry import FAST_POLICY
from boss_agent.tasks import Task, TaskResult
from tests.support.gateway import (
    AGENT,
    FAST,
    ask,
    gateway_config,
    read_events,
    record_of,
    running_gateway,
    sdk_client,
    sdk_redis,
)
from tests.support.waits import eventually

pytestmark = [pytest.mark.redis, pytest.mark.asyncio]

OTHER = "other_agent"


class TurnRunner:
    """Each task is a turn on a thread: ``new`` starts a thread, ``hold`` waits for the gate.

    It announces the turn through the sink's optional ``turn_started`` like the real
    runner does after ``turn/start``; a steer (``target_turn_id``) ends at once.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.gate = asyncio.Event()
        self.tasks: list[Task] = []
        self.live: dict[str, asyncio.Event] = {}

    async def run(self, task: Task, sink: Any, cancel: asyncio.Event) -> TaskResult:
        self.tasks.append(task)
        if task.target_turn_id:
            return TaskResult("completed", codex_thread_ref=task.codex_thread_ref,
                              turn_id=task.target_turn_id, result_text=f"steered on {self.name}")
        thread = task.codex_thread_ref or f"thread-{task.task_id}"
        turn = f"turn-{task.task_id}"
        await sink.turn_started(thread, turn)
        self.live.setdefault(task.task_id, asyncio.Event()).set()
        if task.prompt == "hold":
            await self.gate.wait()
        return TaskResult("completed", codex_thread_ref=thread, turn_id=turn,
                          result_text=f"{task.prompt} on {self.name}")


def _with_projects(redis_url: str, agent_types: tuple[str, ...], projects: dict[str, Path]) -> Any:
    return dataclasses.replace(gateway_config(redis_url, agent_types), projects=projects)


async def _serve(config: Any, runner: TurnRunner, worker_id: str, max_concurrent: int = 1,
                 state_dir: Path | None = None, **fleet: Any) -> tuple[Gateway, asyncio.Task[None]]:
    """A gateway serving in the background; ``fleet``: attributes of its Fleet to set first."""
    gateway = Gateway(config, runner, worker_id=worker_id, max_concurrent=max_concurrent,
                      timing=FAST, retry=FAST_POLICY, state_dir=state_dir)
    for name, value in fleet.items():
        assert hasattr(gateway.fleet, name)
        setattr(gateway.fleet, name, value)
    ready = asyncio.Event()
    job = asyncio.create_task(gateway.run(ready))
    await asyncio.wait_for(ready.wait(), 15)
    return gateway, job


async def _stop(job: asyncio.Task[None]) -> None:
    job.cancel()
    await asyncio.gather(job, return_exceptions=True)


async def test_final_events_carry_the_thread_and_turn_and_the_worker_publishes_them(redis_server) -> None:
    redis = sdk_redis(redis_server.url)
    async with running_gateway(redis_server.url, TurnRunner("w1"), "w1"):
        await ask(sdk_client(redis), "s-meta", "hello", "m-meta")
        events = await read_events(redis, "s-meta", "m-meta")
        holder = await redis.get(thread_holder("thread-m-meta"))
        ttl = await redis.ttl(thread_holder("thread-m-meta"))
        turn_left = await redis.exists(turn_holder("turn-m-meta"))
    await redis.aclose()
    final = {e.event_type: e.metadata for e in events if e.event_type in ("finalAnswer", "appStreamResponse")}
    expected = {"codexThreadRef": "thread-m-meta", "turnId": "turn-m-meta"}
    assert final == {"finalAnswer": expected, "appStreamResponse": expected}
    running = [e for e in events if e.metadata.get("turnId") and e.event_type == "reasoningLogDelta"]
    assert running and running[0].metadata == expected  # steerable while it runs
    assert holder == "w1" and 0 < ttl <= FAST.lease_ttl_s
    assert not turn_left  # the turn ended; the thread stays held


async def test_a_follow_up_read_by_another_worker_is_forwarded_to_the_thread_holder(redis_server) -> None:
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    holder, reader = TurnRunner("w1"), TurnRunner("w2")
    # w1 reads only OTHER, so the follow-up on AGENT can only be read by w2.
    async with running_gateway(redis_server.url, holder, "w1", agent_types=(OTHER,)), \
            running_gateway(redis_server.url, reader, "w2") as w2:
        response = await client.send_message(OTHER, "s-f", "first", message_id="m-f1", trace_id="t")
        assert response.success
        await read_events(redis, "s-f", "m-f1")
        await ask(client, "s-f", "again", "m-f2", extra_payload={"codexThreadRef": "thread-m-f1"})
        events = await read_events(redis, "s-f", "m-f2")
        record = await record_of(redis, "s-f", "m-f2")
    await redis.aclose()
    assert [t.task_id for t in reader.tasks] == []
    assert [t.task_id for t in holder.tasks] == ["m-f1", "m-f2"]
    assert record["status"] == "COMPLETED" and record["worker_id"] == "w1"
    assert w2.info["counts"]["forwarded"] == 1
    assert next(e for e in events if e.event_type == "finalAnswer").metadata["codexThreadRef"] == "thread-m-f1"


async def test_a_thread_no_live_worker_holds_fails_thread_not_found(redis_server) -> None:
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    gone = TurnRunner("gone")
    config = gateway_config(redis_server.url, (OTHER,))
    w1, job = await _serve(config, gone, "w-gone")
    await client.send_message(OTHER, "s-n", "first", message_id="m-n1", trace_id="t")
    await read_events(redis, "s-n", "m-n1")
    await _stop(job)  # its lease is released: the thread has no live holder any more
    runner = TurnRunner("w2")
    async with running_gateway(redis_server.url, runner, "w2"):
        await ask(client, "s-n", "again", "m-n2", extra_payload={"codexThreadRef": "thread-m-n1"})
        await ask(client, "s-n", "never seen", "m-n3", extra_payload={"codexThreadRef": "thread-nobody"})
        ends = [await read_events(redis, "s-n", m) for m in ("m-n2", "m-n3")]
        records = [await record_of(redis, "s-n", m) for m in ("m-n2", "m-n3")]
    await redis.aclose()
    assert runner.tasks == []
    for record, events in zip(records, ends, strict=True):
        assert record["status"] == "FAILED" and record["error"]["code"] == "thread_not_found"
        assert events[-1].event_type == "appStreamResponse"


async def test_a_steer_over_redis_reaches_the_live_turn_without_waiting_for_a_slot(redis_server) -> None:
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    holder = TurnRunner("w1")
    async with running_gateway(redis_server.url, holder, "w1", max_concurrent=1, agent_types=(OTHER,)), \
            running_gateway(redis_server.url, TurnRunner("w2"), "w2") as w2:
        await client.send_message(OTHER, "s-st", "hold", message_id="m-long", trace_id="t")
        running = await read_events(redis, "s-st", "m-long", until=lambda m: bool(m.metadata.get("turnId")))
        turn = running[-1].metadata["turnId"]
        # The steer names only the turn; w2 reads it and forwards it; w1's only slot is busy.
        await ask(client, "s-st", "focus", "m-steer", extra_payload={"targetCodexTurnId": turn})
        steer_events = await read_events(redis, "s-st", "m-steer")
        long_record = await record_of(redis, "s-st", "m-long")
        holder.gate.set()
        await read_events(redis, "s-st", "m-long")
        forwarded = w2.info["counts"]["forwarded"]
    await redis.aclose()
    steer = holder.tasks[-1]
    assert steer.target_turn_id == turn and steer.codex_thread_ref == "thread-m-long"
    assert next(e for e in steer_events if e.event_type == "finalAnswer").data["choices"][0]["delta"][
        "content"] == "steered on w1"
    assert long_record["status"] == "RUNNING"  # the steer finished while the turn still ran
    assert forwarded == 1


async def test_a_project_task_goes_only_to_a_worker_that_has_the_project(redis_server, tmp_path: Path) -> None:
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    web, api = TurnRunner("w-web"), TurnRunner("w-api")
    _, job1 = await _serve(_with_projects(redis_server.url, (AGENT,), {"web": tmp_path}), web, "w-web")
    job2 = None
    try:
        lease = json.loads(await redis.get("byai_gateway:registry:worker:online:w-web"))
        # Occupy w-web's only slot before w-api starts, so that w-api reads the next task.
        await ask(client, "s-p", "hold", "m-hold", extra_payload={"projectId": "web"})
        await eventually(lambda: any(t.task_id == "m-hold" for t in web.tasks))
        w2, job2 = await _serve(_with_projects(redis_server.url, (AGENT,), {"api": tmp_path}), api, "w-api")
        await ask(client, "s-p", "build web", "m-web", extra_payload={"projectId": "web"})
        await eventually(lambda: w2.info["counts"].get("forwarded") == 1)
        await ask(client, "s-p", "build nothing", "m-none", extra_payload={"projectId": "mobile"})
        none = await read_events(redis, "s-p", "m-none")
        web.gate.set()
        await read_events(redis, "s-p", "m-web")
        records = {m: await record_of(redis, "s-p", m) for m in ("m-hold", "m-web", "m-none")}
    finally:
        await _stop(job1)
        if job2 is not None:
            await _stop(job2)
        await redis.aclose()
    assert lease["projects"] == ["web"] and str(tmp_path) not in json.dumps(lease)
    assert records["m-web"]["worker_id"] == "w-web" and records["m-web"]["status"] == "COMPLETED"
    assert records["m-none"]["status"] == "FAILED"
    assert records["m-none"]["error"]["code"] == "project_not_found"
    assert none[-1].event_type == "appStreamResponse"
    assert [t.task_id for t in api.tasks] == []


async def test_a_restarted_worker_publishes_the_threads_it_held_again(redis_server, tmp_path: Path) -> None:
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    config = gateway_config(redis_server.url)
    _, job = await _serve(config, TurnRunner("w1"), "w1", state_dir=tmp_path)
    await ask(client, "s-r", "first", "m-r1")
    await read_events(redis, "s-r", "m-r1")
    await _stop(job)
    await redis.delete(thread_holder("thread-m-r1"))  # as after the lease TTL ran out
    await redis.sadd(held_threads("w1"), "thread-planted")  # another client's: not ours to publish
    again = TurnRunner("w1")
    _, job = await _serve(config, again, "w1", state_dir=tmp_path)
    try:
        assert await redis.get(thread_holder("thread-m-r1")) == "w1"
        assert await redis.sismember(held_threads("w1"), "thread-m-r1")
        assert not await redis.exists(thread_holder("thread-planted"))
        assert not await redis.sismember(held_threads("w1"), "thread-planted")
        await ask(client, "s-r", "again", "m-r2", extra_payload={"codexThreadRef": "thread-m-r1"})
        await read_events(redis, "s-r", "m-r2")
    finally:
        await _stop(job)
        await redis.aclose()
    assert [t.task_id for t in again.tasks] == ["m-r2"]


async def test_of_two_workers_claiming_one_task_only_the_first_runs_it(redis_server) -> None:
    """Two copies of one ASK (a requeue or a forward cut short by a crash) can pass the
    start check on two workers at once; the RUNNING claim itself must let only one win."""
    from boss_agent.sources.slots import Slots
    from boss_agent.sources.gateway import wire
    from boss_agent.sources.gateway.execution import Reporter, Shared
    from boss_agent.sources.gateway.registry import ExecutionRecords

    redis = sdk_redis(redis_server.url)
    raw = aioredis_client(redis_server.url)
    header = wire.parse_header({"message_id": "m-claim", "session_id": "s-claim", "trace_id": "t"})

    def reporter(worker_id: str) -> Reporter:
        shared = Shared(raw, ExecutionRecords(raw), FAST_POLICY, worker_id, "agent_engines",
                        TurnRunner(worker_id), Slots(1), AGENT)
        return Reporter(shared, header, None)

    try:
        first = await reporter("w1").set_status("RUNNING")
        second = await reporter("w2").set_status("RUNNING")
        again = await reporter("w1").set_status("RUNNING")  # the owner itself, after a resume
        record = await record_of(redis, "s-claim", "m-claim")
    finally:
        await raw.aclose()
        await redis.aclose()
    assert (first, second, again) == (True, False, True)
    assert record["worker_id"] == "w1" and record["status"] == "RUNNING"


def aioredis_client(url: str) -> Any:
    import redis.asyncio as aioredis

    return aioredis.Redis.from_url(url)


async def test_two_copies_of_one_ask_on_one_worker_run_once(redis_server) -> None:
    """A forward repeated after a crash puts two copies on the holder's stream at once."""
    redis = sdk_redis(redis_server.url)
    runner = TurnRunner("w1")
    command = {"action_type": "ASK_AGENT", "header": {"message_id": "m-twice", "session_id": "s-twice",
                                                      "trace_id": "t", "target_agent_type": AGENT},
               "body": {"content": "once", "wait_for_reply": True, "extra_payload": {}}}
    async with running_gateway(redis_server.url, runner, "w1", max_concurrent=2) as gateway:
        pipe = redis.pipeline(transaction=False)
        for _ in range(2):
            pipe.xadd("byai_gateway:ctrl:worker:w1", {"data": json.dumps(command)})
        await pipe.execute()
        events = await read_events(redis, "s-twice", "m-twice")
        await eventually(lambda: gateway.info["counts"].get("skipped", 0) + gateway.info["counts"].get(
            "completed", 0) == 2)
        pending = await redis.xpending("byai_gateway:ctrl:worker:w1", "agent_engines")
    await redis.aclose()
    assert [t.task_id for t in runner.tasks] == ["m-twice"]
    assert [e.event_type for e in events].count("finalAnswer") == 1
    assert pending["pending"] == 0


async def test_registry_keys_of_the_wrong_type_do_not_stop_the_worker(redis_server) -> None:
    """Anyone who can write to Redis may clobber the fleet keys; the worker keeps serving."""
    redis = sdk_redis(redis_server.url)
    await redis.set(held_threads("w1"), "not a set")
    await redis.hset(thread_holder("thread-m-wt"), "not", "a string")
    runner = TurnRunner("w1")
    async with running_gateway(redis_server.url, runner, "w1") as gateway:
        await ask(sdk_client(redis), "s-wt", "hello", "m-wt")
        events = await read_events(redis, "s-wt", "m-wt")
        await eventually(lambda: gateway.info["ready"])
    await redis.aclose()
    assert events[-1].event_type == "appStreamResponse"
    assert [t.task_id for t in runner.tasks] == ["m-wt"]


async def test_a_collaboration_goes_to_the_worker_holding_both_threads_or_fails(redis_server) -> None:
    """A thread_collaboration reads one thread and turns on another: both must be on the
    worker that runs it. A reader that holds neither forwards the ASK to the worker holding
    both; threads held by two different workers cannot meet, so that ASK fails
    thread_not_found instead of running where the threads are not."""
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    holder, reader = TurnRunner("w1"), TurnRunner("w2")
    async with running_gateway(redis_server.url, holder, "w1", agent_types=(OTHER,)), \
            running_gateway(redis_server.url, reader, "w2") as w2:
        for message in ("m-src", "m-dst"):
            await client.send_message(OTHER, "s-c", "first", message_id=message, trace_id="t")
            await read_events(redis, "s-c", message)
        await ask(client, "s-c", "here", "m-w2")  # a thread w2 holds
        await read_events(redis, "s-c", "m-w2")

        def collaboration(source: str, target: str) -> dict[str, str]:
            return {"intentCategory": "thread_collaboration", "sourceCodexThreadRef": source,
                    "targetCodexThreadRef": target}

        await ask(client, "s-c", "merge", "m-both", extra_payload=collaboration("thread-m-src", "thread-m-dst"))
        await ask(client, "s-c", "merge", "m-split", extra_payload=collaboration("thread-m-src", "thread-m-w2"))
        await read_events(redis, "s-c", "m-both")
        await read_events(redis, "s-c", "m-split")
        both, split = [await record_of(redis, "s-c", m) for m in ("m-both", "m-split")]
        forwarded = w2.info["counts"].get("forwarded", 0)
    await redis.aclose()
    assert both["status"] == "COMPLETED" and both["worker_id"] == "w1"
    assert [t.task_id for t in holder.tasks] == ["m-src", "m-dst", "m-both"]
    assert split["status"] == "FAILED" and split["error"]["code"] == "thread_not_found"
    assert [t.task_id for t in reader.tasks] == ["m-w2"] and forwarded == 1


PLANTED = 300_000
PLANT_BATCH = 10_000  # ids per SADD: one command each, not 300,000 round trips


async def test_ids_planted_in_the_held_set_by_another_client_are_never_published(redis_server) -> None:
    """The finding: 300,000 ids another client put in the worker's set were re-published
    with every lease refresh. Only threads this worker ran are held."""
    redis = sdk_redis(redis_server.url)
    for start in range(0, PLANTED, PLANT_BATCH):
        await redis.sadd(held_threads("w1"), *(f"planted-{i}" for i in range(start, start + PLANT_BATCH)))
    gateway, job = await _serve(gateway_config(redis_server.url), TurnRunner("w1"), "w1")
    try:
        await ask(sdk_client(redis), "s-pl", "hello", "m-pl")
        await read_events(redis, "s-pl", "m-pl")
        refreshed = await eventually(lambda: _only(redis, "w1", {"thread-m-pl"}))
        planted = [await redis.exists(thread_holder(f"planted-{i}")) for i in (0, PLANTED // 2, PLANTED - 1)]
    finally:
        await _stop(job)
        await redis.aclose()
    assert refreshed and planted == [0, 0, 0]
    assert list(gateway.fleet.threads) == ["thread-m-pl"]


async def _only(redis: Any, worker: str, threads: set[str]) -> bool:
    """The worker's published set is exactly ``threads`` (rewritten by a refresh)."""
    return set(await redis.smembers(held_threads(worker))) == threads


async def test_a_worker_holds_at_most_its_cap_of_threads_the_most_recent_ones(redis_server) -> None:
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    gateway, job = await _serve(gateway_config(redis_server.url), TurnRunner("w1"), "w1", max_threads=3)
    try:
        for n in range(5):
            await ask(client, "s-cap", f"task {n}", f"m-cap{n}")
            await read_events(redis, "s-cap", f"m-cap{n}")
        # The oldest used again: it becomes the most recent, so m-cap2 goes instead.
        await ask(client, "s-cap", "again", "m-cap5", extra_payload={"codexThreadRef": "thread-m-cap1"})
        await read_events(redis, "s-cap", "m-cap5")
        held = set(gateway.fleet.threads)
        published = await eventually(lambda: _only(redis, "w1", held))
    finally:
        await _stop(job)
        await redis.aclose()
    assert held == {"thread-m-cap3", "thread-m-cap4", "thread-m-cap1"} and published


async def test_a_thread_unused_for_the_idle_time_is_let_go(redis_server, tmp_path: Path) -> None:
    redis = sdk_redis(redis_server.url)
    now = [1_000_000.0]
    gateway, job = await _serve(gateway_config(redis_server.url), TurnRunner("w1"), "w1",
                                state_dir=tmp_path, idle_s=60.0, clock=lambda: now[0])
    try:
        await ask(sdk_client(redis), "s-idle", "hello", "m-idle")
        await read_events(redis, "s-idle", "m-idle")
        assert "thread-m-idle" in gateway.fleet.threads
        now[0] += 61.0  # a minute and more without a use
        await eventually(lambda: "thread-m-idle" not in gateway.fleet.threads)
        published = await eventually(lambda: _only(redis, "w1", set()))
        # The held list reaches the disk after Redis (a thread's write): wait for it too.
        stored = await eventually(lambda: _stored_threads(tmp_path) == {})
    finally:
        await _stop(job)
        await redis.aclose()
    assert published and stored


def _stored_threads(state_dir: Path) -> object:
    try:
        (path,) = (state_dir / "gateway").glob("threads-*.json")
        return json.loads(path.read_text()).get("threads")
    except (ValueError, OSError):  # not written yet, or between two writes
        return None
