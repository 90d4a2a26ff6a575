"""A full disk never stops the daemon and never loses a result: the state dir sits on
a real tmpfs of a few dozen kilobytes that the test fills up (``mount -t tmpfs -o
size=…``; the test command runs as root, as CI does: a machine that cannot mount fails
the test rather than skipping it). Real ControlPlane
behind the FaultProxy, a real Daemon, the in-test StubRunner."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from boss_agent.cli.doctor import check_daemon
from boss_agent.cli.status import collect_status
from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.statefile import read_state
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.spool import RUNNING_DIR, SPOOL_DIR, record_name
from tests.support.config import make_config
from tests.support.daemon import FAST, FaultProxy, StubRunner, finished, running, spool_empty
from tests.support.waits import eventually

DISK_SIZE = "256k"  # room for the identity and the state file, little else


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE},mode=0700", "tmpfs",
                           str(mount)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs here (the disk-full tests need root): "
                    f"{done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Write a filler file until the disk says ENOSPC."""
    filler = disk / "filler"
    chunk = b"\0" * 4096
    with contextlib.suppress(OSError), filler.open("wb", buffering=0) as handle:
        while True:
            handle.write(chunk)
    return filler


def degraded_state(state_dir: Path) -> bool:
    return bool((read_state(state_dir) or {}).get("spool_degraded"))


async def test_a_full_disk_keeps_the_result_in_memory_and_delivers_it_later(
        tmp_path: Path, small_disk: Path) -> None:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
        config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, state_dir=str(small_disk / "state"))
        await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(), policy=FAST)
        async with running(config, StubRunner(cards=1)) as daemon:
            filler = fill(small_disk)
            proxy.fail("/complete", 10_000)  # and the server is down: the result has nowhere to go
            task_id = cp.submit_task("on a full disk")
            await proxy.wait_for(lambda: proxy.requests(f"/{task_id}/complete"))
            assert daemon.source.spool_degraded and task_id in daemon.source.spool
            daemon.write_state()
            assert degraded_state(config.state_dir)
            assert "degraded" in collect_status(config)["spool"]
            assert "spool degraded" in check_daemon(config)["detail"]
            filler.unlink()  # space is back: the retry puts the result on disk
            await eventually(lambda: not daemon.source.spool_degraded)
            assert record_name(task_id) in os.listdir(config.state_dir / SPOOL_DIR)
            proxy.faults.clear()  # the server is back
            task = await finished(cp, proxy, task_id)
            await spool_empty(daemon)
    assert task["status"] == "completed" and task["result"]["resultText"] == "done: on a full disk"


async def test_journal_recovery_on_a_full_disk_does_not_stop_start_up(
        tmp_path: Path, small_disk: Path) -> None:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
        config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, state_dir=str(small_disk / "state"))
        await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(), policy=FAST)
        (config.state_dir / RUNNING_DIR).mkdir()
        orphan = config.state_dir / RUNNING_DIR / "tsk_orphan.json"  # a dead daemon's entry
        orphan.write_text(json.dumps({"taskId": "tsk_orphan", "attempt": 1}))
        fill(small_disk)
        async with running(config, StubRunner(cards=0)) as daemon:
            await proxy.wait_for(lambda: proxy.requests("/tsk_orphan/complete"))
            body = proxy.requests("/tsk_orphan/complete")[0].body
            assert daemon.source.spool_degraded
    assert body["status"] == "failed" and body["error"]["code"] == "agent_restarted"
