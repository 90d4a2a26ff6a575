"""`boss-agent run` on a device that is not paired (or whose identity is damaged)
waits for pairing instead of exiting, so a service installed first simply starts
working: real `python -m boss_agent run` and `pair` subprocesses, the real
ControlPlane on loopback, the real codex app-server once paired."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.statefile import status_snapshot
from boss_agent.demo import scripted_model as sm
from tests.conftest import REPO
from tests.support.waits import eventually
from tests.support.cli import isolated, run_cli_async

START_S = 90.0  # pairing noticed, codex app-server started, on a loaded 2-core machine
EXIT_S = 30.0
WAITING_LINE = "waiting for pairing"


def _env(tmp_path: Path, server: str, codex_bin: str, codex_home: Path) -> dict[str, str]:
    return isolated(tmp_path, BOSS_SERVER_URL=server, BOSS_CODEX_BIN=codex_bin, BOSS_WORKSPACES=str(tmp_path),
                    CODEX_HOME=str(codex_home), BOSS_GRACE_PERIOD_S="0")


def _start(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    log = (tmp_path / "daemon.log").open("ab")
    return subprocess.Popen([sys.executable, "-m", "boss_agent", "run"], cwd=REPO, env=env,
                            stdout=log, stderr=log)


def _log(tmp_path: Path) -> str:
    return (tmp_path / "daemon.log").read_text(errors="replace")


def _state_is(tmp_path: Path, proc: subprocess.Popen[bytes], state: str) -> bool:
    assert proc.poll() is None, f"the daemon exited: {_log(tmp_path)[-2000:]}"
    return status_snapshot(tmp_path / "state")["state"] == state


async def _pair(cp: ControlPlane, env: dict[str, str]) -> None:
    done = await run_cli_async("pair", cp.create_pairing_code(), "--server", cp.url, env=env, timeout=EXIT_S)
    assert done.returncode == 0, done.stderr


async def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return await asyncio.to_thread(proc.wait, EXIT_S)


@pytest.mark.parametrize("damaged", [False, True], ids=["unpaired", "damaged identity"])
async def test_run_waits_for_pairing_then_serves_tasks(
        tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path,
        scripted_model: sm.ScriptedModel, damaged: bool) -> None:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp:
        env = _env(tmp_path, cp.url, codex_bin, codex_home)
        if damaged:
            (tmp_path / "state").mkdir(mode=0o700)
            (tmp_path / "state" / "device.json").write_text("{half a file")
            (tmp_path / "state" / "device_token").write_text("bdt_old")
        proc = _start(tmp_path, env)
        try:
            await eventually(lambda: _state_is(tmp_path, proc, WAITING_LINE), timeout=START_S)
            assert proc.poll() is None
            if damaged:
                assert _log(tmp_path).count("device identity") == 1
            await _pair(cp, env)
            await eventually(lambda: _state_is(tmp_path, proc, "running"), timeout=START_S)
            scripted_model.enqueue(sm.turn(sm.message("paired and working")))
            task_id = cp.submit_task("after pairing", workdir=str(workdir))
            await eventually(lambda: cp.task(task_id)["status"] == "completed", timeout=START_S)
            result = cp.task(task_id)["result"]
        finally:
            code = await _stop(proc)
    assert code == 0, _log(tmp_path)
    assert result["resultText"] == "paired and working"
    assert _log(tmp_path).count(WAITING_LINE) == 1
