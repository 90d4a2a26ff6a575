"""Stopping and starting `up` as a user meets it: a stop does not wait out the grace period
for a task that only waits on an approval, and a busy port is one clear line."""

from __future__ import annotations

import asyncio
import signal
import socket
from pathlib import Path

import pytest

from boss_agent.controlplane import ControlPlane, LocalClient
from boss_agent.demo import scripted_model as sm
from tests.support.config import make_config
from tests.support.daemon import WAIT_S, paired_daemon
from tests.support.e2e import UpProcess, pending_approval
from tests.support.cli import cli_env, run_cli_async

TASK_WAIT_S = 60  # codex start-up plus one scripted model round trip
LONG_GRACE_S = 3600  # far beyond the test's bound: only an immediate cancel lets the daemon stop in time
CLI_TIMEOUT_S = 60


@pytest.mark.codex
async def test_a_stop_cancels_at_once_a_task_that_only_waits_on_an_approval(
    tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path, scripted_model: sm.ScriptedModel,
) -> None:
    scripted_model.enqueue(sm.turn(sm.shell_call("echo never", sandbox_permissions="require_escalated",
                                                 justification="the test asks and nobody answers")))
    async with ControlPlane(tmp_path / "cp" / "boss.db") as plane:
        config = make_config(tmp_path, server_url=plane.url, workspace=tmp_path,
                             codex__bin=codex_bin, grace_period_s=LONG_GRACE_S)
        async with paired_daemon(config, plane.url, plane.create_pairing_code(), codex_home) as (daemon, job):
            task_id = plane.submit_task("run something", workdir=str(workdir))
            await plane.wait_task(task_id, lambda v: v["approvals"], TASK_WAIT_S)
            daemon.request_stop()  # what Ctrl-C on `up` does
            await asyncio.wait_for(job, WAIT_S)
        view = plane.task(task_id)
    assert view["status"] == "cancelled", view["result"]
    assert view["approvals"][0]["status"] != "decided"
    assert "echo never" not in "".join(str(r.tool_outputs()) for r in scripted_model.requests)


@pytest.mark.codex
async def test_ctrl_c_on_up_does_not_wait_for_an_approval_nobody_will_give(tmp_path: Path, codex_bin: str) -> None:
    up = UpProcess(tmp_path, codex_bin)
    up.env["BOSS_GRACE_PERIOD_S"] = str(LONG_GRACE_S)  # only an immediate cancel lets `up` exit in time
    await asyncio.to_thread(up.start)
    try:
        async with LocalClient.for_db_dir(up.controlplane_dir) as client:
            task_id = await client.submit("show me the demo", workdir=str(up.project("waiting")))
            async for view in client.follow(task_id):
                if pending_approval(view):
                    break
        assert up.proc is not None
        up.proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert await asyncio.to_thread(up.proc.wait, WAIT_S) == 0
    finally:
        if up.proc is not None and up.proc.poll() is None:
            up.stop()
    assert f"task {task_id} cancelled" in up.everything_written()


async def test_up_on_a_busy_port_says_so_in_one_line_naming_the_port_and_the_flag(
        tmp_path: Path, codex_bin: str) -> None:
    env = cli_env(tmp_path / "home", BOSS_STATE_DIR=str(tmp_path / "state"), BOSS_WORKSPACES=str(tmp_path),
                  BOSS_CODEX_BIN=codex_bin)  # a codex is there: the port is the only problem
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = await run_cli_async("up", "--port", str(port), cwd=tmp_path, env=env, timeout=CLI_TIMEOUT_S)
    err = done.stderr
    assert done.returncode != 0
    assert len(err.strip().splitlines()) == 1, err
    assert str(port) in err and "--port" in err and "internal error" not in err and "OSError" not in err
