"""A workdir the daemon refuses says why: missing, or a file and so not a directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from boss_agent.config import Config
from boss_agent.errors import TaskRejected
from boss_agent.runner.policy import resolve_workdir
from boss_agent.tasks import Task
from tests.support.config import make_config


def _refusal(task: Task, config: Config) -> str:
    with pytest.raises(TaskRejected) as caught:
        resolve_workdir(task, config)
    assert caught.value.code == "workdir_not_allowed"
    return str(caught.value)


def test_a_file_as_workdir_is_not_a_directory(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    notes = config.workspaces[0] / "notes.txt"
    notes.write_text("x")
    assert "is not a directory" in _refusal(Task("t", "p", workdir=str(notes)), config)
    assert "does not exist" in _refusal(Task("t", "p", workdir=str(config.workspaces[0] / "nope")), config)


def test_a_file_as_default_workdir_is_not_a_directory(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    config = make_config(tmp_path, default_workdir=str(notes))
    assert "default_workdir is not a directory" in _refusal(Task("t", "p"), config)
