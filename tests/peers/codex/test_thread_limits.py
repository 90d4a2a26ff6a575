"""What codex 0.171 does with a loaded thread's folder and limits (raw stdio, no
boss-agent client code): the facts ``AppServerTurn`` relies on to run a follow-up under
the limits of now (device API §3, the follow-up bullet).

- ``thread/resume`` of a thread codex holds ignores its overrides and reports the
  thread's own cwd, approval policy and sandbox;
- ``thread/settings/update`` changes them, and a rejoining ``thread/resume`` reports it;
- ``turn/start``'s ``cwd``, ``approvalPolicy`` and ``sandboxPolicy`` bind that turn: a
  command runs in the new folder and cannot write where the old sandbox let it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.runner.policy import sandbox_policy
from tests.support.codex_raw import RawCodex, is_turn_completed


@pytest.fixture
def codex(codex_bin: str, codex_home: Path, tmp_path: Path) -> Iterator[RawCodex]:
    raw = RawCodex(codex_bin, codex_home, tmp_path).start()
    try:
        yield raw
    finally:
        raw.close()


def _held(codex: RawCodex, thread_id: str, **overrides: Any) -> tuple[Any, Any, Any]:
    resumed = codex.request("thread/resume", {"threadId": thread_id, "excludeTurns": True, **overrides})
    return resumed["cwd"], resumed["approvalPolicy"], resumed["sandbox"]["type"]


def _loaded_thread(codex: RawCodex, model: sm.ScriptedModel, cwd: Path, outside: Path) -> str:
    """A thread in ``cwd`` under full access whose first turn wrote into ``outside``."""
    thread_id = codex.start_thread(cwd, approvalPolicy="never", sandbox="danger-full-access")
    model.enqueue(sm.turn(sm.shell_call(f"touch {outside}/first.txt")), sm.text_reply("first"))
    codex.run_turn(thread_id, "first")
    assert (outside / "first.txt").exists()
    return thread_id


def test_resume_keeps_a_loaded_thread_s_limits_and_settings_update_changes_them(
        codex: RawCodex, scripted_model: sm.ScriptedModel, tmp_path: Path, outside_tmp: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    thread_id = _loaded_thread(codex, scripted_model, first, outside_tmp)
    assert _held(codex, thread_id, cwd=str(second), approvalPolicy="untrusted", sandbox="read-only") == (
        str(first), "never", "dangerFullAccess")
    codex.request("thread/settings/update", {"threadId": thread_id, "cwd": str(second),
                                             "approvalPolicy": "untrusted",
                                             "sandboxPolicy": sandbox_policy("read-only")})
    assert _held(codex, thread_id) == (str(second), "untrusted", "readOnly")


def test_turn_start_s_limits_bind_a_loaded_thread(
        codex: RawCodex, scripted_model: sm.ScriptedModel, tmp_path: Path, outside_tmp: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    thread_id = _loaded_thread(codex, scripted_model, first, outside_tmp)
    scripted_model.enqueue(sm.turn(sm.shell_call(f"pwd; touch here.txt {outside_tmp}/second.txt")),
                           sm.text_reply("second"))
    codex.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "second"}],
                                 "cwd": str(second), "approvalPolicy": "never",
                                 "sandboxPolicy": sandbox_policy("workspace-write")})
    messages = codex.record(thread_id, is_turn_completed)
    output = list(scripted_model.requests[-1].tool_outputs().values())[-1]  # this turn's command
    assert (second / "here.txt").exists() and not (first / "here.txt").exists(), output
    assert not (outside_tmp / "second.txt").exists(), output  # full access is gone
    assert "Read-only file system" in output
    (settings,) = [m["params"]["threadSettings"] for m in messages if m["method"] == "thread/settings/updated"]
    assert settings["cwd"] == str(second) and settings["sandboxPolicy"]["type"] == "workspaceWrite"
