"""Computer use that installs and works: the service unit carries the desktop session's
display variables, `doctor` checks the desktop (the real cua-driver against a real
Xvfb), and a computer-use task on real codex reads the screen, types into a real window
and checks on the screen that it worked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import asyncio
import json
import subprocess
import sys
from typing import Any

from boss_agent.appserver.client import AppServer
from boss_agent.config import load_config
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from boss_agent.service.manager import Host
from boss_agent.service.plan import plan_install
from boss_agent.tasks import Task
from tests.support.cli import isolated, run_doctor
from tests.support.config import make_config
from tests.support.runner import Sink
from tests.support.desktop import spawn, tool_search, wm_running
from tests.support.waits import eventually

DESKTOP_VARS = {"DISPLAY": ":7", "XAUTHORITY": "/run/user/1234/gdm/Xauthority", "WAYLAND_DISPLAY": "wayland-0"}


def _unit(tmp_path: Path, environ: dict[str, str], platform: str = "linux") -> str:
    config_file = tmp_path / "config.toml"
    config_file.write_text(f'state_dir = "{tmp_path / "state"}"\n')
    config = load_config(config_file, environ={})
    host = Host(platform, tmp_path / "home", 1234, "tester",
                {"PATH": os.environ["PATH"], "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **environ})
    plan = plan_install(config, system=False, host=host, linger_probe=lambda _user: True)
    return plan.files[0].content


def test_service_install_from_a_desktop_session_records_its_display_variables(tmp_path: Path) -> None:
    unit = _unit(tmp_path, DESKTOP_VARS)
    for name, value in DESKTOP_VARS.items():
        assert f"Environment={name}={value}" in unit, unit
    headless = _unit(tmp_path, {})
    assert "DISPLAY" not in headless


@pytest.mark.desktop
async def test_doctor_shows_the_cua_driver_healthy_on_a_real_display(
        tmp_path: Path, desktop: dict[str, str]) -> None:
    env = isolated(tmp_path, BOSS_CODEX_BIN=str(tmp_path / "no-codex"), DISPLAY=desktop["DISPLAY"])
    _code, checks, _out = await run_doctor(env)
    check = checks["desktop"]
    assert check["result"] == "ok", check
    assert "cua-driver" in check["detail"] and desktop["DISPLAY"] in check["detail"]


async def test_doctor_says_when_there_is_no_display_or_the_service_cannot_see_it(
        tmp_path: Path) -> None:
    env = {k: v for k, v in isolated(tmp_path, BOSS_CODEX_BIN=str(tmp_path / "no-codex")).items()
           if k not in DESKTOP_VARS}
    _code, checks, _out = await run_doctor(env)
    assert checks["desktop"]["result"] == "warn" and "no display" in checks["desktop"]["detail"]
    assert "desktop session" in checks["desktop"]["fix"]


@pytest.mark.desktop
async def test_doctor_warns_when_the_installed_service_has_no_display(
        tmp_path: Path, desktop: dict[str, str]) -> None:
    env = isolated(tmp_path, BOSS_CODEX_BIN=str(tmp_path / "no-codex"), DISPLAY=desktop["DISPLAY"])
    unit = tmp_path / "home" / ".config" / "systemd" / "user" / "boss-agent.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(_unit(tmp_path, {}))  # installed from a shell without a desktop
    _code, checks, _out = await run_doctor(env)
    check = checks["desktop"]
    assert check["result"] == "warn" and "service" in check["detail"], check
    assert "boss-agent service install" in check["fix"]


TYPED = "hello from boss"
TARGET_TITLE = "Boss type target"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# A one-field Tk window: Return writes the field to argv[1] and shows it in the title,
# so both a file (for the test) and the screen (for the model) tell what was typed.
TARGET_APP = f"""
import sys, tkinter as tk
root = tk.Tk(className="BossTypeTarget")
root.title({TARGET_TITLE!r})
root.geometry("320x60+200+200")
entry = tk.Entry(root)
entry.pack(fill="both", expand=True)
def done(_event):
    open(sys.argv[1], "w").write(entry.get())
    root.title("done: " + entry.get())
entry.bind("<Return>", done)
root.mainloop()
"""


def _windows(output: str) -> list[dict[str, Any]]:
    """The windows a get_desktop_state result lists (codex passes its JSON on)."""
    return json.loads(output[output.index("{"):])["windows"] if "{" in output else []


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "response.output_item.done", "item": {
        "type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "namespace": "mcp__cua",
        "name": name, "arguments": json.dumps(arguments)}}]


def _type_and_verify(shots: Path) -> sm.Responder:
    """The scripted model: look, type into the window it saw, press Return, look again, judge."""
    def respond(request: sm.RecordedRequest) -> sm.Response:
        seen = request.tool_outputs()
        if "call_verify" in seen:
            titles = [w["title"] for w in _windows(seen["call_verify"])]
            verdict = "verified" if f"done: {TYPED}" in titles else "NOT verified"
            return sm.text_reply(f"Typed it and {verdict} on the screen.")
        if "call_press_key" in seen:
            return sm.turn(_call("call_verify", "get_desktop_state",
                                 {"screenshot_out_file": str(shots / "after.png")}))
        found = [w for w in _windows(seen.get("call_look", "")) if w["title"] == TARGET_TITLE]
        if not found:
            return sm.text_reply("I could not find the window.")
        pid, window_id, x, y = (found[0][key] for key in ("pid", "window_id", "x", "y"))
        if "call_type_text" in seen:
            return sm.turn(_call("call_press_key", "press_key", {
                "pid": pid, "window_id": window_id, "key": "return", "delivery_mode": "foreground"}))
        return sm.turn(_call("call_type_text", "type_text", {
            "pid": pid, "window_id": window_id, "coordinate_frame": "desktop", "x": x + 40, "y": y + 30,
            "text": TYPED, "delivery_mode": "foreground"}))
    return respond


async def _accept(_request: Any) -> str:
    return "accept"


@pytest.mark.codex
@pytest.mark.desktop
async def test_a_computer_use_task_reads_the_screen_types_into_a_window_and_verifies_it(
        desktop: dict[str, str], tmp_path: Path, codex_bin: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", desktop["DISPLAY"])  # the app-server (and so the MCP server) inherit it
    await eventually(lambda: wm_running(desktop))
    typed_file, shots = tmp_path / "typed.txt", tmp_path / "shots"
    shots.mkdir()
    target = spawn([sys.executable, "-c", TARGET_APP, str(typed_file)], desktop, stdout=subprocess.DEVNULL)
    try:
        await eventually(lambda: TARGET_TITLE in subprocess.run(
            ["xwininfo", "-root", "-tree"], env=desktop, capture_output=True, text=True, check=False).stdout)
        with sm.ScriptedModel(responder=_type_and_verify(shots)) as model:
            home = sm.write_codex_home(tmp_path / "codex-home", model.base_url)
            model.enqueue(sm.turn(tool_search("desktop screenshot type text press key")))
            model.enqueue(sm.turn(_call("call_look", "get_desktop_state",
                                        {"screenshot_out_file": str(shots / "before.png")})))
            config = make_config(tmp_path, codex_bin)
            sink = Sink(_accept)
            async with AppServer.from_config(config, codex_home=home) as app:
                result = await Runner(config, app, codex_home=home).run(
                    Task("t-cua-type", "type a greeting into the window", intent="computer_use"), sink,
                    asyncio.Event())
    finally:
        target.kill()
        target.wait(timeout=10)
    assert result.status == "completed", result
    assert result.backend == "cua"
    assert result.result_text == "Typed it and verified on the screen."
    assert typed_file.read_text() == TYPED  # the keys reached the real window
    for shot in ("before.png", "after.png"):  # the screen the model read, twice
        assert (shots / shot).read_bytes().startswith(PNG_MAGIC)
    assert (shots / "before.png").read_bytes() != (shots / "after.png").read_bytes()
    assert [a.summary for a in sink.approvals if "type_text" in a.summary or "press_key" in a.summary]
