"""End to end, as a user runs it: `boss-agent up --demo` in one process, `boss-agent task` in another.

One real ``up --demo`` process serves the whole module (control plane, daemon, real
codex app-server, the built-in demo model); each test gives its task its own project
dir, so the tests stay independent. ``task`` runs with stdin not a terminal, so it
never asks; the approval is answered the way the phone or the page would, through
the control plane's local API. The last test stops ``up`` with SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from boss_agent.controlplane import LocalClient
from boss_agent.demo.model import DEMO_FILE
from tests.support.e2e import CANARY, PROMPT_WORD, UpProcess, first_task, pending_approval, running_up

pytestmark = pytest.mark.codex

DEMO_STEPS = ("Look at the project", "Write a note", "Answer")
ANSWER = f"Done. I looked at the project and wrote {DEMO_FILE}."
PROMPT = f"Tidy the project up, {PROMPT_WORD}. The deploy key is {CANARY}."


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, codex_bin: str) -> Iterator[UpProcess]:
    with running_up(tmp_path_factory.mktemp("e2e-cli"), codex_bin) as process:
        yield process


async def _answer_its_approval(up: UpProcess, project: Path, decision: str) -> dict:
    """Wait for the task in ``project`` to ask, then answer as the phone would."""
    view = await first_task(up.controlplane_dir,
                            lambda v: v["task"]["workdir"] == str(project) and pending_approval(v) is not None)
    approval = pending_approval(view)
    assert approval["kind"] == "command" and approval["summary"].startswith("Run ls")
    async with LocalClient.for_db_dir(up.controlplane_dir) as client:
        await client.decide(view["taskId"], approval["approvalId"], decision)
    return view


async def _follow_task(up: UpProcess, project: Path, decision: str) -> tuple[int, str, str, str]:
    async with asyncio.TaskGroup() as group:
        cli = group.create_task(up.run_cli("task", PROMPT, "--workdir", str(project)))
        view = await _answer_its_approval(up, project, decision)
    return *cli.result(), view["taskId"]


async def _final(up: UpProcess, task_id: str) -> dict:
    """The task's view once it is finished (at once if it already is)."""
    async with LocalClient.for_db_dir(up.controlplane_dir) as client:
        views = [view async for view in client.follow(task_id)]
    return views[-1]


async def test_task_prints_the_answer_and_exits_0_once_its_command_is_approved(up: UpProcess):
    project = up.project("approved")
    code, out, err, _ = await _follow_task(up, project, "accept")
    assert code == 0, err
    assert ANSWER in " ".join(out.split())  # the card may wrap the answer across lines
    assert "completed" in out and f"add {DEMO_FILE}" in out
    assert all(f"✔ {step}" in out for step in DEMO_STEPS), out
    assert "Run ls (outside the sandbox) accepted" in out
    assert CANARY not in out + err and PROMPT_WORD not in out + err
    assert (project / DEMO_FILE).is_file()


async def test_a_declined_command_is_skipped_and_the_task_still_completes_with_exit_0(up: UpProcess):
    project = up.project("declined")
    code, out, err, task_id = await _follow_task(up, project, "decline")
    view = await _final(up, task_id)
    # Codex goes on after a decline: the demo model writes its file (a patch inside the
    # workdir needs no approval under workspace-write) and answers.
    assert code == 0, err
    assert view["status"] == "completed" and view["result"]["resultText"].startswith(ANSWER)
    assert [a["decision"] for a in view["approvals"]] == ["decline"]
    assert [t["status"] for t in view["executionProgress"]["toolActivities"]] == ["declined"]
    assert ANSWER in " ".join(out.split()) and CANARY not in out + err and PROMPT_WORD not in out + err
    assert "Run ls (outside the sandbox) declined" in out
    assert (project / DEMO_FILE).is_file()


async def test_task_exits_1_when_its_task_is_cancelled_instead_of_completing(up: UpProcess):
    project = up.project("cancelled")

    async def cancel_once_it_asks() -> str:
        view = await first_task(up.controlplane_dir,
                                lambda v: v["task"]["workdir"] == str(project) and pending_approval(v) is not None)
        async with LocalClient.for_db_dir(up.controlplane_dir) as client:
            await client.cancel(view["taskId"])
        return view["taskId"]

    async with asyncio.TaskGroup() as group:
        cli = group.create_task(up.run_cli("task", PROMPT, "--workdir", str(project)))
        cancelled = group.create_task(cancel_once_it_asks())
    code, out, err = cli.result()
    assert (await _final(up, cancelled.result()))["status"] == "cancelled"
    assert code == 1, out + err
    assert "cancelled" in out
    assert not (project / DEMO_FILE).exists()


async def test_task_no_follow_prints_the_id_of_the_task_it_queued(up: UpProcess):
    project = up.project("no-follow")
    code, out, err = await up.run_cli("task", PROMPT, "--workdir", str(project), "--no-follow")
    assert code == 0, err
    task_id = out.strip()
    assert task_id.startswith("tsk_") and "\n" not in task_id
    view = await _answer_its_approval(up, project, "accept")
    assert view["taskId"] == task_id and view["task"]["prompt"] == PROMPT
    assert (await _final(up, task_id))["status"] == "completed"


async def test_status_json_while_up_runs_names_the_codex_it_drives(up: UpProcess, codex_bin: str):
    code, out, err = await up.run_cli("status", "--json")
    assert code == 0, err
    status = json.loads(out)
    assert status["codexVersion"] == "0.171.0" and status["codexTransport"] == "stdio"
    assert str(up.root) not in out, "status shows no absolute home or state path"


async def test_status_json_while_up_runs_shows_the_device_paired_and_the_daemon_running(up: UpProcess):
    code, out, err = await up.run_cli("status", "--json")
    status = json.loads(out)
    device = json.loads((up.state_dir / "device.json").read_text(encoding="utf-8"))
    assert code == 0 and status["paired"] is True and status["deviceId"] == device["deviceId"]
    assert status["server"] == device["serverUrl"] and up.page_url.startswith(device["serverUrl"] + "/")
    assert status["daemonRunning"] is True and status["daemonPid"] == up.proc.pid


async def test_up_stops_on_sigterm_with_exit_0_and_never_wrote_a_prompt_secret(up: UpProcess):
    async with LocalClient.for_db_dir(up.controlplane_dir) as client:
        task_id = await client.submit(PROMPT, workdir=str(up.project("last")), approvalMode="deny")
    view = await _final(up, task_id)
    # approvalMode deny: the daemon declined the command itself, and codex went on.
    assert view["status"] == "completed" and view["approvals"] == []
    assert [t["status"] for t in view["executionProgress"]["toolActivities"]] == ["declined"]
    assert await asyncio.to_thread(up.stop) == 0
    written = up.everything_written()
    assert f"task {task_id} completed" in written
    assert "CANARY" not in written and PROMPT_WORD not in written
