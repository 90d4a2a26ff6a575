"""The desktop the computer-use tests drive: processes on the test's X display, the
scripted model's side of a CUA turn (find the tools, look, click) and a window to click.

The display itself (Xvfb + openbox) is the ``desktop`` fixture of tests/peers/desktop.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import AsyncIterator
from typing import Any

from boss_agent.demo import scripted_model as sm
from tests.support.waits import eventually

PRESS_EXIT_CODE = 7  # xmessage -buttons Press:7 exits with 7 when Press is clicked
WM_MANAGE_S = 10.0  # openbox frames a new window in milliseconds; a loaded CI box is slower
BUTTON_IN_WINDOW = (25, 38)  # the Press button's centre in xmessage's window (fixed font, no WM scaling)


def spawn(argv: list[str], env: dict[str, str], **kwargs: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)


def wm_running(env: dict[str, str]) -> bool:
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


def click_what_the_screenshot_showed(request: sm.RecordedRequest) -> sm.Response:
    """The scripted model's 'vision': read the window list get_desktop_state returned, click Press."""
    outputs = request.tool_outputs()
    state = outputs.get("call_get_desktop_state")
    if state is None or "call_click" in outputs:
        return sm.text_reply("I pressed the button.")
    report = json.loads(state[state.index("{"):])
    (window,) = [w for w in report["windows"] if w["app_name"] == "Xmessage"]
    return sm.turn(mcp_call("click", {
        "pid": window["pid"], "window_id": window["window_id"], "coordinate_frame": "desktop",
        "x": window["x"] + BUTTON_IN_WINDOW[0], "y": window["y"] + BUTTON_IN_WINDOW[1]}))


def mcp_call(name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    # Deferred MCP tools are called in their namespace (what tool_search returned).
    return [{"type": "response.output_item.done", "item": {
        "type": "function_call", "id": f"fc_{name}", "call_id": f"call_{name}", "namespace": "mcp__cua",
        "name": name, "arguments": json.dumps(arguments)}}]


def tool_search(query: str) -> list[dict[str, Any]]:
    return [{"type": "response.output_item.done", "item": {
        "type": "tool_search_call", "call_id": "search_1", "execution": "client",
        "arguments": {"query": query, "limit": 8}}}]


@contextlib.asynccontextmanager
async def press_target(desktop: dict[str, str]) -> AsyncIterator[subprocess.Popen[bytes]]:
    """An xmessage window with a Press button, framed by the WM; killed on the way out."""
    await eventually(lambda: wm_running(desktop))  # a window mapped before the WM is up stays unframed
    target = spawn(["xmessage", "-geometry", "+200+200", "-buttons", f"Press:{PRESS_EXIT_CODE}",
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
