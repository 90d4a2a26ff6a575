"""Many tasks back to back through the local control plane (the one `boss-agent up`
embeds) and the real codex with the scripted model, the daemon a real process:
none lost, none run twice, memory and file descriptors flat."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.demo import scripted_model as sm
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from tests.support.soak import DaemonProcess, TurnCounter
from tests.support.waits import eventually

# The figure; well under a minute on 2 cores (BOSS_SOAK_TASKS overrides it).
TASKS = int(os.environ.get("BOSS_SOAK_TASKS", "200"))
WARM = 20  # RSS and fds are compared from this task on: codex and caches have settled by then
RSS_GROWTH_MAX = 0.10
FD_SLACK = 8  # loopback keep-alive connections come and go; a leak grows with the task count
POLL_S = 0.2  # how often the control plane's task table is looked at
TASK_BOUND_S = 60.0  # one task, queued to completed, on a loaded machine


def _done(cp: ControlPlane) -> int:
    return sum(1 for t in cp.core.queue.tasks(limit=TASKS + 10) if t["status"] in
               ("completed", "failed", "cancelled", "abandoned"))


async def _until_done(cp: ControlPlane, count: int, daemon: DaemonProcess) -> None:
    def done() -> bool:
        assert daemon.alive(), daemon.log()[-3000:]
        return _done(cp) >= count

    await eventually(done, TASK_BOUND_S * max(1, count - _done(cp)), every=POLL_S)


@pytest.mark.timeout(400)
async def test_many_tasks_back_to_back_lose_nothing_run_nothing_twice_and_leak_nothing(
        tmp_path: Path, codex_bin: str, soak_figures: Callable[[str], None]) -> None:
    counter = TurnCounter()
    workdir = tmp_path / "work"
    workdir.mkdir()
    with sm.ScriptedModel(responder=counter) as model:
        codex_home = sm.write_codex_home(tmp_path / "codex-home", model.base_url)
        async with ControlPlane(tmp_path / "cp" / "boss.db") as cp:
            await pair_device(tmp_path / "state", cp.url, cp.create_pairing_code(),
                              policy=BossApiRetry.fast())
            daemon = DaemonProcess(tmp_path, cp.url, codex_bin, codex_home)
            daemon.start()
            try:
                ids = {cp.submit_task(f"soak job-{i}", workdir=str(workdir)): f"job-{i}"
                       for i in range(TASKS)}
                await _until_done(cp, WARM, daemon)
                rss_warm, fds_warm = daemon.ps.memory_info().rss, daemon.ps.num_fds()
                await _until_done(cp, TASKS, daemon)
                rss_end, fds_end = daemon.ps.memory_info().rss, daemon.ps.num_fds()
                views = {t["taskId"]: t for t in cp.core.queue.tasks(limit=TASKS + 10)}
            finally:
                code = daemon.stop()
    lost = [i for i, tag in ids.items() if views[i]["status"] != "completed"
            or (views[i].get("result") or {}).get("resultText") != f"done {tag}"]
    rerun = counter.rerun()
    growth = (rss_end - rss_warm) / rss_warm
    soak_figures(f"tasks={TASKS} lost={len(lost)} re-run={len(rerun)} "
                 f"rss_growth={growth:+.1%} (task {WARM} {rss_warm >> 20} MiB -> end "
                 f"{rss_end >> 20} MiB) fds={fds_warm}->{fds_end}")
    assert code == 0
    assert lost == [] and rerun == []
    assert growth < RSS_GROWTH_MAX
    assert fds_end <= fds_warm + FD_SLACK
