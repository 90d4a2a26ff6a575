"""Computer use: Codex's own, or the CUA driver attached to the thread as an MCP server.

``cua-driver`` (PyPI ``cua-driver``, pinned in the ``cua`` extra) bundles a native
executable whose ``mcp`` subcommand is a stdio MCP server with screenshot, click
and keyboard tools. The runner checks its health (``cua-driver doctor`` must see
a display server) before choosing it, and starts the Codex thread with it in the
thread's ``config.mcp_servers`` — telemetry off, only ``DISPLAY`` passed through,
only the desktop tools enabled. Without an app-server, ``exec_overrides`` gives
``codex exec`` the same server as ``-c`` overrides.

Codex's own computer use is a plugin: ``codex_computer_use_plugin`` finds it and
``plugin_start_error`` says whether its MCP servers start, before any thread exists.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from boss_agent.errors import AppServerError
from boss_agent.runner.helper_cmd import run_probe

if TYPE_CHECKING:
    from boss_agent.appserver.contract import Client

logger = logging.getLogger(__name__)

MCP_SERVER_NAME = "cua"
DOCTOR_TIMEOUT_S = 20.0  # doctor probes X11 and D-Bus; both answer (or fail) in well under a second
VERSION_TIMEOUT_S = 10.0
TELEMETRY_ENV = {"CUA_DRIVER_RS_TELEMETRY_ENABLED": "0"}
ENABLED_TOOLS = (
    "get_desktop_state", "get_screen_size", "list_windows", "get_window_state", "get_cursor_position",
    "click", "double_click", "right_click", "move_cursor", "scroll", "drag", "type_text", "press_key",
    "hotkey", "launch_app", "list_apps", "zoom",
)
MAX_STATUS_PAGES = 20  # a device has a handful of MCP servers; this bounds a server that pages forever
_VERSION = re.compile(r"(\d+\.\d+\.\d+)")
_CODEX_CU = re.compile(r"computer[_-]?use", re.IGNORECASE)


@dataclass(frozen=True)
class DriverHealth:
    available: bool
    version: str | None
    reason: str | None = None


def find_driver(configured: str | None = None) -> str | None:
    """The driver executable: configured, else the package's bundled binary, else PATH."""
    if configured:
        return shutil.which(os.path.expanduser(configured))
    spec = importlib.util.find_spec("cua_driver")
    for location in (spec.submodule_search_locations or []) if spec else []:
        bundled = Path(location) / "bin" / "cua-driver"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)
    return shutil.which("cua-driver")


def driver_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DISPLAY", "XAUTHORITY",
                                                         "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR")}
    return {**env, **TELEMETRY_ENV}


async def driver_health(binary: str | None) -> DriverHealth:
    """Healthy when the executable runs and ``doctor`` reports a usable display server."""
    if not binary:
        return DriverHealth(False, None, "cua-driver is not installed")
    try:
        code, out = await run_probe([binary, "--version"], timeout=VERSION_TIMEOUT_S, env=driver_env(),
                                    merge_stderr=True)
        match = _VERSION.search(out)
        if code != 0 or not match:
            return DriverHealth(False, None, "cua-driver does not run here")
        code, report = await run_probe([binary, "doctor"], timeout=DOCTOR_TIMEOUT_S, env=driver_env(),
                                       merge_stderr=True)
    except OSError:
        return DriverHealth(False, None, "cua-driver does not run here")
    display_ok = any(line.startswith("[ok") and "display server" in line for line in report.splitlines())
    if code != 0 or not display_ok:
        return DriverHealth(False, match.group(1), "no display server for cua-driver")
    return DriverHealth(True, match.group(1))


def mcp_config(binary: str) -> dict[str, Any]:
    """The thread/start ``config`` that attaches the driver as an MCP server."""
    return {f"mcp_servers.{MCP_SERVER_NAME}": {
        "command": binary,
        "args": ["mcp"],
        "env": dict(TELEMETRY_ENV),
        "env_vars": ["DISPLAY", "XAUTHORITY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR"],
        "enabled_tools": list(ENABLED_TOOLS),
    }}


def exec_overrides(binary: str) -> list[str]:
    """The same MCP server as ``mcp_config``, as ``codex exec -c key=value`` overrides.

    Each value is TOML (codex parses ``-c`` values as TOML); JSON strings are valid
    TOML basic strings, so ``json.dumps`` quotes them.
    """
    ((key, server),) = mcp_config(binary).items()
    return [f"{key}.{field}={_toml(value)}" for field, value in server.items()]


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


async def codex_has_computer_use(client: Client) -> bool:
    """Does the installed Codex really offer computer use itself?"""
    return await codex_computer_use_plugin(client) is not None


async def codex_computer_use_plugin(client: Client) -> str | None:
    """The id of the computer-use plugin the installed Codex offers, or None.

    The ``computer_use`` feature flag alone is not enough: 0.171 reports it enabled by
    default on Linux, yet no desktop tool reaches the model until a computer-use
    plugin is installed. So: the feature enabled *and* such a plugin installed.
    """
    try:
        features = await client.call("experimentalFeature/list", {})
        plugins = await client.call("plugin/list", {})
    except AppServerError:
        return None
    enabled = any(isinstance(f, dict) and _CODEX_CU.search(str(f.get("name"))) and f.get("enabled")
                  for f in (features or {}).get("data") or [])
    if not enabled:
        return None
    for market in (plugins or {}).get("marketplaces") or []:
        for plugin in (market or {}).get("plugins") or []:
            plugin = plugin or {}
            plugin_id = str(plugin.get("id") or plugin.get("name"))
            if _CODEX_CU.search(plugin_id) and plugin.get("installed") and plugin.get("enabled", True):
                return plugin_id
    return None


async def plugin_start_error(client: Client, plugin_id: str) -> str | None:
    """Why the plugin's MCP servers fail to start, or None when they start (or it has none).

    ``mcpServerStatus/list`` starts every configured server (plugins' included) and
    reports a server that failed its handshake with ``toolsError``; no thread is
    created, so nothing of the task has run yet.
    """
    cursor: str | None = None
    for _ in range(MAX_STATUS_PAGES):
        try:
            listed = await client.call("mcpServerStatus/list", {"cursor": cursor} if cursor else {})
        except AppServerError as exc:
            return f"its MCP status could not be read ({exc.__class__.__name__})"
        for server in (listed or {}).get("data") or []:
            server = server if isinstance(server, dict) else {}
            if server.get("pluginId") == plugin_id and server.get("toolsError"):
                return f"its MCP server {server.get('name')} failed to start: {server['toolsError']}"
        cursor = (listed or {}).get("nextCursor")
        if not isinstance(cursor, str):
            return None
    return None
