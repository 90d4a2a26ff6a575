"""The runner on a real codex app-server: per-task overhead, concurrency, app-server reuse.

    python -m bench.bench_runner [--samples 10]

Every measurement runs the real ``codex app-server`` (native, as codexbin resolves
it) against the scripted model provider, and the task through
``boss_agent.runner.Runner.run`` as the daemon does:

* ``runner_vs_direct``: one task's turn on a warm app-server — the runner (new
  thread, turn, card, git facts) against a minimal direct JSON-RPC client doing the
  same protocol work (``thread/start`` + ``turn/start`` until ``turn/completed``) on
  its own app-server child, samples interleaved so drift hits both alike;
* ``concurrency``: 8 tasks at once on one shared app-server against the same 8 one
  after another, the model streaming with a small per-event delay so waiting on the
  model (not CPU) dominates, as with a real model;
* ``reuse``: task start (run → the turn's model request) on the warm shared
  app-server against spawning an app-server for the task, and the whole task against
  what a user would otherwise run per task, ``codex exec --json`` (a fresh process
  each time, the same scripted model).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.bench_appserver import WARMUP, DirectClient, measure, pair_ratio
from bench.bench_daemon import ARRIVAL_TIMEOUT_S, ArrivalLog, NullSink, codex_bin
from boss_agent.demo import scripted_model as sm
from boss_agent.appserver.client import AppServer
from boss_agent.config import Config, load_config
from boss_agent.runner import Runner, gitfacts
from boss_agent.runner.policy import resolve_policy, sandbox_policy
from boss_agent.tasks import Task, TaskResult

ANSWER = "bench answer"
DEFAULT_SAMPLES = 10
CONCURRENT_TASKS = 32
STREAM_CHUNKS = 20  # answer deltas per turn in the concurrency row
STREAM_DELAY_S = 0.03  # per SSE event: ~0.7 s of model time per turn, like a short real answer
PAIRS_PER_SAMPLE = 8  # warm task / bare turn pairs per reuse sample: 40 pairs in the full suite for 8d


class Model(ArrivalLog):
    """The scripted model's responder: records when each request came, answers ``ANSWER``."""

    def __init__(self, chunks: int = 1, delay_s: float = 0.0) -> None:
        super().__init__()
        self.chunks = chunks
        self.delay_s = delay_s

    def __call__(self, _request: sm.RecordedRequest) -> sm.Response:
        self.arrived()
        words = ANSWER.split(" ")
        pieces = [(" " if i else "") + words[i % len(words)] for i in range(self.chunks)]
        text = "".join(pieces) if self.chunks > 1 else ANSWER
        return sm.turn(sm.message(text, pieces if self.chunks > 1 else None), delay_s=self.delay_s)


@dataclass
class Env:
    codex: str
    home: Path
    workdir: Path
    config: Config

    def runner(self, app: AppServer) -> Runner:
        return Runner(self.config, app, codex_home=self.home, env={"CODEX_HOME": str(self.home)})

    def app_server(self) -> AppServer:
        return AppServer.from_config(self.config, codex_home=self.home)

    def task(self, name: str) -> Task:
        return Task(task_id=name, prompt="benchmark", workdir=str(self.workdir))


@contextlib.contextmanager
def environment(model: Model) -> Any:
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp, sm.ScriptedModel(responder=model) as server:
        root = Path(tmp)
        workdir = root / "work"
        workdir.mkdir()
        home = sm.write_codex_home(root / "codex-home", server.base_url)
        codex = codex_bin()
        # No thread made ahead (runner/thread_ahead.py): these rows compare the runner with
        # a client doing the same work, thread/start included; row 13 measures it on.
        config = load_config(overrides={"state_dir": str(root / "state"), "workspaces": [str(root)],
                                        "codex.bin": codex, "codex.thread_ahead": False}, environ={})
        yield Env(codex, home, workdir, config)


class TurnClock(NullSink):
    """A sink that notes when its task's ``turn/start`` was answered (``turn_started``)."""

    def __init__(self) -> None:
        self.turn_started_at: float | None = None

    async def turn_started(self, thread_ref: str, turn_id: str) -> None:
        self.turn_started_at = time.monotonic()


async def run_task(runner: Runner, task: Task, sink: NullSink | None = None) -> TaskResult:
    result = await runner.run(task, sink or NullSink(), asyncio.Event())
    if result.status != "completed" or not (result.result_text or "").startswith("bench"):
        raise RuntimeError(f"bench task {result.status}: {result.error_code}")
    return result


# ----------------------------------------------------------------- runner vs direct


class RunnerDriver:
    def __init__(self, env: Env, runner: Runner) -> None:
        self.env, self.runner, self.count = env, runner, 0

    async def task(self) -> None:
        self.count += 1
        await run_task(self.runner, self.env.task(f"runner_{self.count}"))


class DirectTaskDriver:
    """What the runner asks of codex for a task, and nothing else."""

    def __init__(self, env: Env, client: DirectClient) -> None:
        self.client = client
        policy = resolve_policy(env.task("direct"), env.config)
        self.thread_params = {"cwd": str(env.workdir), "approvalPolicy": policy.approval_policy,
                              "sandbox": policy.sandbox}

    async def setup(self) -> None:
        await self.client.handshake()

    async def task(self) -> None:
        thread = (await self.client.request("thread/start", self.thread_params))["thread"]["id"]
        await self.client.turn(thread)


def task_limits(env: Env) -> dict[str, dict[str, Any]]:
    """What the runner sends codex for a task of ``env``: the thread's limits on
    ``thread/start`` and the turn's on ``turn/start`` (runner/context.py ``limits``)."""
    policy = resolve_policy(env.task("limits"), env.config)
    return {"thread_params": {"approvalPolicy": policy.approval_policy, "sandbox": policy.sandbox},
            "turn_params": {"cwd": str(env.workdir), "approvalPolicy": policy.approval_policy,
                            "sandboxPolicy": sandbox_policy(policy.sandbox)}}


class SameServerDriver:
    """The runner's codex work through our client on the runner's own app-server: the
    difference to the runner is the runner layer alone, with no second codex child."""

    def __init__(self, env: Env, app: AppServer) -> None:
        self.env, self.app = env, app
        self.limits = task_limits(env)

    async def task(self) -> None:
        await bare_turn(self.app, self.env, **self.limits)


class DefaultsDriver:
    """The bare client's turn under codex's own defaults: no limits sent at all."""

    def __init__(self, env: Env, app: AppServer) -> None:
        self.env, self.app = env, app

    async def task(self) -> None:
        await bare_turn(self.app, self.env)


class FactsDriver:
    """Only the runner's after-turn work (git facts, artifact scan), to show its share."""

    def __init__(self, env: Env) -> None:
        self.workdir = env.workdir

    async def task(self) -> None:
        await gitfacts.branch_facts(self.workdir, "missing")
        await gitfacts.artifacts(self.workdir, time.time())


@contextlib.asynccontextmanager
async def direct_client(env: Env) -> AsyncIterator[DirectClient]:
    client = await DirectClient.start(env.codex, env.home, env.workdir)
    async with asyncio.TaskGroup() as tg:
        reader = tg.create_task(client.read())
        try:
            yield client
        finally:
            assert client.proc.stdin
            client.proc.stdin.close()
            await client.proc.wait()
            await reader


def _ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1)


async def runner_vs_direct(samples: int = DEFAULT_SAMPLES, warmup: int = WARMUP,
                           pairs: int | None = None) -> dict[str, Any]:
    """1b over ``samples``; 1d over ``pairs`` back-to-back pairs (``samples`` if None)."""
    pairs = pairs or samples
    with environment(Model()) as env:
        async with env.app_server() as app, direct_client(env) as client:
            direct = DirectTaskDriver(env, client)
            await direct.setup()
            runner = RunnerDriver(env, env.runner(app))
            # 1b: the runner against the direct client on its own codex child.
            times = await measure({"direct": direct, "runner": runner, "facts": FactsDriver(env)},
                                  "task", samples, warmup)
            # 1d in a run of its own: the pair back to back on one codex child, so the
            # direct client's child never runs just before one of them more than the other.
            layer = await measure({"runner": runner, "same": SameServerDriver(env, app)}, "task",
                                  pairs, warmup, pair=("runner", "same"))
    runner_ms, direct_ms = _ms(times["runner"]), _ms(times["direct"])
    layer_ms, same_ms = _ms(layer["runner"]), _ms(layer["same"])
    return {"runner_ms": runner_ms, "direct_ms": direct_ms, "ratio": round(runner_ms / direct_ms, 2),
            "layer_runner_ms": layer_ms, "same_server_ms": same_ms,
            # 1d: the median of the per-pair ratios (each pair back to back, order alternating).
            "same_server_ratio": round(pair_ratio(layer["runner"], layer["same"]), 3),
            "same_server_ratio_of_medians": round(layer_ms / same_ms, 3),
            "after_turn_facts_ms": _ms(times["facts"]), "samples": samples, "pairs": pairs}


# ----------------------------------------------------------------- concurrency


async def _wall(work: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    await work()
    return time.perf_counter() - start


async def bare_turn(app: AppServer, env: Env, thread_params: dict[str, Any] | None = None,
                    turn_params: dict[str, Any] | None = None) -> None:
    """A task's codex work with no runner: thread/start, turn/start, follow to turn/completed.

    Without params codex's defaults apply; ``task_limits`` gives the runner's own.
    """
    client = await app.client()
    thread = (await client.thread_start(**{"cwd": str(env.workdir), **(thread_params or {})}))["thread"]["id"]
    async with client.listen(thread) as listener:
        await client.turn_start(thread, [{"type": "text", "text": "benchmark"}], **(turn_params or {}))
        async for note in listener:
            if note.method == "turn/completed":
                return


def _cpu_s(pid: int | None) -> float:
    """CPU seconds of the codex child's process tree (its reaped children included)."""
    if pid is None:
        return 0.0
    root = psutil.Process(pid)
    total = 0.0
    for proc in (root, *root.children(recursive=True)):
        try:  # per-thread shell snapshots come and go
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


class _OwnCpu:
    """CPU seconds of the calling thread (the event loop's) from construction to ``stop``."""

    def __init__(self) -> None:
        self.start = time.thread_time()

    def stop(self) -> float:
        return time.thread_time() - self.start


async def _seq_and_conc(tasks: int, one: Callable[[int, bool], Awaitable[Any]]) -> tuple[float, float]:
    """``one(index, concurrent)``: the sequential pass, then all ``tasks`` at once."""
    async def sequential() -> None:
        for index in range(tasks):
            await one(index, False)

    async def concurrent() -> None:
        async with asyncio.TaskGroup() as tg:
            for index in range(tasks):
                tg.create_task(one(index, True))

    return await _wall(sequential), await _wall(concurrent)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0.99: the slowest of 32, of 100 the 99th)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def concurrency(tasks: int = CONCURRENT_TASKS, chunks: int = STREAM_CHUNKS,
                      delay_s: float = STREAM_DELAY_S) -> dict[str, Any]:
    """The runner's speed-up, and (for scale) the bare client's on the same app-server."""
    with environment(Model(chunks, delay_s)) as env:
        async with env.app_server() as app:
            runner = env.runner(app)
            await run_task(runner, env.task("warmup"))  # the first thread of a child is slower
            to_turn: list[float] = []  # the concurrent tasks': run() called -> turn/start answered

            async def one(index: int, concurrent: bool) -> None:
                clock, start = TurnClock(), time.monotonic()
                await run_task(runner, env.task(f"task_{index}_{time.monotonic_ns()}"), clock)
                if concurrent and clock.turn_started_at is not None:
                    to_turn.append(clock.turn_started_at - start)

            cpu_before = _cpu_s(app.child_pid), time.process_time()
            daemon_cpu = _OwnCpu()
            seq_s, conc_s = await _seq_and_conc(tasks, one)
            codex_cpu = _cpu_s(app.child_pid) - cpu_before[0]
            own_cpu = time.process_time() - cpu_before[1]
            runner_cpu_s = daemon_cpu.stop()
            limits = task_limits(env)
            bare_seq_s, bare_conc_s = await _seq_and_conc(tasks, lambda _i, _c: bare_turn(app, env, **limits))
    if len(to_turn) != tasks:
        raise RuntimeError(f"{tasks - len(to_turn)} concurrent task(s) never reported turn/start")
    p50, p99 = percentile(to_turn, 0.5), percentile(to_turn, 0.99)
    return {"tasks": tasks, "sequential_s": round(seq_s, 3), "concurrent_s": round(conc_s, 3),
            "speedup": round(seq_s / conc_s, 2),
            # Row 3's fairness: with every task claimed at once, none waits far longer than
            # the typical one for its turn/start (the run() call stands for the claim).
            "claim_to_turn_p50_ms": round(p50 * 1000, 1), "claim_to_turn_p99_ms": round(p99 * 1000, 1),
            "claim_to_turn_p99_over_p50": round(p99 / p50, 2),
            # CPU per task explains the speed-up on a small machine: 8 turns at once are
            # bound by codex's CPU per turn, not by waiting on the model.
            "codex_cpu_ms_per_task": round(codex_cpu / (2 * tasks) * 1000, 1),
            # This process: the runner, the client and the scripted model's server threads.
            "bench_process_cpu_ms_per_task": round(own_cpu / (2 * tasks) * 1000, 1),
            # The daemon's own share: the CPU of this process's event-loop thread, where
            # the runner, the client and the card live (the model server has its own threads).
            "daemon_cpu_ms_per_task": round(runner_cpu_s / (2 * tasks) * 1000, 1),
            "cpus": os.cpu_count(),
            "bare_client_sequential_s": round(bare_seq_s, 3),
            "bare_client_concurrent_s": round(bare_conc_s, 3),
            "bare_client_speedup": round(bare_seq_s / bare_conc_s, 2),
            "model_stream_s_per_turn": round((chunks + 3) * delay_s, 3)}


# ----------------------------------------------------------------- app-server reuse


async def _timed_start(model: Model, runner: Runner, task: Task) -> tuple[float, float]:
    """(start → the turn's model request, start → task result) on the warm app-server."""
    seen = len(model.times)
    start = time.monotonic()
    async with asyncio.TaskGroup() as tg:
        tg.create_task(run_task(runner, task))
        arrived = await model.arrival_after(seen)
    return arrived - start, time.monotonic() - start


async def _spawned(env: Env, name: str, model: Model) -> tuple[float, float]:
    seen = len(model.times)
    start = time.monotonic()
    async with env.app_server() as app:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(run_task(env.runner(app), env.task(name)))
            arrived = await model.arrival_after(seen)
        finished = time.monotonic()  # the result is out; the child's teardown is not the task's
    return arrived - start, finished - start


async def exec_task(env: Env) -> float:
    """One task as a user would run it without boss-agent: ``codex exec --json``, to its end."""
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        env.codex, "exec", "--json", "--skip-git-repo-check", "-C", str(env.workdir), "--", "benchmark",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "CODEX_HOME": str(env.home)})
    try:
        async with asyncio.timeout(ARRIVAL_TIMEOUT_S):
            out, _ = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    if proc.returncode != 0 or ANSWER.encode() not in out:
        raise RuntimeError(f"codex exec exited {proc.returncode} without the answer")
    return time.monotonic() - start


async def reuse(samples: int = DEFAULT_SAMPLES, pairs_per_sample: int = PAIRS_PER_SAMPLE) -> dict[str, Any]:
    model = Model()
    warm_start, spawn_start, spawn_whole, execs = [], [], [], []
    with environment(model) as env:
        async with env.app_server() as app:
            runner = env.runner(app)
            await run_task(runner, env.task("warmup"))
            await exec_task(env)  # the first exec warms the page cache for the binary
            # 8b/8c/8d's warm task, the bare client's turn under the same limits (the
            # floor) and under codex's defaults (what the limits cost codex itself).
            warm = {"warm": RunnerDriver(env, runner), "bare": SameServerDriver(env, app),
                    "bare_defaults": DefaultsDriver(env, app)}
            whole: dict[str, list[float]] = {name: [] for name in warm}
            for index in range(samples):  # alternate, so drift hits all of them alike
                # Start -> model request needs a poll of the model's arrivals; the whole
                # task is timed in the pairs below, with nothing polling beside it.
                to_turn, _ = await _timed_start(model, runner, env.task(f"warm_{index}"))
                warm_start.append(to_turn)
                to_turn, spawned = await _spawned(env, f"spawn_{index}", model)
                spawn_start.append(to_turn)
                spawn_whole.append(spawned)
                execs.append(await exec_task(env))
                for name, times in (await measure(warm, "task", pairs_per_sample, warmup=0,
                                                  pair=("warm", "bare"))).items():
                    whole[name] += times
    result = {"warm_start_ms": _ms(warm_start), "spawn_start_ms": _ms(spawn_start),
              "warm_task_ms": _ms(whole["warm"]), "spawn_task_ms": _ms(spawn_whole),
              "exec_task_ms": _ms(execs), "bare_task_ms": _ms(whole["bare"]),
              "bare_defaults_task_ms": _ms(whole["bare_defaults"]),
              # 8d: the warm task over the bare client's turn, median of back-to-back pairs.
              "warm_over_bare": round(pair_ratio(whole["warm"], whole["bare"]), 3),
              "pairs": len(whole["warm"]), "samples": samples}
    result["start_ratio"] = round(result["warm_start_ms"] / result["spawn_start_ms"], 3)
    result["start_speedup"] = round(result["spawn_start_ms"] / result["warm_start_ms"], 1)
    result["exec_ratio"] = round(result["warm_task_ms"] / result["exec_task_ms"], 3)
    result["bare_exec_ratio"] = round(result["bare_task_ms"] / result["exec_task_ms"], 3)
    return result


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES, help="samples per path")
    args = parser.parse_args()
    logging.getLogger("boss_agent").setLevel(logging.ERROR)
    results = {"runner_vs_direct": asyncio.run(runner_vs_direct(args.samples)),
               "concurrency": asyncio.run(concurrency()),
               "reuse": asyncio.run(reuse(args.samples))}
    for name, result in results.items():
        print(name, result)
    return results


if __name__ == "__main__":
    main()
