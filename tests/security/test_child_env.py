"""Finding 6: the daemon's secrets never reach the commands Codex runs.

The codex child inherited every ``BOSS_*`` variable but a few names, so a
``BOSS_REDIS_URL`` with a password reached every command the model ran. The child
now gets the daemon's environment minus every ``BOSS_*`` variable and its secrets.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from tests.support.config import make_config
from tests.support.runner import Sink
from tests.support.runner import missing_app_server
from tests.support.security import hostile

pytestmark = [pytest.mark.codex]

PASSWORD = "redis-pw-7f3a9c"


@pytest.fixture
def daemon_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOSS_REDIS_URL", f"redis://:{PASSWORD}@127.0.0.1:6379/0")
    monkeypatch.setenv("BOSS_SOMETHING_NEW", "also-the-daemon-s")
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")


@pytest.mark.parametrize("backend", ["app_server", "exec"])
async def test_a_command_in_the_turn_sees_no_boss_variable(
        daemon_env: None, tmp_path: Path, codex_bin: str, codex_home: Path,
        scripted_model: sm.ScriptedModel, backend: str) -> None:
    # exec runs only tasks that ask nothing: the owner allows never here.
    config = make_config(tmp_path, codex_bin, **{"codex.approval_policy": "never",
                                                 "codex.max_approval_policy": "never"})
    dump = config.workspaces[0] / "env.txt"
    scripted_model.enqueue(sm.turn(sm.shell_call(f"env > {dump}")))
    scripted_model.enqueue(sm.text_reply("done"))
    app = (AppServer.from_config(config, codex_home=codex_home) if backend == "app_server"
           else missing_app_server(tmp_path, codex_bin))
    async with app:
        result = await Runner(config, app, codex_home=codex_home).run(
            hostile(workdir=str(config.workspaces[0])), Sink(), asyncio.Event())
    assert result.status == "completed" and result.backend == backend, result
    seen = dump.read_text()
    assert "CODEX_THREAD_ID=" in seen  # the dump is the command's real environment
    assert PASSWORD not in seen
    assert [line for line in seen.splitlines() if line.startswith(("BOSS_", "NOTIFY_SOCKET"))] == []
