"""Computer use with the app-server unavailable: real ``codex exec`` carrying the real
cua-driver MCP server on a real Xvfb desktop, and only where exec may run unasked
(approval policy ``never``; under it codex itself refuses the driver's destructive tools)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from boss_agent.tasks import Task
from tests.support.desktop import (
    click_what_the_screenshot_showed,
    mcp_call,
    tool_search,
    press_target,
)
from tests.support.config import make_config
from tests.support.runner import Sink, missing_app_server

pytestmark = [pytest.mark.codex, pytest.mark.desktop]
EXEC_ONLY = {"codex.approval_policy": "never", "codex.max_approval_policy": "never"}


async def test_without_an_app_server_a_computer_use_task_runs_in_codex_exec_with_the_cua_driver(
        desktop: dict[str, str], tmp_path: Path, codex_bin: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", desktop["DISPLAY"])  # codex exec (and so the MCP server) inherit it
    async with press_target(desktop) as target:
        with sm.ScriptedModel(responder=click_what_the_screenshot_showed) as model:
            home = sm.write_codex_home(tmp_path / "codex-home", model.base_url)
            model.enqueue(sm.turn(tool_search("desktop screenshot click window")))
            model.enqueue(sm.turn(mcp_call("get_desktop_state", {})))
            config = make_config(tmp_path, codex_bin, **EXEC_ONLY)
            async with missing_app_server(tmp_path, codex_bin) as app:
                result = await Runner(config, app, codex_home=home).run(
                    Task("t-cua-exec", "press the button", intent="computer_use"), Sink(), asyncio.Event())
            requests = list(model.requests)
        assert result.status == "completed", result
        assert (result.backend, result.fallback_from) == ("exec", "app_server")
        assert result.result_text == "I pressed the button."  # the script's closing line, whatever happened
        assert all(r.headers.get("originator") == "codex_exec" for r in requests)
        screenshot = next(r.tool_outputs()["call_get_desktop_state"] for r in requests
                          if "call_get_desktop_state" in r.tool_outputs())
        assert '"screenshot_width":1024' in screenshot  # exec ran the driver's screenshot tool
        # The owner's `never` holds inside exec too: codex runs the driver's read-only tools
        # but refuses its destructive ones (a click) rather than approving them unasked.
        click = next(r.tool_outputs()["call_click"] for r in requests if "call_click" in r.tool_outputs())
        assert "requires approval, but approval policy is never" in click
        assert target.poll() is None  # the button was not pressed
        card = result.execution_progress
        assert card["backend"] == "exec"
        assert any(w["kind"] == "fallback" and "CUA driver" in w["message"] for w in card["warnings"])


async def test_without_an_app_server_computer_use_that_could_ask_fails_approval_unavailable_unrun(
        desktop: dict[str, str], tmp_path: Path, codex_bin: str, codex_home: Path,
        scripted_model: sm.ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", desktop["DISPLAY"])  # the driver is healthy: only the rule stops it
    config = make_config(tmp_path, codex_bin)  # the default policy: on-request
    async with missing_app_server(tmp_path, codex_bin) as app:
        result = await Runner(config, app, codex_home=codex_home).run(
            Task("t-cua-ask", "press the button", intent="computer_use"), Sink(), asyncio.Event())
    assert result.status == "failed" and result.error_code == "approval_unavailable", result
    assert result.backend is None
    assert scripted_model.requests == []  # nothing ran
    assert not (codex_home / "sessions").exists()  # codex exec never started a thread
