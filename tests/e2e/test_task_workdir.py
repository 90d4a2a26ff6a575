"""`boss-agent task` without `--workdir`, and with a bad one, as a user runs it.

Without ``--workdir`` the task names no workdir, as a task from the page or the phone
does: it runs in the daemon's ``default_workdir`` or the thread's scratch directory,
never in whatever directory the shell happened to be in, and ``task`` says which as it
starts. A ``--workdir`` that cannot be used is refused before anything is submitted,
saying why.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from boss_agent.controlplane import LocalClient
from tests.support.cli import run_cli_async
from tests.support.e2e import UpProcess, running_up

pytestmark = pytest.mark.codex

PROMPT = "Say hello"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, codex_bin: str) -> Iterator[UpProcess]:
    with running_up(tmp_path_factory.mktemp("task-workdir"), codex_bin) as process:
        yield process


async def test_no_workdir_sends_none_not_the_current_directory_and_says_where_it_runs(up: UpProcess):
    shell_dir = up.project("where-the-shell-is")
    done = await run_cli_async("task", "--no-follow", PROMPT, env=up.env, cwd=shell_dir)
    assert done.returncode == 0, done.stderr
    task_id = done.stdout.strip()
    async with LocalClient.for_db_dir(up.controlplane_dir) as client:
        view = await client.task(task_id)
        await client.cancel(task_id)
    assert view["task"].get("workdir") is None, view["task"]
    assert "workdir: a new scratch directory" in done.stderr and "--workdir" in done.stderr, done.stderr


async def test_a_file_as_workdir_is_not_a_directory(up: UpProcess):
    notes = up.workspaces / "notes.txt"
    notes.write_text("not a project\n")
    code, out, err = await up.run_cli("task", "--no-follow", PROMPT, "--workdir", str(notes))
    assert code == 2 and not out, (out, err)
    assert "not a directory" in err and "does not exist" not in err, err


async def test_a_missing_workdir_does_not_exist(up: UpProcess):
    code, out, err = await up.run_cli("task", "--no-follow", PROMPT, "--workdir", str(up.workspaces / "nope"))
    assert code == 2 and not out and "does not exist" in err, (out, err)
