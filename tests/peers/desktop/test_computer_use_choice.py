"""Codex's own computer use first, the CUA driver when it is absent or fails to start.

Real codex 0.171 ships no computer-use plugin, so these tests install one with codex's
own CLI (``codex plugin marketplace add`` + ``codex plugin add``) from a local
marketplace: a plugin named ``computer-use`` whose MCP server is either a command that
fails its handshake (present but failing) or the real cua-driver (present and working).
The absent case is ``test_runner_cua``'s main test. One test also replaces codex's
answer to the first ``turn/start`` with a refusal (see ``RefusesFirstTurn``).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from boss_agent.errors import ServerOverloaded
from boss_agent.runner import Runner, cua
from boss_agent.tasks import Task
from tests.support.config import make_config
from tests.support.runner import Sink

pytestmark = [pytest.mark.codex, pytest.mark.desktop]
PLUGIN_CLI_TIMEOUT_S = 60.0  # codex plugin add copies a few files; this bounds a wedged CLI
MARKETPLACE = "boss-test"


def install_computer_use_plugin(tmp: Path, codex_bin: str, home: Path, command: str, args: list[str]) -> None:
    """A local marketplace with a ``computer-use`` plugin, installed into ``home`` by codex."""
    root = tmp / "marketplace"
    plugin = root / "plugins" / "computer-use"
    (root / ".agents" / "plugins").mkdir(parents=True)
    (plugin / ".codex-plugin").mkdir(parents=True)
    (root / ".agents" / "plugins" / "marketplace.json").write_text(json.dumps({
        "name": MARKETPLACE, "plugins": [{
            "name": "computer-use", "source": {"source": "local", "path": "./plugins/computer-use"},
            "policy": {"installation": "AVAILABLE"}, "category": "Productivity"}]}))
    (plugin / ".codex-plugin" / "plugin.json").write_text(json.dumps({
        "name": "computer-use", "version": "0.0.1", "description": "desktop control for the tests",
        "mcpServers": {"computer-use": {"command": command, "args": args, "env": dict(cua.TELEMETRY_ENV)}}}))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "CODEX_HOME": str(home)}
    for argv in (["plugin", "marketplace", "add", "--", str(root)],
                 ["plugin", "add", "--", f"computer-use@{MARKETPLACE}"]):
        subprocess.run([codex_bin, *argv], env=env, check=True, capture_output=True,
                       timeout=PLUGIN_CLI_TIMEOUT_S)


@pytest.fixture
def driver_plugin(desktop: dict[str, str], tmp_path: Path, codex_bin: str, codex_home: Path,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A computer-use plugin that starts: its MCP server is the real cua-driver."""
    monkeypatch.setenv("DISPLAY", desktop["DISPLAY"])
    driver = cua.find_driver()
    assert driver is not None
    install_computer_use_plugin(tmp_path, codex_bin, codex_home, driver, ["mcp"])


async def test_codex_computer_use_that_fails_to_start_falls_back_to_the_cua_driver_once(
        desktop: dict[str, str], tmp_path: Path, codex_bin: str, codex_home: Path,
        scripted_model: sm.ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", desktop["DISPLAY"])
    install_computer_use_plugin(tmp_path, codex_bin, codex_home, "/bin/false", [])
    scripted_model.enqueue(sm.text_reply("done through the driver"))
    config = make_config(tmp_path, codex_bin)
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        runner = Runner(config, app, codex_home=codex_home)
        result = await runner.run(Task("t-cu-fail", "look at the screen", intent="computer_use"), Sink(),
                                  asyncio.Event())
        assert runner.capabilities["computerUse"]["codex"] is True  # codex offered it
    assert result.status == "completed", result
    assert (result.backend, result.fallback_from) == ("cua", "app_server")
    assert result.result_text == "done through the driver"
    card = result.execution_progress
    (warning,) = [w for w in card["warnings"] if w["kind"] == "fallback"]
    assert "Codex computer use failed before it started" in warning["message"]
    assert "computer-use failed to start" in warning["message"]
    assert card["backend"] == "cua"
    assert {"name": "cua", "status": "ready", "error": None} in card["mcpServers"]
    assert len(scripted_model.requests) == 1  # one turn, on the driver
    offered = "\n".join(scripted_model.requests[0].input_texts())
    assert "mcp__cua" in offered  # the driver's desktop tools reached the model


async def test_codex_computer_use_that_starts_runs_on_codex_and_a_failed_turn_never_reruns(
        driver_plugin: None, tmp_path: Path, codex_bin: str, codex_home: Path,
        scripted_model: sm.ScriptedModel) -> None:
    scripted_model.enqueue(sm.text_reply("done by codex's own computer use"))
    scripted_model.enqueue(sm.stream_failure(message="the desktop tool broke"))
    config = make_config(tmp_path, codex_bin)
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        runner = Runner(config, app, codex_home=codex_home)
        ok = await runner.run(Task("t-cu-ok", "look", intent="computer_use"), Sink(), asyncio.Event())
        failed = await runner.run(Task("t-cu-broke", "look again", intent="computer_use"), Sink(),
                                  asyncio.Event())
    assert ok.status == "completed" and ok.result_text == "done by codex's own computer use", ok
    assert (ok.backend, ok.fallback_from) == ("app_server", None)
    assert not [w for w in ok.execution_progress["warnings"] if w["kind"] == "fallback"]
    # The second turn started and failed: it is reported, never re-run on the driver.
    assert failed.status == "failed" and failed.error_code == "codex_turn_failed", failed
    assert (failed.backend, failed.fallback_from) == ("app_server", None)
    assert failed.execution_progress["backend"] != "cua"
    assert len(scripted_model.requests) == 2
    offered = "\n".join(scripted_model.requests[0].input_texts())
    assert "mcp__computer_use" in offered and "mcp__cua" not in offered  # the plugin's desktop tools


class RefusesFirstTurn:
    """A real app-server whose first ``turn/start`` answer is replaced by codex's
    ``-32001 Server overloaded`` (the one fake here: real codex refuses a turn only under
    a load a test cannot produce on demand). Everything else reaches real codex."""

    def __init__(self, app: AppServer) -> None:
        self._app = app
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app, name)

    async def client(self) -> Any:
        return _RefusingClient(await self._app.client(), self)


class _RefusingClient:
    def __init__(self, real: Any, owner: RefusesFirstTurn) -> None:
        self._real = real
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    async def turn_start(self, *args: Any, **kwargs: Any) -> Any:
        if not self._owner.refused:
            self._owner.refused += 1
            raise ServerOverloaded(-32001, "Server overloaded; retry later.")
        return await self._real.turn_start(*args, **kwargs)


async def test_codex_computer_use_whose_turn_is_refused_before_it_starts_falls_back_to_the_driver(
        driver_plugin: None, tmp_path: Path, codex_bin: str, codex_home: Path,
        scripted_model: sm.ScriptedModel) -> None:
    scripted_model.enqueue(sm.text_reply("done through the driver"))
    config = make_config(tmp_path, codex_bin)
    async with AppServer.from_config(config, codex_home=codex_home) as real:
        app = RefusesFirstTurn(real)
        result = await Runner(config, app, codex_home=codex_home).run(  # type: ignore[arg-type]
            Task("t-cu-refused", "look", intent="computer_use"), Sink(), asyncio.Event())
    assert app.refused == 1
    assert result.status == "completed", result
    assert (result.backend, result.fallback_from) == ("cua", "app_server")
    (warning,) = [w for w in result.execution_progress["warnings"] if w["kind"] == "fallback"]
    assert "the turn did not start (ServerOverloaded)" in warning["message"]
    assert len(scripted_model.requests) == 1  # the refused turn never reached the model
    offered = "\n".join(scripted_model.requests[0].input_texts())
    assert "mcp__cua" in offered


async def test_a_driver_turn_refused_before_it_starts_runs_once_in_codex_exec_with_the_driver(
        desktop: dict[str, str], tmp_path: Path, codex_bin: str, codex_home: Path,
        scripted_model: sm.ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", desktop["DISPLAY"])
    scripted_model.enqueue(sm.text_reply("done in exec"))
    config = make_config(tmp_path, codex_bin, **{"codex.approval_policy": "never",
                                                 "codex.max_approval_policy": "never"})
    async with AppServer.from_config(config, codex_home=codex_home) as real:
        app = RefusesFirstTurn(real)
        result = await Runner(config, app, codex_home=codex_home).run(  # type: ignore[arg-type]
            Task("t-cua-refused", "look", intent="computer_use"), Sink(), asyncio.Event())
    assert app.refused == 1
    assert result.status == "completed" and result.result_text == "done in exec", result
    assert (result.backend, result.fallback_from) == ("exec", "app_server")
    (request,) = scripted_model.requests  # one turn, in exec, with the driver's tools
    assert request.headers.get("originator") == "codex_exec"
    assert "mcp__cua" in "\n".join(request.input_texts())
