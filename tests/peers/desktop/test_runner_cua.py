"""Computer use through the CUA driver: a real Xvfb desktop, the real cua-driver MCP
server attached to a real codex thread, and the scripted model taking a screenshot and
clicking a real X11 button (xmessage exits with the button's code when it is pressed)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.appserver.client import AppServer
from boss_agent.runner import Runner, cua
from boss_agent.tasks import Task
from tests.support.config import make_config
from tests.support.desktop import (
    PRESS_EXIT_CODE,
    click_what_the_screenshot_showed,
    mcp_call,
    press_target,
    tool_search,
)
from tests.support.runner import Sink

pytestmark = [
    pytest.mark.codex, pytest.mark.desktop,
]


async def test_a_computer_use_task_screenshots_and_clicks_through_the_cua_driver(
        desktop: dict[str, str], tmp_path: Path, codex_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", desktop["DISPLAY"])  # the app-server (and so the MCP server) inherit it
    async with press_target(desktop) as target:
        with sm.ScriptedModel(responder=click_what_the_screenshot_showed) as model:
            home = sm.write_codex_home(tmp_path / "codex-home", model.base_url)
            model.enqueue(sm.turn(tool_search("desktop screenshot click window")))
            model.enqueue(sm.turn(mcp_call("get_desktop_state", {})))
            config = make_config(tmp_path, codex_bin)
            sink = Sink(_accept)
            async with AppServer.from_config(config, codex_home=home) as app:
                runner = Runner(config, app, codex_home=home)
                caps = await runner.refresh_capabilities()
                assert caps["computerUse"]["cuaDriver"]["available"] is True
                assert caps["computerUse"]["codex"] is False
                result = await runner.run(Task("t-cua", "press the button", intent="computer_use"), sink,
                                          asyncio.Event())
            requests = list(model.requests)
        assert result.status == "completed", result
        assert (result.backend, result.fallback_from) == ("cua", "app_server")
        assert result.result_text == "I pressed the button."
        assert await asyncio.to_thread(target.wait, 30) == PRESS_EXIT_CODE  # the click really landed
        (asked,) = sink.approvals  # the driver's click is a destructive MCP tool: one approval
        assert asked.available_decisions == ("accept", "decline", "cancel")
        assert (asked.kind, asked.summary, asked.risk) == ("tool", "Use the cua tool click", "high")
        assert asked.detail is not None and (asked.detail["server"], asked.detail["tool"]) == ("cua", "click")
        assert asked.detail["arguments"], asked.detail  # where it clicks: shown to the person
        screenshot = next(r.tool_outputs()["call_get_desktop_state"] for r in requests
                          if "call_get_desktop_state" in r.tool_outputs())
        assert '"screenshot_width":1024' in screenshot  # codex ran the driver's screenshot tool
        card = result.execution_progress
        assert {"name": "cua", "status": "ready", "error": None} in card["mcpServers"]
        assert card["backend"] == "cua"


async def _accept(_request: Any) -> str:
    return "accept"


async def test_computer_use_without_a_display_fails_cleanly_and_runs_nothing(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    config = make_config(tmp_path, codex_bin)
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        result = await Runner(config, app, codex_home=codex_home).run(
            Task("t-cua-none", "click", intent="computer_use"), Sink(), asyncio.Event())
    assert result.status == "failed" and result.error_code == "computer_use_unavailable"
    assert "display" in (result.error_message or "")
    assert scripted_model.requests == []


def test_the_desktop_tools_are_installed() -> None:
    assert all(shutil.which(tool) for tool in ("Xvfb", "openbox", "xmessage", "xwininfo", "xprop"))
    assert cua.find_driver() is not None
