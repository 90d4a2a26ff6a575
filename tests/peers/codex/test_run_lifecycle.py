"""`boss-agent run` as systemd runs it: a REAL `python -m boss_agent run` process.

It is paired (with the real `pair` command) to a real ControlPlane on loopback that
runs inside the test, drives the real codex app-server against the scripted model,
and gets a real unix datagram socket in NOTIFY_SOCKET, standing in for systemd's.
Checked: READY=1 and WATCHDOG=1 arrive; a second `run` is refused naming the pid;
`status --json` sees the daemon from outside; SIGTERM during a task that cannot
finish exits 0 after the grace period with the task reported `cancelled`; no codex
process outlives the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import STATE_WRITE_S
from tests.conftest import REPO
from tests.support.cli import isolated, run_cli_async

from tests.support.notify_socket import NotifySocket

pytestmark = pytest.mark.codex

GRACE_S = 3  # BOSS_GRACE_PERIOD_S: short, so the SIGTERM test does not wait long
WATCHDOG_USEC = 2_000_000  # systemd's WatchdogSec=2: a ping at least every second
CLI_TIMEOUT_S = 60  # one `pair` / `status` / refused `run` subprocess
READY_TIMEOUT_S = 60  # a cold codex start plus discovery on a loaded 2-core box
# After the grace period the daemon may take CANCEL_GRACE_S (10) to interrupt, the
# final flush FINAL_FLUSH_S (5) and the app-server teardown (8): all bounded.
EXIT_TIMEOUT_S = GRACE_S + 40
CHILD_EXIT_S = 5  # a codex process still alive this long after the daemon exited leaked
TERMINAL = ("completed", "failed", "cancelled")


@dataclass
class Setup:
    tmp: Path
    env: dict[str, str]
    plane: ControlPlane
    notify: NotifySocket
    codex_home: Path

    @property
    def state_dir(self) -> Path:
        return self.tmp / "state"

    async def cli(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        done = await run_cli_async(*args, env=env or self.env, timeout=CLI_TIMEOUT_S)
        return done.returncode, done.stdout, done.stderr

    async def status(self) -> dict:
        code, out, err = await self.cli("status", "--json")
        assert code == 0, err
        return json.loads(out)

    async def status_until(self, predicate: Any, timeout: float) -> dict:
        """Re-read ``status --json`` until ``predicate`` holds: the daemon rewrites its
        state file every STATE_WRITE_S, so a change shows up within that bound."""
        async with asyncio.timeout(timeout):
            while not predicate(data := await self.status()):
                pass
        return data

    async def start(self) -> asyncio.subprocess.Process:
        env = {**self.env, "NOTIFY_SOCKET": self.notify.path, "WATCHDOG_USEC": str(WATCHDOG_USEC)}
        log = (self.tmp / "daemon.out").open("ab")
        with log:
            return await asyncio.create_subprocess_exec(
                sys.executable, "-m", "boss_agent", "run", cwd=REPO, env=env, stdout=log, stderr=log)

    def output(self) -> str:
        return (self.tmp / "daemon.out").read_text(errors="replace")


@pytest.fixture
async def setup(tmp_path: Path, codex_bin: str, codex_home: Path, notify: NotifySocket,
                scripted_model: sm.ScriptedModel) -> AsyncIterator[Setup]:
    env = isolated(tmp_path, BOSS_CODEX_BIN=codex_bin, CODEX_HOME=str(codex_home),
                   BOSS_GRACE_PERIOD_S=str(GRACE_S), BOSS_WORKSPACES=str(tmp_path))
    async with ControlPlane(tmp_path / "cp" / "boss.db") as plane:
        ready = Setup(tmp_path, env, plane, notify, codex_home)
        code, _, err = await ready.cli("pair", plane.create_pairing_code(), "--server", plane.url)
        assert code == 0, err
        try:
            yield ready
        finally:
            scripted_model.release()  # a hung stream must not hold the model's server thread


def codex_processes(codex_home: Path) -> list[psutil.Process]:
    """Live processes started with this test's CODEX_HOME (the daemon's codex children)."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.status() != psutil.STATUS_ZOMBIE and \
                    proc.environ().get("CODEX_HOME") == str(codex_home) and "codex" in proc.name():
                found.append(proc)
    return found


async def stop(proc: asyncio.subprocess.Process) -> int:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    return await asyncio.wait_for(proc.wait(), EXIT_TIMEOUT_S)


@contextlib.asynccontextmanager
async def daemon(setup: Setup) -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await setup.start()
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
            for child in codex_processes(setup.codex_home):
                with contextlib.suppress(psutil.Error):
                    child.kill()


async def test_run_notifies_systemd_refuses_a_second_instance_and_shows_in_status(setup: Setup) -> None:
    async with daemon(setup) as proc:
        try:
            await setup.notify.arrival("READY=1", READY_TIMEOUT_S)
            await setup.notify.arrival("WATCHDOG=1", READY_TIMEOUT_S)
        except TimeoutError:
            pytest.fail(f"no READY/WATCHDOG; daemon said:\n{setup.output()}")
        running = await setup.status()
        assert running["paired"] is True and running["daemonRunning"] is True
        assert running["daemonPid"] == proc.pid
        assert running["deviceId"] == setup.plane.devices()[0]["deviceId"]
        assert str(setup.tmp) not in json.dumps(running)

        code, out, err = await setup.cli("run")
        assert code == 1 and out == ""
        assert err.strip().count("\n") == 0 and f"already running (pid {proc.pid})" in err
        assert "Traceback" not in err

        assert await stop(proc) == 0
    stopped = await setup.status()
    assert stopped["daemonRunning"] is False and stopped["daemonPid"] is None
    assert stopped["paired"] is True


async def test_sigterm_during_a_task_cancels_it_after_the_grace_period_and_leaves_no_codex(
    setup: Setup, scripted_model: sm.ScriptedModel, workdir: Path,
) -> None:
    scripted_model.enqueue(sm.hang(sm.message("still thinking")))  # the turn can never finish
    async with daemon(setup) as proc:
        await setup.notify.arrival("READY=1", READY_TIMEOUT_S)
        task_id = setup.plane.submit_task("a task that cannot finish", workdir=str(workdir))
        await setup.plane.wait_task(task_id, lambda view: view["status"] == "running", READY_TIMEOUT_S)
        await asyncio.to_thread(scripted_model.wait_for_requests, 1, READY_TIMEOUT_S)
        status = await setup.status_until(lambda data: data["runningTaskIds"], STATE_WRITE_S * 3)
        assert status["runningTaskIds"] == [task_id] and status["runningTasks"] == 1
        children = codex_processes(setup.codex_home)
        assert children, "the daemon runs codex with the test's CODEX_HOME"

        assert await stop(proc) == 0, setup.output()
    view = setup.plane.task(task_id)
    assert view["status"] == "cancelled", view
    _, alive = await asyncio.to_thread(psutil.wait_procs, children, CHILD_EXIT_S)
    assert alive == [], f"codex outlived the daemon: {[p.pid for p in alive]}"
    assert codex_processes(setup.codex_home) == []
    assert (await setup.status())["daemonRunning"] is False
