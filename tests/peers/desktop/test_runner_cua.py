"""Computer use through the CUA driver: a real Xvfb desktop, the real cua-driver MCP
server attached to a real codex thread, and the scripted model taking a screenshot and
clicking a real X11 button (xmessage exits with the button's code when it is pressed)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.appserver.client import AppServer
from boss_agent.runner import Runner, cua
from boss_agent.tasks import Task
from tests.support.config import make_config
from tests.support.runner import Sink
from tests.support.waits import eventually

pytestmark = [
    pytest.mark.codex, pytest.mark.desktop,
]
XVFB_READY_S = 20.0  # Xvfb writes its display number to -displayfd once it accepts clients
PRESS_EXIT_CODE = 7  # xmessage -buttons Press:7 exits with 7 when Press is clicked
WM_MANAGE_S = 10.0  # openbox frames a new window in milliseconds; a loaded CI box is slower
BUTTON_IN_WINDOW = (25, 38)  # the Press button's centre in xmessage's window (fixed font, no WM scaling)


def _spawn(argv: list[str], env: dict[str, str], **kwargs: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)


@pytest.fixture
def desktop() -> Iterator[dict[str, str]]:
    """Xvfb + openbox on a free display; yields the environment to reach it."""
    read, write = os.pipe()
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                            pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    procs = [xvfb]
    try:
        with os.fdopen(read) as pipe:
            number = pipe.readline().strip()  # blocks until Xvfb is ready (or exits: empty)
        assert number, "Xvfb did not start"
        env = {**os.environ, "DISPLAY": f":{number}"}
        procs.append(_spawn(["openbox"], env, stdout=subprocess.DEVNULL))
        yield env
    finally:
        for proc in reversed(procs):
            proc.kill()
            proc.wait(timeout=10)


def _wm_running(env: dict[str, str]) -> bool:
    root = subprocess.run(["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"], env=env, capture_output=True,
                          text=True, check=False).stdout
    return "window id" in root


def _visible_window(env: dict[str, str]) -> list[str]:
    """Ids of mapped top-level xmessage windows (xwininfo: xdotool search trips over
    windows that vanish mid-walk)."""
    tree = subprocess.run(["xwininfo", "-root", "-tree"], env=env, capture_output=True, text=True,
                          check=False).stdout
    ids = [line.split()[0] for line in tree.splitlines() if '("xmessage" "Xmessage")' in line]
    return [w for w in ids if "IsViewable" in subprocess.run(
        ["xwininfo", "-id", w], env=env, capture_output=True, text=True, check=False).stdout]


def _managed_window(env: dict[str, str]) -> bool:
    """True once the window manager manages the xmessage window (framed: it stops moving)."""
    for window in _visible_window(env):
        extents = subprocess.run(["xprop", "-id", window, "_NET_FRAME_EXTENTS"], env=env,
                                 capture_output=True, text=True, check=False).stdout
        if "=" in extents:
            return True
    return False


def _click_what_the_screenshot_showed(request: sm.RecordedRequest) -> sm.Response:
    """The scripted model's 'vision': read the window list get_desktop_state returned, click Press."""
    outputs = request.tool_outputs()
    state = outputs.get("call_get_desktop_state")
    if state is None or "call_click" in outputs:
        return sm.text_reply("I pressed the button.")
    report = json.loads(state[state.index("{"):])
    (window,) = [w for w in report["windows"] if w["app_name"] == "Xmessage"]
    return sm.turn(_mcp_call("click", {
        "pid": window["pid"], "window_id": window["window_id"], "coordinate_frame": "desktop",
        "x": window["x"] + BUTTON_IN_WINDOW[0], "y": window["y"] + BUTTON_IN_WINDOW[1]}))


def _mcp_call(name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    # Deferred MCP tools are called in their namespace (what tool_search returned).
    return [{"type": "response.output_item.done", "item": {
        "type": "function_call", "id": f"fc_{name}", "call_id": f"call_{name}", "namespace": "mcp__cua",
        "name": name, "arguments": json.dumps(arguments)}}]


def _tool_search(query: str) -> list[dict[str, Any]]:
    return [{"type": "response.output_item.done", "item": {
        "type": "tool_search_call", "call_id": "search_1", "execution": "client",
        "arguments": {"query": query, "limit": 8}}}]


@contextlib.asynccontextmanager
async def press_target(desktop: dict[str, str]) -> AsyncIterator[subprocess.Popen[bytes]]:
    """An xmessage window with a Press button, framed by the WM; killed on the way out."""
    await eventually(lambda: _wm_running(desktop))  # a window mapped before the WM is up stays unframed
    target = _spawn(["xmessage", "-geometry", "+200+200", "-buttons", f"Press:{PRESS_EXIT_CODE}",
                     "Boss click target"], desktop, stdout=subprocess.DEVNULL)
    try:
        await eventually(lambda: _visible_window(desktop))
        try:  # once framed it no longer moves; the model clicks where the screenshot saw it
            await eventually(lambda: _managed_window(desktop), timeout=WM_MANAGE_S)
        except TimeoutError:
            pass  # not framed: then nothing moves it either
        yield target
    finally:
        if target.poll() is None:
            target.kill()
        target.wait(timeout=10)


async def test_a_computer_use_task_screenshots_and_clicks_through_the_cua_driver(
        desktop: dict[str, str], tmp_path: Path, codex_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", desktop["DISPLAY"])  # the app-server (and so the MCP server) inherit it
    async with press_target(desktop) as target:
        with sm.ScriptedModel(responder=_click_what_the_screenshot_showed) as model:
            home = sm.write_codex_home(tmp_path / "codex-home", model.base_url)
            model.enqueue(sm.turn(_tool_search("desktop screenshot click window")))
            model.enqueue(sm.turn(_mcp_call("get_desktop_state", {})))
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
