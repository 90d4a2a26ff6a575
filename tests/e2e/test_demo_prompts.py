"""The demo model follows the prompt, end to end: `boss-agent up --demo` with its real codex.

Before the fix the demo ran one tour whatever the prompt said: it never asked a
question, a "write" prompt asked to run a command, and a file it wrote in a git
repository showed +0 −0 on the card (``git diff`` sees tracked files only). One
``up --demo`` serves the module; each test has its own project dir and answers what its
task asks the way the page does. (A steer, which needs to know when codex has it, is
tested on codex directly: tests/peers/codex/test_demo_model.py.)
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from boss_agent.controlplane import LocalClient
from boss_agent.demo.model import DEMO_FILE, QUESTION_ID, RUN, WRITE, WRITTEN
from tests.support.e2e import EVENT_TIMEOUT_S, UpProcess, pending_approval, running_up

pytestmark = pytest.mark.codex

View = dict[str, Any]
GIT = ["git", "-c", "user.email=demo@example.invalid", "-c", "user.name=demo"]


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, codex_bin: str) -> Iterator[UpProcess]:
    with running_up(tmp_path_factory.mktemp("e2e-demo"), codex_bin) as process:
        yield process


def settled(view: View) -> bool:
    """Finished, or stopped on a question or approval for the person."""
    return view["result"] is not None or pending_approval(view) is not None


async def first_view(up: UpProcess, task_id: str, matches: Callable[[View], bool]) -> View:
    async with asyncio.timeout(EVENT_TIMEOUT_S), LocalClient.for_db_dir(up.controlplane_dir) as client:
        async for view in client.follow(task_id):
            if matches(view):
                return view
    raise AssertionError(f"task {task_id} finished without the view the test waits for")


async def submit(up: UpProcess, prompt: str, project: Path, **fields: Any) -> str:
    async with LocalClient.for_db_dir(up.controlplane_dir) as client:
        return await client.submit(prompt, workdir=str(project), **fields)


async def decide(up: UpProcess, view: View, decision: str | dict[str, Any]) -> None:
    approval = pending_approval(view)
    assert approval is not None
    async with LocalClient.for_db_dir(up.controlplane_dir) as client:
        await client.decide(view["taskId"], approval["approvalId"], decision)


def git_repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "README.md").write_text("# A project\n", encoding="utf-8")
    subprocess.run([*GIT, "-C", str(path), "add", "."], check=True)
    subprocess.run([*GIT, "-C", str(path), "commit", "-qm", "init"], check=True)
    return path


async def test_a_write_prompt_in_a_git_repo_shows_the_new_file_and_its_lines(up: UpProcess) -> None:
    project = git_repo(up.project("write"))
    task_id = await submit(up, "Write a file with some notes", project)
    view = await first_view(up, task_id, settled)
    assert pending_approval(view) is None, "a patch in the workdir needs no approval"
    card = view["executionProgress"]
    assert view["status"] == "completed", view["result"]
    assert card["fileChanges"] == [{"path": DEMO_FILE, "change": "add"}]
    assert (card["branch"]["name"], card["branch"]["changedFiles"]) == ("main", 1)
    assert (card["branch"]["insertions"], card["branch"]["deletions"]) == (len(WRITTEN), 0)
    assert (project / DEMO_FILE).read_text(encoding="utf-8").splitlines() == WRITTEN


async def test_a_run_prompt_asks_a_command_approval_and_runs_only_that(up: UpProcess) -> None:
    project = up.project("run")
    task_id = await submit(up, "run ls", project)
    asked = await first_view(up, task_id, settled)
    approval = pending_approval(asked)
    assert approval is not None and approval["kind"] == "command"
    assert approval["summary"] == "Run ls (outside the sandbox)"
    await decide(up, asked, "accept")
    view = await first_view(up, task_id, settled)
    assert view["status"] == "completed" and pending_approval(view) is None
    assert view["result"]["resultText"].startswith("Done. I ran `ls -la`")
    assert view["executionProgress"]["fileChanges"] == [] and not (project / DEMO_FILE).exists()


async def test_a_plan_prompt_in_plan_mode_asks_a_question_and_answers_with_a_plan(up: UpProcess) -> None:
    project = up.project("plan")
    task_id = await submit(up, "Plan the next change", project, collaborationMode="plan")
    asked = await first_view(up, task_id, settled)
    question = pending_approval(asked)
    assert question is not None and question["kind"] == "userInput", question
    (only,) = question["questions"]
    assert only["id"] == QUESTION_ID and [o["label"] for o in only["options"]][:2] == [WRITE, RUN]
    await decide(up, asked, {"answers": {QUESTION_ID: [RUN]}})
    view = await first_view(up, task_id, settled)
    assert view["status"] == "completed" and pending_approval(view) is None, view["result"]
    assert view["result"]["resultText"].startswith("Here is my plan.")
    assert view["executionProgress"]["toolActivities"] == []  # a plan, not the command itself


async def test_a_which_prompt_asks_outside_plan_mode_too_and_acts_on_the_answer(up: UpProcess) -> None:
    project = up.project("which")
    task_id = await submit(up, "Which change should we make?", project)
    asked = await first_view(up, task_id, settled)
    question = pending_approval(asked)
    assert question is not None and question["kind"] == "userInput", question
    await decide(up, asked, {"answers": {QUESTION_ID: [WRITE]}})
    view = await first_view(up, task_id, settled)
    assert view["status"] == "completed" and pending_approval(view) is None, view["result"]
    assert view["executionProgress"]["fileChanges"] == [{"path": DEMO_FILE, "change": "add"}]
    assert (project / DEMO_FILE).is_file()
