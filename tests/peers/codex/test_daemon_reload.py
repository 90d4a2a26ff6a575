"""SIGHUP reload: live keys apply to the next task, the rest waits for a restart."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.config import load_config
from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.daemon.reload import plan_reload
from tests.support.daemon import paired_daemon

TASK_TIMEOUT_S = 60


def write_config(path: Path, *, server: str, state: Path, workspace: Path, codex_bin: str,
                 timeout_s: int = 600) -> Path:
    path.write_text(
        f'state_dir = "{state}"\nworkspaces = ["{workspace}"]\ngrace_period_s = 0\n'
        f'[server]\nurl = "{server}"\n'
        f'[codex]\nbin = "{codex_bin}"\napproval_timeout_s = {timeout_s}\n')
    return path


def test_a_reload_applies_live_keys_and_names_the_ones_that_need_a_restart(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    path = tmp_path / "config.toml"
    running = load_config(write_config(path, server="http://127.0.0.1:1", state=tmp_path / "s",
                                       workspace=a, codex_bin="codex"), environ={})
    loaded = load_config(write_config(path, server="http://127.0.0.1:2", state=tmp_path / "s",
                                      workspace=b, codex_bin="codex", timeout_s=5), environ={})
    result = plan_reload(running, loaded)
    assert set(result.applied) == {"workspaces", "codex.approval_timeout_s"}
    assert result.needs_restart == ("server.url",)
    assert result.config.workspaces == (b.resolve(),)
    assert result.config.codex.approval_timeout_s == 5
    assert result.config.server_url == "http://127.0.0.1:1"  # only a restart reconnects


@pytest.mark.codex
async def test_after_a_reload_a_task_outside_the_new_workspaces_is_refused(
    tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp:
        path = write_config(tmp_path / "config.toml", server=cp.url, state=tmp_path / "state",
                            workspace=first, codex_bin=codex_bin)
        config = load_config(path, environ={})
        scripted_model.enqueue(sm.text_reply("in the first workspace"))
        async with paired_daemon(config, cp.url, cp.create_pairing_code(), codex_home) as (daemon, _):
            before = cp.submit_task("go", workdir=str(first))
            view = await cp.wait_task(before, lambda t: t["status"] == "completed", TASK_TIMEOUT_S)
            assert view["result"]["resultText"] == "in the first workspace"

            write_config(path, server=cp.url, state=tmp_path / "state", workspace=second,
                         codex_bin=codex_bin)
            with caplog.at_level(logging.INFO, logger="boss_agent"):
                daemon.shutdown.reload.set()  # what SIGHUP does (tests/test_lifecycle_*)
                await asyncio.wait_for(daemon.reloaded.wait(), TASK_TIMEOUT_S)
            after = cp.submit_task("go again", workdir=str(first))
            view = await cp.wait_task(after, lambda t: t["status"] == "failed", TASK_TIMEOUT_S)
            assert view["result"]["error"]["code"] == "workdir_not_allowed"
    assert len(scripted_model.requests) == 1  # the refused task never reached codex
    assert "applied to new tasks: workspaces" in caplog.text
    assert str(second) not in caplog.text  # names only, never values


def test_the_workdir_settings_apply_live_on_reload(tmp_path: Path) -> None:
    running = load_config(environ={}, overrides={"state_dir": str(tmp_path / "s")})
    loaded = load_config(environ={"BOSS_DEFAULT_WORKDIR": str(tmp_path)}, overrides={
        "state_dir": str(tmp_path / "s"), "projects": {"app": str(tmp_path / "app")}})
    result = plan_reload(running, loaded)
    assert set(result.applied) == {"default_workdir", "projects"} and result.needs_restart == ()
    assert result.config.default_workdir == tmp_path
    assert result.config.projects == {"app": tmp_path / "app"}


def test_a_reload_of_a_broken_file_keeps_the_running_configuration(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path = write_config(tmp_path / "config.toml", server="http://127.0.0.1:1", state=tmp_path / "s",
                        workspace=tmp_path, codex_bin="codex")
    daemon = Daemon(load_config(path, environ={}), handle_signals=False)
    before = daemon.config
    path.write_text("max_concurrent_tasks = 'lots'\n")
    with caplog.at_level(logging.WARNING, logger="boss_agent"):
        daemon.reload_config()
    assert daemon.config is before
    assert "reload failed" in caplog.text and "max_concurrent_tasks" in caplog.text
