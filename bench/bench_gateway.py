"""Gateway throughput next to raw Redis XADD throughput, on one redis-server, in one run.

    python -m bench.bench_gateway

Starts its own redis-server on a free loopback port and measures:
- events/s one task's publisher writes to a session data stream (one XADD + EXPIRE
  round trip per event, as a streaming answer does when nothing coalesces);
- tasks/s one gateway worker routes end to end with a no-op runner (read, claim the
  record, run, terminal record, 3 events, ack);
- ``redis-benchmark -t``-style XADD throughput on the same server, with 50 clients
  (its default) and with 1 client (the fair comparison for one worker).
Prints the ratios and returns them as a dict. Takes well under 40 s.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

import redis.asyncio as aioredis

from boss_agent.config import load_config
from boss_agent.sources.gateway import Gateway, GatewayTiming, wire
from boss_agent.sources.gateway.retry import FAST_POLICY
from boss_agent.sources.gateway.sink import Publisher
from boss_agent.tasks import Task, TaskResult

EVENTS = 3_000
TASKS = 500
XADD_REQUESTS = 20_000
MAX_CONCURRENT = 8
AGENT = "bench_agent"
START_TIMEOUT_S = 10  # redis-server starts in milliseconds; ten seconds means it will not
RUN_TIMEOUT_S = 30  # the whole routing run must fit the benchmark's 40 s budget


class NoopRunner:
    async def run(self, task: Task, sink: Any, cancel: asyncio.Event) -> TaskResult:
        return TaskResult("completed", result_text="ok")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_redis(port: int, directory: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--dir", directory, "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not start")


def _redis_benchmark(port: int, clients: int, requests: int = XADD_REQUESTS) -> float:
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n", str(requests), "-c", str(clients), "-q",
         "XADD", "bench", "*", "data", "x"],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=True).stdout
    found = re.findall(r"([\d.]+) requests per second", out.replace("\r", "\n"))
    return float(found[-1])


async def _events_per_s(url: str, events: int = EVENTS) -> float:
    redis = aioredis.Redis.from_url(url)
    ctx = wire.EventContext("bench-session", "trace", AGENT, "msg-bench")
    publisher = Publisher(redis, ctx, FAST_POLICY, sub_agent=False)
    start = time.perf_counter()
    for i in range(events):
        await publisher.write(wire.event(ctx, wire.ANSWER_DELTA, f"chunk {i}", wire.CT_TEXT))
    elapsed = time.perf_counter() - start
    await redis.aclose()
    return events / elapsed


async def _tasks_per_s(url: str, tasks: int = TASKS) -> float:
    config = load_config(overrides={"gateway.redis_url": url, "gateway.agent_types": [AGENT]},
                         environ={})
    gateway = Gateway(config, NoopRunner(), worker_id="bench-worker", max_concurrent=MAX_CONCURRENT,
                      timing=GatewayTiming(read_block_ms=100), retry=FAST_POLICY)
    redis = aioredis.Redis.from_url(url)
    ready = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(gateway.run(ready))
        await asyncio.wait_for(ready.wait(), START_TIMEOUT_S)
        pipe = redis.pipeline(transaction=False)
        for i in range(tasks):
            command = {"action_type": "ASK_AGENT", "header": {
                "message_id": f"msg-{i}", "session_id": f"bench-{i % 50}", "trace_id": "t",
                "target_agent_type": AGENT}, "body": {"content": "noop", "wait_for_reply": False}}
            pipe.xadd(f"byai_gateway:ctrl:agent_type:{AGENT}", {"data": json.dumps(command)})
        start = time.perf_counter()
        await pipe.execute()
        async with asyncio.timeout(RUN_TIMEOUT_S):
            while gateway.info["counts"].get("completed", 0) < tasks:
                await asyncio.sleep(0.01)  # a benchmark poll, not a test wait
        elapsed = time.perf_counter() - start
        runner.cancel()
    await redis.aclose()
    return tasks / elapsed


def run(events: int = EVENTS, tasks: int = TASKS, xadd_requests: int = XADD_REQUESTS) -> dict[str, float]:
    """Measure on a fresh redis-server; return the numbers (``main`` prints them)."""
    port = _free_port()
    url = f"redis://127.0.0.1:{port}/0"
    with tempfile.TemporaryDirectory() as directory:
        server = _start_redis(port, directory)
        try:
            events_s = asyncio.run(_events_per_s(url, events))
            tasks_s = asyncio.run(_tasks_per_s(url, tasks))
            xadd_50 = _redis_benchmark(port, 50, xadd_requests)
            xadd_1 = _redis_benchmark(port, 1, xadd_requests)
        finally:
            server.terminate()
            server.wait(timeout=10)
    return {
        "events_per_s": round(events_s, 1),
        "tasks_per_s": round(tasks_s, 1),
        "redis_xadd_per_s_50_clients": xadd_50,
        "redis_xadd_per_s_1_client": xadd_1,
        "events_vs_xadd_1_client": round(events_s / xadd_1, 3),
        "events_vs_xadd_50_clients": round(events_s / xadd_50, 3),
        "tasks_vs_xadd_1_client": round(tasks_s / xadd_1, 4),
    }


def main() -> dict[str, float]:
    logging.getLogger("boss_agent").setLevel(logging.ERROR)
    result = run()
    width = max(map(len, result))
    for name, value in result.items():
        print(f"{name:<{width}}  {value}")
    return result


if __name__ == "__main__":
    main()
