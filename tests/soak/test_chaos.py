"""Chaos: tasks run while a seeded random schedule SIGKILLs the codex app-server, the
daemon (then restarted, as systemd would) and redis-server (then restarted; the
daemon's gateway is on). Every task still ends terminal on the control plane, no
completed result is lost or wrong, and no turn is ever started twice (the scripted
model counts turns per task)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.demo import scripted_model as sm
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from tests.support.soak import DaemonProcess, TurnCounter
from tests.support.waits import eventually

SEED = int(os.environ.get("BOSS_CHAOS_SEED", "16"))
TASKS = int(os.environ.get("BOSS_CHAOS_TASKS", "50"))
KILLS = 12  # events in the schedule; each hits one of the three targets
GAP_S = (0.5, 2.5)  # the schedule's pause between kills, drawn from the seeded generator
LEASE_S = 10.0  # a task claimed by a daemon killed before it journaled it is abandoned after this
TERMINAL = ("completed", "failed", "cancelled", "abandoned")
SETTLE_S = 120.0  # after the last kill: restarts, the lease expiry, the spool delivered
POLL_S = 0.2


def _statuses(cp: ControlPlane) -> Counter[str]:
    return Counter(t["status"] for t in cp.core.queue.tasks(limit=TASKS + 10))


def _kill_app_server(daemon: DaemonProcess) -> None:
    for child in daemon.codex_children():
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


async def _chaos(rng: random.Random, daemon: DaemonProcess, redis, kills: Counter[str]) -> None:
    for _ in range(KILLS):
        await asyncio.sleep(rng.uniform(*GAP_S))  # the schedule itself, not a wait for a condition
        target = rng.choice(("app-server", "daemon", "redis"))
        kills[target] += 1
        if target == "app-server":
            _kill_app_server(daemon)
        elif target == "daemon":
            daemon.kill()
            daemon.start()
        else:
            redis.proc.send_signal(signal.SIGKILL)
            redis.proc.wait()
            await asyncio.to_thread(redis.start)


async def _settled(cp: ControlPlane, daemon: DaemonProcess) -> None:
    def settled() -> bool:
        assert daemon.alive(), daemon.log()[-3000:]
        return sum(_statuses(cp)[s] for s in TERMINAL) >= TASKS

    await eventually(settled, SETTLE_S, every=POLL_S)


@pytest.mark.timeout(300)
async def test_kills_of_codex_the_daemon_and_redis_lose_no_result_and_run_no_turn_twice(
        tmp_path: Path, codex_bin: str, redis_server, soak_figures: Callable[[str], None]) -> None:
    counter = TurnCounter(delay_s=0.15)
    rng = random.Random(SEED)
    kills: Counter[str] = Counter()
    workdir = tmp_path / "work"
    workdir.mkdir()
    with sm.ScriptedModel(responder=counter) as model:
        codex_home = sm.write_codex_home(tmp_path / "codex-home", model.base_url)
        async with ControlPlane(tmp_path / "cp" / "boss.db", lease_s=LEASE_S) as cp:
            await pair_device(tmp_path / "state", cp.url, cp.create_pairing_code(),
                              policy=BossApiRetry.fast())
            daemon = DaemonProcess(tmp_path, cp.url, codex_bin, codex_home,
                                   BOSS_GATEWAY_ENABLED="true", BOSS_REDIS_URL=redis_server.url)
            daemon.start()
            try:
                ids = {cp.submit_task(f"chaos job-{i}", workdir=str(workdir)): f"job-{i}"
                       for i in range(TASKS)}
                await _chaos(rng, daemon, redis_server, kills)
                await _settled(cp, daemon)
                views = {t["taskId"]: t for t in cp.core.queue.tasks(limit=TASKS + 10)}
            finally:
                code = daemon.stop()
    statuses = Counter(v["status"] for v in views.values())
    durable = daemon.durably_completed()
    # Lost: a result the daemon had spooled that the server does not show as completed
    # with this task's own answer; or a completed task with another task's answer.
    wrong = [i for i, tag in ids.items()
             if (views[i]["status"] == "completed" or i in durable)
             and (views[i].get("result") or {}).get("resultText") != f"done {tag}"]
    rerun = counter.rerun()
    failures = Counter(((v.get("result") or {}).get("error") or {}).get("code")
                       for v in views.values() if v["status"] == "failed")
    soak_figures(f"seed={SEED} tasks={TASKS} kills={dict(kills)} daemon_starts={daemon.starts} "
                 f"statuses={dict(statuses)} failures={dict(failures)} spooled={len(durable)} lost={len(wrong)} "
                 f"re-run={len(rerun)}")
    assert code == 0
    assert all(v["status"] in TERMINAL for v in views.values())
    assert wrong == [] and rerun == []
