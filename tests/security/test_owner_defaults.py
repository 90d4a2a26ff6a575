"""Finding 4: the defaults give a remote task neither the home directory nor ``never``.

``workspaces`` defaults to the home directory; it used to let a task run in ``~``
itself, or in ``~/.ssh`` / ``~/.config/systemd/user``, and ``max_approval_policy``
defaulted to ``never``, so such a task could write dotfiles unattended. Now the home
directory and hidden directories below a root need listing exactly, ``never`` needs
the owner's say, and a task naming no workdir gets a directory of its own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from boss_agent.appserver.client import AppServer
from boss_agent.config import Config, load_config
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from boss_agent.tasks import TaskResult
from tests.support.runner import Sink
from tests.support.security import hostile

pytestmark = [pytest.mark.codex]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    for hidden in (".ssh", ".config/systemd/user"):
        (home / hidden).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def _defaults(tmp: Path, codex_bin: str, **overrides: Any) -> Config:
    """The device's defaults: no workspaces, no approval caps set by the owner."""
    return load_config(overrides={"state_dir": str(tmp / "state"), "codex.bin": codex_bin, **overrides},
                       environ={})


async def _run(config: Config, codex_home: Path, **fields: Any) -> tuple[TaskResult, Sink]:
    sink = Sink()
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        result = await Runner(config, app, codex_home=codex_home).run(hostile(**fields), sink,
                                                                      asyncio.Event())
    return result, sink


@pytest.mark.parametrize("workdir", ["~", "~/.ssh", "~/.config/systemd/user"])
async def test_the_home_directory_and_its_dotfiles_are_refused_by_default(
        home: Path, tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel,
        workdir: str) -> None:
    planted = Path(workdir.replace("~", str(home))) / "planted"
    scripted_model.enqueue(sm.turn(sm.shell_call(f"touch {planted}")))
    scripted_model.enqueue(sm.text_reply("done"))
    result, _ = await _run(_defaults(tmp_path, codex_bin), codex_home, workdir=workdir,
                           approvalPolicy="never")
    assert result.status == "failed" and result.error_code == "workdir_not_allowed", result
    assert not planted.exists() and scripted_model.requests == []


async def test_a_listed_hidden_directory_is_allowed_exactly(
        home: Path, tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    scripted_model.enqueue(sm.text_reply("done"))
    config = _defaults(tmp_path, codex_bin, workspaces=[str(home / ".ssh")])
    result, _ = await _run(config, codex_home, workdir="~/.ssh")
    assert result.status == "completed", result


async def test_never_is_capped_to_on_request_by_default_and_the_card_says_so(
        home: Path, tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    (home / "src").mkdir()
    marker = home / "src" / "unasked"
    # The model asks to leave the sandbox: under on-request codex asks the person first.
    scripted_model.enqueue(sm.turn(sm.shell_call(f"touch {marker}", sandbox_permissions="require_escalated",
                                                 justification="needs to write")))
    scripted_model.enqueue(sm.text_reply("done"))
    config = _defaults(tmp_path, codex_bin, **{"codex.sandbox": "read-only"})
    result, sink = await _run(config, codex_home, workdir="~/src", approvalPolicy="never")
    warnings = [w["message"] for w in result.execution_progress["warnings"]]
    assert "approval policy capped to on-request by this device" in warnings
    assert sink.approvals and not marker.exists()  # asked, declined by the sink


async def test_a_task_without_workdir_runs_in_a_scratch_dir_its_follow_up_finds_again(
        home: Path, tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    config = _defaults(tmp_path, codex_bin)
    scripted_model.enqueue(sm.turn(sm.shell_call("touch first-turn")))
    scripted_model.enqueue(sm.text_reply("done"))
    first, _ = await _run(config, codex_home)
    assert first.status == "completed", first
    (made,) = (tmp_path / "state" / "scratch").glob("task-*/first-turn")
    scripted_model.enqueue(sm.turn(sm.shell_call("touch second-turn")))
    scripted_model.enqueue(sm.text_reply("done"))
    second, _ = await _run(config, codex_home, codexThreadRef=first.codex_thread_ref)
    assert second.status == "completed", second
    assert (made.parent / "second-turn").exists()
    assert not (home / "first-turn").exists()


async def test_a_project_id_runs_in_its_configured_path_and_a_hidden_one_is_refused(
        home: Path, tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    app_dir = home / "src" / "app"
    app_dir.mkdir(parents=True)
    config = _defaults(tmp_path, codex_bin, projects={"app": "~/src/app", "keys": "~/.ssh"})
    scripted_model.enqueue(sm.turn(sm.shell_call("touch in-project")))
    scripted_model.enqueue(sm.text_reply("done"))
    result, _ = await _run(config, codex_home, projectId="app")
    assert result.status == "completed" and (app_dir / "in-project").exists(), result
    refused, _ = await _run(config, codex_home, projectId="keys")
    assert refused.status == "failed" and refused.error_code == "workdir_not_allowed"


async def test_the_default_workdir_takes_a_task_that_names_none(
        home: Path, tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    default = tmp_path / "default"
    default.mkdir()
    config = load_config(overrides={"state_dir": str(tmp_path / "state"), "codex.bin": codex_bin},
                         environ={"BOSS_DEFAULT_WORKDIR": str(default)})
    scripted_model.enqueue(sm.turn(sm.shell_call("touch landed")))
    scripted_model.enqueue(sm.text_reply("done"))
    result, _ = await _run(config, codex_home)
    assert result.status == "completed" and (default / "landed").exists(), result
