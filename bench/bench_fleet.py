"""How the gateway behaves as the fleet grows: N workers on one redis-server.

    python -m bench.bench_fleet

For each N (1, 10, 50 by default) it starts N real ``Gateway`` workers in this one
process (each with its own Redis connections, lease heartbeat, reclaim loop and
blocking readers, as N devices would have) on a no-op runner, on a fresh
redis-server, and measures:

- **tasks/s**: a burst of ASKs XADDed at once, until every task's record is terminal;
- **dispatch latency**: one ASK at a time (closed loop), from just before its XADD to
  the moment a client blocked in XREAD on the session's data stream receives the
  task's first event; p50 and p99 over the samples;
- **redis-benchmark** on the same server: XADD with N clients (its rps and its own
  p50/p99 per request), the floor any Redis Streams dispatcher stands on.

Everything here runs in one process on a shared 2-core machine, so the N workers
also compete with the measuring client for the same CPU: the numbers show how the
cost grows with N, not what N separate machines would reach.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import logging
import statistics
import subprocess
import tempfile
import time
from typing import Any

import redis.asyncio as aioredis

from bench.bench_gateway import START_TIMEOUT_S, NoopRunner, _free_port, _start_redis
from boss_agent.config import load_config
from boss_agent.sources.gateway import Gateway, GatewayTiming
from boss_agent.sources.gateway.retry import FAST_POLICY

FLEET_SIZES = (1, 10, 50)
BURST_TASKS = 400
LATENCY_SAMPLES = 100
XADD_REQUESTS = 20_000
MAX_CONCURRENT = 2  # the daemon's default max_concurrent_tasks
AGENT = "bench_fleet"
RUN_TIMEOUT_S = 60  # one fleet size's burst and latency runs; a wedged fleet must not hang the suite
FIRST_EVENT_BLOCK_MS = 5_000  # one task's first event; far above any dispatch on loopback
IDLE_WORKERS = 50  # row 14: an idle fleet of 50 devices
IDLE_WINDOW_S = 60.0  # several lease refreshes, blocking-read timeouts and reclaim rounds
IDLE_SETTLE_S = 1.0  # start-up (lease, groups, recovery) is over well within a second
COST_POLL_S = 0.002  # how often the bench looks for the task's completion
COST_TASKS = 20  # ASKs run one at a time for the commands-per-task figure
REDIS_IDLE_BUDGET_PER_S = 10_000  # idle fleet traffic allowed on one Redis: a tenth of a core's ~100k cmd/s


def _ask(message_id: str, session_id: str) -> dict[str, str]:
    command = {"action_type": "ASK_AGENT", "header": {
        "message_id": message_id, "session_id": session_id, "trace_id": "t",
        "target_agent_type": AGENT}, "body": {"content": "noop", "wait_for_reply": False}}
    return {"data": json.dumps(command)}


async def _start_fleet(url: str, size: int,
                      tg: asyncio.TaskGroup) -> tuple[list[Gateway], list[asyncio.Task[None]]]:
    config = load_config(overrides={"gateway.redis_url": url, "gateway.agent_types": [AGENT]},
                         environ={})
    gateways, jobs, ready = [], [], []
    for i in range(size):
        gateway = Gateway(config, NoopRunner(), worker_id=f"bench-w{i}", max_concurrent=MAX_CONCURRENT,
                          timing=GatewayTiming(), retry=FAST_POLICY)
        up = asyncio.Event()
        jobs.append(tg.create_task(gateway.run(up)))
        gateways.append(gateway)
        ready.append(up.wait())
    async with asyncio.timeout(START_TIMEOUT_S + size * 0.2):
        await asyncio.gather(*ready)
    return gateways, jobs


def _completed(gateways: list[Gateway]) -> int:
    return sum(g.info["counts"].get("completed", 0) for g in gateways)


async def _burst(redis: aioredis.Redis, gateways: list[Gateway], size: int, tasks: int) -> float:
    pipe = redis.pipeline(transaction=False)
    for i in range(tasks):
        pipe.xadd(f"byai_gateway:ctrl:agent_type:{AGENT}", _ask(f"burst-{size}-{i}", f"b{size}-{i % 50}"))
    before = _completed(gateways)
    start = time.perf_counter()
    await pipe.execute()
    while _completed(gateways) - before < tasks:
        await asyncio.sleep(0.005)  # a benchmark poll, not a test wait
    return tasks / (time.perf_counter() - start)


async def _latencies(redis: aioredis.Redis, size: int, samples: int) -> list[float]:
    found = []
    for i in range(samples):
        session = f"lat{size}-{i}"
        stream = f"byai_gateway:session:{session}:data_stream"
        start = time.perf_counter()
        await redis.xadd(f"byai_gateway:ctrl:agent_type:{AGENT}", _ask(f"lat-{size}-{i}", session))
        reply = await redis.xread({stream: "0"}, count=1, block=FIRST_EVENT_BLOCK_MS)
        if not reply:
            raise RuntimeError("a task produced no event in time")
        found.append((time.perf_counter() - start) * 1000)
    return found


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure_fleet(url: str, size: int, tasks: int, samples: int) -> dict[str, Any]:
    redis = aioredis.Redis.from_url(url)
    try:
        async with asyncio.timeout(RUN_TIMEOUT_S), asyncio.TaskGroup() as tg:
            gateways, jobs = await _start_fleet(url, size, tg)
            tasks_s = await _burst(redis, gateways, size, tasks)
            latency = await _latencies(redis, size, samples)
            per_worker = [g.info["counts"].get("completed", 0) for g in gateways]
            for job in jobs:
                job.cancel()
    finally:
        await redis.flushdb()
        await redis.aclose()
    return {"workers": size, "tasks_per_s": round(tasks_s, 1),
            "dispatch_p50_ms": round(_percentile(latency, 0.5), 2),
            "dispatch_p99_ms": round(_percentile(latency, 0.99), 2),
            "dispatch_mean_ms": round(statistics.fmean(latency), 2),
            "workers_that_ran_tasks": sum(1 for n in per_worker if n)}


def redis_benchmark_xadd(port: int, clients: int, requests: int) -> dict[str, float]:
    """redis-benchmark's own rps and per-request p50/p99 for XADD with ``clients`` clients."""
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n", str(requests), "-c", str(clients), "--csv",
         "XADD", "bench", "*", "data", "x"],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=True).stdout
    row = list(csv.DictReader(io.StringIO(out)))[-1]
    return {"rps": float(row["rps"]), "p50_ms": float(row["p50_latency_ms"]),
            "p99_ms": float(row["p99_latency_ms"])}


async def _commands(redis: aioredis.Redis) -> dict[str, int]:
    """Calls per command name so far (``INFO commandstats``), INFO itself left out."""
    stats = await redis.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()
            if name != "cmdstat_info"}


def _spent(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: calls - before.get(name, 0) for name, calls in after.items() if calls > before.get(name, 0)}


async def measure_idle(url: str, workers: int, window_s: float, tasks: int) -> dict[str, Any]:
    """Redis commands an idle fleet costs per worker and second, and what one task costs.

    The workers start and settle first (their start-up commands are not idle cost);
    then ``INFO commandstats`` is read before and after ``window_s`` of nothing, and
    again around ``tasks`` ASKs run one at a time on the same fleet.
    """
    redis = aioredis.Redis.from_url(url)
    try:
        async with asyncio.timeout(RUN_TIMEOUT_S + window_s), asyncio.TaskGroup() as tg:
            gateways, jobs = await _start_fleet(url, workers, tg)
            await asyncio.sleep(IDLE_SETTLE_S)  # start-up recovery and first reads are not idle cost
            before, start = await _commands(redis), time.monotonic()
            await asyncio.sleep(window_s)  # the measurement window itself
            after, elapsed = await _commands(redis), time.monotonic() - start
            idle = _spent(before, after)
            base = _completed(gateways)
            for i in range(tasks):
                await redis.xadd(f"byai_gateway:ctrl:agent_type:{AGENT}", _ask(f"cost-{i}", f"cost-{i}"))
                while _completed(gateways) < base + i + 1:
                    await asyncio.sleep(COST_POLL_S)  # a benchmark poll, not a test wait
            busy_end, busy_elapsed = await _commands(redis), time.monotonic() - start - elapsed
            for job in jobs:
                job.cancel()
    finally:
        await redis.flushdb()
        await redis.aclose()
    busy = _spent(after, busy_end)
    idle_total = sum(idle.values())
    idle_rate = idle_total / elapsed
    # The tasks' share: what Redis ran while they ran, less the fleet's idle cost over that
    # time and the bench's own XADD of each ASK (the client's command, not the worker's).
    per_task = (sum(busy.values()) - tasks - idle_rate * busy_elapsed) / max(tasks, 1)
    return {"workers": workers, "window_s": round(elapsed, 1), "idle_commands": idle_total,
            "idle_commands_per_worker_s": round(idle_rate / workers, 3),
            "idle_by_command": dict(sorted(idle.items(), key=lambda kv: -kv[1])),
            "tasks": tasks, "commands_per_task": round(per_task, 1),
            "task_by_command": dict(sorted(busy.items(), key=lambda kv: -kv[1]))}


def idle_cost(workers: int = IDLE_WORKERS, window_s: float = IDLE_WINDOW_S,
              tasks: int = COST_TASKS) -> dict[str, Any]:
    """Row 14 on a fresh redis-server of its own (the other rows' commands are not counted)."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as directory:
        server = _start_redis(port, directory)
        try:
            result = asyncio.run(measure_idle(f"redis://127.0.0.1:{port}/0", workers, window_s, tasks))
        finally:
            server.terminate()
            server.wait(timeout=10)
    # One Redis core serves this many idle devices at the measured rate, at a budget of
    # REDIS_IDLE_BUDGET_PER_S commands/s (a conservative share of a core's ~100k/s).
    rate = result["idle_commands_per_worker_s"]
    result["idle_devices_per_redis"] = int(REDIS_IDLE_BUDGET_PER_S / rate) if rate else None
    return result


def run(sizes: tuple[int, ...] = FLEET_SIZES, tasks: int = BURST_TASKS, samples: int = LATENCY_SAMPLES,
        xadd_requests: int = XADD_REQUESTS) -> dict[str, Any]:
    """One fresh redis-server; each fleet size measured in turn; ``{"fleets": [...]}``."""
    port = _free_port()
    url = f"redis://127.0.0.1:{port}/0"
    fleets = []
    with tempfile.TemporaryDirectory() as directory:
        server = _start_redis(port, directory)
        try:
            for size in sizes:
                fleet = asyncio.run(measure_fleet(url, size, tasks, samples))
                fleet["redis_benchmark_xadd"] = redis_benchmark_xadd(port, size, xadd_requests)
                fleets.append(fleet)
        finally:
            server.terminate()
            server.wait(timeout=10)
    return {"fleets": fleets}


def main() -> dict[str, Any]:
    logging.getLogger("boss_agent").setLevel(logging.ERROR)
    result = run()
    for fleet in result["fleets"]:
        bench = fleet["redis_benchmark_xadd"]
        print(f"N={fleet['workers']:>3}: {fleet['tasks_per_s']:>8,.0f} tasks/s, dispatch p50 "
              f"{fleet['dispatch_p50_ms']:.2f} ms p99 {fleet['dispatch_p99_ms']:.2f} ms | redis-benchmark "
              f"XADD -c {fleet['workers']}: {bench['rps']:,.0f}/s p50 {bench['p50_ms']:.3f} ms "
              f"p99 {bench['p99_ms']:.3f} ms")
    return result


if __name__ == "__main__":
    main()
