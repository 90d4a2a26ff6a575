"""Daemon benchmark: idle footprint, claim-to-turn latency, whole-task overhead.

Run: ``python -m bench.bench_daemon [--window 20] [--tasks 5]`` (under ~90 s with the
defaults). It starts the real ControlPlane and the scripted model in this process
and the daemon as a real ``python -m boss_agent run`` subprocess with the real codex,
then measures:

1. idle footprint: the daemon's RSS and CPU (its codex child separately) over
   ``window`` seconds of heartbeats and long polls;
2. claim-to-turn: submit -> the model request for the turn, through daemon + control
   plane, against the runner called directly on the same task, in back-to-back pairs
   (the order alternating) while the daemon runs; the added time is the median of the
   pairs' differences;
3. whole task: submit -> completed on the control plane, against the runner's
   ``run`` called directly, from the same pairs.

It prints the ratios and returns them as a dict.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil

from bench.bench_gateway import _free_port, _start_redis
from boss_agent.demo import scripted_model as sm
from boss_agent.appserver.client import AppServer
from boss_agent.codexbin import find_codex
from boss_agent.config import load_config
from boss_agent.controlplane import ControlPlane
from boss_agent.progress.card import Card
from boss_agent.runner import Runner
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.tasks import ApprovalRequest, SinkDefaults, Task

REPO = Path(__file__).resolve().parent.parent
DEFAULT_WINDOW_S = 20.0  # the full suite passes 60
DEFAULT_TASKS = 5
WARMUP_TASKS = 1  # a fresh app-server's first thread is slower; both paths discard it
ARRIVAL_TIMEOUT_S = 60.0  # a turn's model request arrives in well under a second
ENDED = ("completed", "failed", "cancelled")
START_TIMEOUT_S = 60.0
ANSWER = "bench answer"


class ArrivalLog:
    """When each model request arrived (monotonic), and a wait for the next one.

    The responder runs on the scripted model's threads: each arrival wakes the waiting
    coroutine through its loop, so the bench never polls the loop it is measuring.
    """

    def __init__(self) -> None:
        self.times: list[float] = []
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def arrived(self) -> None:
        """On the model's thread: note the request, wake whoever waits for it."""
        self.times.append(time.monotonic())
        for loop, event in list(self._waiters):
            loop.call_soon_threadsafe(event.set)

    async def arrival_after(self, count: int) -> float:
        """The time of request number ``count`` (from 0), once it has come."""
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(ARRIVAL_TIMEOUT_S):
                while len(self.times) <= count:
                    await waiter[1].wait()
                    waiter[1].clear()
        finally:
            self._waiters.remove(waiter)
        return self.times[count]


class Arrivals(ArrivalLog):
    """The scripted model's responder: records when each model request arrived."""

    def __call__(self, _request: sm.RecordedRequest) -> sm.Response:
        self.arrived()
        return sm.text_reply(ANSWER)


class TaskEnds:
    """The control plane's completions, watched: a wait for one task's end without
    polling the loop the daemon's answers arrive on."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self._ended: dict[str, asyncio.Event] = {}
        complete = cp.core.complete

        def watched_complete(device_id: str, task_id: str, body: dict[str, Any]) -> None:
            complete(device_id, task_id, body)
            self._event(task_id).set()

        cp.core.complete = watched_complete  # type: ignore[method-assign]

    def _event(self, task_id: str) -> asyncio.Event:
        return self._ended.setdefault(task_id, asyncio.Event())

    async def wait(self, task_id: str, timeout_s: float = START_TIMEOUT_S) -> dict[str, Any]:
        """The task's view once it is no longer running (completed, failed, cancelled)."""
        async with asyncio.timeout(timeout_s):
            while (view := self.cp.task(task_id))["status"] not in ENDED:
                await self._event(task_id).wait()
                self._event(task_id).clear()
        self._ended.pop(task_id, None)
        return view


class NullSink(SinkDefaults):
    async def progress(self, card: Card) -> None:
        return None

    async def request_approval(self, request: ApprovalRequest) -> str:
        return "decline"


def codex_bin() -> str:
    """BOSS_TEST_CODEX_BIN, else the repo's pinned codex (scripts/test.sh), else the usual search."""
    for candidate in (os.environ.get("BOSS_TEST_CODEX_BIN"),
                      str(REPO / ".tools" / "node_modules" / ".bin" / "codex")):
        if candidate and os.path.exists(candidate):
            return candidate
    return find_codex()


def _footprint(proc: psutil.Process, window_s: float) -> dict[str, float]:
    children = proc.children(recursive=True)
    start = (proc.cpu_times(), [c.cpu_times() for c in children], time.monotonic())
    time.sleep(window_s)
    elapsed = time.monotonic() - start[2]

    def cpu(before: Any, after: Any) -> float:
        return (after.user + after.system) - (before.user + before.system)

    daemon_cpu = cpu(start[0], proc.cpu_times())
    child_cpu, child_rss = 0.0, 0
    for before, child in zip(start[1], children, strict=True):
        try:  # short-lived probes (codex --version, git) may be gone by now
            child_cpu += cpu(before, child.cpu_times())
            child_rss += child.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return {"daemon_rss_mb": proc.memory_info().rss / 2**20,
            "children_rss_mb": child_rss / 2**20,
            "daemon_cpu_pct": 100 * daemon_cpu / elapsed,
            "children_cpu_pct": 100 * child_cpu / elapsed, "window_s": elapsed}


async def _daemon_task(ends: TaskEnds, arrivals: Arrivals, workdir: Path) -> tuple[float, float]:
    """One task through the control plane and the daemon: (submit -> turn's model request, whole)."""
    seen = len(arrivals.times)
    start = time.monotonic()
    task_id = ends.cp.submit_task("benchmark", workdir=str(workdir))
    to_turn = await arrivals.arrival_after(seen) - start
    view = await ends.wait(task_id)
    whole = time.monotonic() - start
    assert view["result"]["resultText"] == ANSWER, view["result"]
    return to_turn, whole


async def _direct_task(runner: Runner, arrivals: Arrivals, workdir: Path, index: int) -> tuple[float, float]:
    """The same task through ``Runner.run`` called directly: (run() -> model request, whole)."""
    task = Task(task_id=f"direct_{index}", prompt="benchmark", workdir=str(workdir))
    seen = len(arrivals.times)
    start = time.monotonic()
    async with asyncio.TaskGroup() as tg:
        run = tg.create_task(runner.run(task, NullSink(), asyncio.Event()))
        to_turn = await arrivals.arrival_after(seen) - start
    whole = time.monotonic() - start
    assert run.result().result_text == ANSWER
    return to_turn, whole


async def _pairs(ends: TaskEnds, config: Any, home: Path, arrivals: Arrivals, workdir: Path,
                 tasks: int) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """``tasks`` back-to-back pairs (daemon task, direct task), the order alternating.

    Both paths are measured side by side while the daemon runs, each on its own warm
    app-server: a slow moment of the machine moves both halves of a pair, not the
    verdict (the paths used to be timed minutes apart, and 2a moved by 10 ms between runs).
    """
    pairs = []
    async with AppServer.from_config(config, codex_home=home) as app:
        runner = Runner(config, app, codex_home=home, env={"CODEX_HOME": str(home)})
        for index in range(tasks + WARMUP_TASKS):
            if index % 2:
                direct = await _direct_task(runner, arrivals, workdir, index)
                daemon = await _daemon_task(ends, arrivals, workdir)
            else:
                daemon = await _daemon_task(ends, arrivals, workdir)
                direct = await _direct_task(runner, arrivals, workdir, index)
            if index >= WARMUP_TASKS:
                pairs.append((daemon, direct))
    return pairs


def _daemon_env(root: Path, config: Any, home: Path, cp: ControlPlane, **extra: str) -> dict[str, str]:
    return {**os.environ, "BOSS_AGENT_CONFIG": str(root / "config.toml"),
            "BOSS_STATE_DIR": str(config.state_dir), "BOSS_WORKSPACES": str(root),
            "BOSS_CODEX_BIN": config.codex.bin, "CODEX_HOME": str(home),
            "BOSS_SERVER_URL": cp.url, "BOSS_LOG_LEVEL": "warning",
            "BOSS_CODEX_THREAD_AHEAD": str(config.codex.thread_ahead).lower(), **extra}


def _last_beat(cp: ControlPlane) -> str | None:
    return next((d["lastHeartbeatAt"] for d in cp.devices()), None)


@contextlib.asynccontextmanager
async def _running_daemon(cp: ControlPlane, env: dict[str, str]) -> AsyncIterator[subprocess.Popen[bytes]]:
    """``python -m boss_agent run`` as a subprocess, yielded once it has heartbeated."""
    before = _last_beat(cp)
    proc = subprocess.Popen(  # noqa: ASYNC220 - Popen returns at once
        [sys.executable, "-m", "boss_agent", "run"], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Up: the daemon heartbeated (it does so right after READY): a beat newer than
        # the one a daemon before it left.
        deadline = time.monotonic() + START_TIMEOUT_S
        while _last_beat(cp) in (None, before):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the daemon did not start")
            await asyncio.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.wait, START_TIMEOUT_S)


async def _idle_with_gateway(cp: ControlPlane, env: dict[str, str], root: Path,
                             window_s: float) -> dict[str, float]:
    """The idle footprint again, with the Redis gateway on (a real redis-server)."""
    port = _free_port()
    redis = _start_redis(port, str(root))
    try:
        gateway = {**env, "BOSS_GATEWAY_ENABLED": "true", "BOSS_REDIS_URL": f"redis://127.0.0.1:{port}/0"}
        async with _running_daemon(cp, gateway) as proc:
            return await asyncio.to_thread(_footprint, psutil.Process(proc.pid), window_s)
    finally:
        redis.kill()
        redis.wait()


async def bench(window_s: float = DEFAULT_WINDOW_S, tasks: int = DEFAULT_TASKS) -> dict[str, Any]:
    arrivals = Arrivals()
    with tempfile.TemporaryDirectory() as tmp, sm.ScriptedModel(responder=arrivals) as model:
        root = Path(tmp)
        home = sm.write_codex_home(root / "codex-home", model.base_url)
        workdir = root / "work"
        workdir.mkdir()
        (root / "config.toml").touch()
        # 2a/2b compare the daemon with the runner doing the same work: neither makes a
        # thread ahead (runner/thread_ahead.py; row 13 measures it).
        settings = {"state_dir": str(root / "state"), "workspaces": [str(root)],
                    "codex.bin": codex_bin(), "codex.thread_ahead": False}
        config = load_config(root / "config.toml", overrides=settings, environ={})
        async with ControlPlane(root / "cp" / "boss.db") as cp:
            await pair_device(config.state_dir, cp.url, cp.create_pairing_code())
            env = _daemon_env(root, config, home, cp)
            async with _running_daemon(cp, env) as proc:
                idle = await asyncio.to_thread(_footprint, psutil.Process(proc.pid), window_s)
                pairs = await _pairs(TaskEnds(cp), config, home, arrivals, workdir, tasks)
            idle_gateway = await _idle_with_gateway(cp, env, root, window_s)
    daemon_turn, daemon_whole = [d[0] for d, _ in pairs], [d[1] for d, _ in pairs]
    direct_turn, direct_whole = [r[0] for _, r in pairs], [r[1] for _, r in pairs]
    result = {
        **{f"idle_{k}": round(v, 3) for k, v in idle.items()},
        **{f"idle_gateway_{k}": round(v, 3) for k, v in idle_gateway.items()},
        "pairs": len(pairs),
        "claim_to_turn_daemon_ms": round(statistics.median(daemon_turn) * 1000, 1),
        "claim_to_turn_direct_ms": round(statistics.median(direct_turn) * 1000, 1),
        "task_daemon_ms": round(statistics.median(daemon_whole) * 1000, 1),
        "task_direct_ms": round(statistics.median(direct_whole) * 1000, 1),
        # The verdict's number: the median of the pairs' own differences.
        "claim_to_turn_added_ms": round(statistics.median(
            d[0] - r[0] for d, r in pairs) * 1000, 1),
        "task_added_ms": round(statistics.median(d[1] - r[1] for d, r in pairs) * 1000, 1),
    }
    result["claim_to_turn_ratio"] = round(
        result["claim_to_turn_daemon_ms"] / result["claim_to_turn_direct_ms"], 2)
    result["task_ratio"] = round(result["task_daemon_ms"] / result["task_direct_ms"], 2)
    return result


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=DEFAULT_WINDOW_S, help="idle window (s)")
    parser.add_argument("--tasks", type=int, default=DEFAULT_TASKS, help="tasks per path")
    args = parser.parse_args()
    result = asyncio.run(bench(args.window, args.tasks))
    for key, value in result.items():
        print(f"{key:32} {value}")
    print(f"daemon+control plane vs runner direct: claim-to-turn x{result['claim_to_turn_ratio']}, "
          f"whole task x{result['task_ratio']}")
    return result


if __name__ == "__main__":
    main()
