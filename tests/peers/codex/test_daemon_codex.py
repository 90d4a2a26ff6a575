"""The daemon as a user runs it: the real codex app-server with the scripted model,
the real ControlPlane, a real fault-injecting proxy, and for the crash test a real
`python -m boss_agent run` process killed with SIGKILL mid-task and restarted."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.sources.boss.spool import record_name
from tests.conftest import PINNED_CODEX_VERSION, REPO
from tests.support.config import make_config
from tests.support.daemon import WAIT_S, FaultProxy
from tests.support.cli import isolated

pytestmark = pytest.mark.codex
FAST = BossApiRetry.fast()
EXIT_TIMEOUT_S = 30


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[tuple[ControlPlane, FaultProxy]]:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
        yield cp, proxy


async def finished(cp: ControlPlane, proxy: FaultProxy, task_id: str) -> dict[str, Any]:
    await proxy.wait_for(lambda: cp.task(task_id)["status"] in ("completed", "failed", "cancelled"),
                         timeout=60)
    return cp.task(task_id)


async def test_a_task_runs_on_real_codex_and_the_heartbeat_carries_codex_facts(
    tmp_path: Path, plane: tuple[ControlPlane, FaultProxy], codex_bin: str, codex_home: Path,
    workdir: Path, scripted_model: sm.ScriptedModel,
) -> None:
    cp, proxy = plane
    config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, codex__bin=codex_bin)
    await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(), policy=FAST)
    scripted_model.enqueue(sm.turn(sm.message("Hello world!", ["Hello ", "world!"])))
    daemon = Daemon(config, codex_home=codex_home, env={"CODEX_HOME": str(codex_home)},
                    retry_policy=FAST, claim_wait_ms=300, handle_signals=False)
    ready = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        job = tg.create_task(daemon.run(ready))
        await asyncio.wait_for(ready.wait(), 60)
        task_id = cp.submit_task("say hello", workdir=str(workdir))
        view = await finished(cp, proxy, task_id)
        await proxy.wait_for(lambda: _discovered(proxy))
        daemon.request_stop()
        await asyncio.wait_for(job, WAIT_S)
    result = view["result"]
    assert result["status"] == "completed", result
    assert result["resultText"] == "Hello world!"
    assert result["backend"] == "app_server" and result["codexThreadRef"]
    assert view["executionProgress"]["status"] == "completed"
    assert proxy.requests(f"/{task_id}/progress")
    app_server = cp.devices()[0]["capabilities"]["codexAppServer"]
    assert app_server["available"] is True
    assert app_server["version"] == PINNED_CODEX_VERSION and app_server["transport"] == "stdio"
    metadata = app_server["metadata"]
    assert metadata["models"] and metadata["defaultModel"] and metadata["discoveredAt"]
    assert "error" not in metadata


def _discovered(proxy: FaultProxy) -> bool:
    beats = [s.body for s in proxy.requests("/heartbeat") if s.status == 200]
    return any(b["capabilities"]["codexAppServer"]["metadata"].get("models") for b in beats)


def _daemon_process(tmp_path: Path, config_url: str, codex_bin: str, codex_home: Path) -> subprocess.Popen[bytes]:
    env = isolated(tmp_path, BOSS_SERVER_URL=config_url, BOSS_CODEX_BIN=codex_bin, BOSS_WORKSPACES=str(tmp_path),
                   CODEX_HOME=str(codex_home), BOSS_GRACE_PERIOD_S="0")
    log = (tmp_path / "daemon.log").open("ab")
    return subprocess.Popen([sys.executable, "-m", "boss_agent", "run"], cwd=REPO, env=env,
                            stdout=log, stderr=log)


def _kill_hard(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the daemon; then its codex child, which lives in its own session."""
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGKILL)
    proc.wait(EXIT_TIMEOUT_S)
    for child in children:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


async def test_results_survive_sigkill_and_orphans_are_reported_failed_after_restart(
    tmp_path: Path, plane: tuple[ControlPlane, FaultProxy], codex_bin: str, codex_home: Path,
    workdir: Path, scripted_model: sm.ScriptedModel,
) -> None:
    cp, proxy = plane
    identity = await pair_device(tmp_path / "state", proxy.url, cp.create_pairing_code(), policy=FAST)
    scripted_model.enqueue(sm.turn(sm.message("first result")), sm.hang(sm.message("thinking")))
    proxy.fail("/complete", 10_000)  # the server is down for completes: results must spool
    proc = _daemon_process(tmp_path, proxy.url, codex_bin, codex_home)
    try:
        done_id = cp.submit_task("finish me", workdir=str(workdir))
        await proxy.wait_for(lambda: proxy.requests(f"/{done_id}/complete"), timeout=60)
        hung_id = cp.submit_task("canary-prompt-7731", workdir=str(workdir))
        await proxy.wait_for(lambda: proxy.requests(f"/{hung_id}/progress"), timeout=60)
        await asyncio.to_thread(scripted_model.wait_for_requests, 2, 60)
        _kill_hard(proc)
        model_requests = len(scripted_model.requests)
        spooled = {p.name for p in (tmp_path / "state" / "spool").iterdir()}
        assert record_name(done_id) in spooled
        assert [p.name for p in (tmp_path / "state" / "running").iterdir()] == [record_name(hung_id)]
        proxy.faults.clear()  # the server is back
        proc = _daemon_process(tmp_path, proxy.url, codex_bin, codex_home)
        done = await finished(cp, proxy, done_id)
        hung = await finished(cp, proxy, hung_id)
        assert done["result"]["status"] == "completed"
        assert done["result"]["resultText"] == "first result"
        assert hung["result"]["status"] == "failed"
        assert hung["result"]["error"]["code"] == "agent_restarted"
        assert len(scripted_model.requests) == model_requests  # nothing was run again
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, EXIT_TIMEOUT_S) == 0
        logs = (tmp_path / "daemon.log").read_text() + (tmp_path / "state" / "logs" / "boss-agent.log").read_text()
        assert identity.token not in logs and "canary-prompt-7731" not in logs
    finally:
        if proc.poll() is None:
            _kill_hard(proc)
        scripted_model.release()


@pytest.mark.parametrize("decision", ["accept", "decline"])
async def test_a_codex_approval_is_decided_through_the_control_planes_local_endpoint(
    tmp_path: Path, plane: tuple[ControlPlane, FaultProxy], codex_bin: str, codex_home: Path,
    workdir: Path, scripted_model: sm.ScriptedModel, decision: str,
) -> None:
    cp, proxy = plane
    config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, codex__bin=codex_bin)
    await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(), policy=FAST)
    scripted_model.enqueue(
        sm.turn(sm.shell_call("echo approved-run", sandbox_permissions="require_escalated",
                              justification="the test asks before it runs a command")),
        sm.turn(sm.message("all done")))
    daemon = Daemon(config, codex_home=codex_home, env={"CODEX_HOME": str(codex_home)},
                    retry_policy=FAST, claim_wait_ms=300, handle_signals=False)
    ready = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        job = tg.create_task(daemon.run(ready))
        await asyncio.wait_for(ready.wait(), 60)
        task_id = cp.submit_task("run a command", workdir=str(workdir),
                                 approvalPolicy="on-request", sandbox="workspace-write")
        await proxy.wait_for(lambda: cp.task(task_id)["approvals"], timeout=60)
        approval = cp.task(task_id)["approvals"][0]
        async with httpx.AsyncClient(base_url=cp.url) as local:
            answer = await local.post(f"/api/local/approvals/{task_id}/{approval['approvalId']}",
                                      json={"decision": decision},
                                      headers={"Authorization": f"Bearer {cp.secret}"})
            assert answer.status_code == 200, answer.text
        view = await finished(cp, proxy, task_id)
        daemon.request_stop()
        await asyncio.wait_for(job, WAIT_S)
    assert view["result"]["status"] == "completed" and view["result"]["resultText"] == "all done"
    assert len(view["approvals"]) == 1 and approval["kind"] == "command"
    assert approval["summary"] == "Run echo (outside the sandbox)"  # the program, never its arguments
    card_approvals = view["executionProgress"]["approvals"]
    assert [a["status"] for a in card_approvals] == ["accepted" if decision == "accept" else "declined"]
    assert len(proxy.requests("/approvals")) == 1  # one codex request, one approval
