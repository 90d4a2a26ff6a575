"""`boss-agent task` / `steer` as a user runs them from a pipe, against a real control
plane and a daemon on real codex with the scripted model.

The control plane and the daemon run in this process (so the test can script the model
and read its requests); the CLI runs as a real ``python -m boss_agent`` subprocess that
finds the control plane through the state dir, stdout a pipe (not a terminal).
"""

from __future__ import annotations

import asyncio
import os
import pty
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.demo import scripted_model as sm
from tests.support.config import make_config
from tests.support.daemon import paired_daemon
from tests.support.cli import cli_env

LINE_TIMEOUT_S = 60  # codex start-up plus a few scripted model round trips


class Cli:
    """One ``boss-agent`` subprocess whose stdout is read line by line as it prints."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []

    async def line_with(self, needle: str) -> str:
        """The first printed line containing ``needle`` (waits for it, bounded)."""
        assert self.proc.stdout is not None
        async with asyncio.timeout(LINE_TIMEOUT_S):
            for line in self.lines:
                if needle in line:
                    return line
            while raw := await self.proc.stdout.readline():
                self.lines.append(raw.decode())
                if needle in self.lines[-1]:
                    return self.lines[-1]
        raise AssertionError(f"no line with {needle!r}; printed:\n{''.join(self.lines)}")

    async def finish(self) -> tuple[int, str, str]:
        async with asyncio.timeout(LINE_TIMEOUT_S):
            out, err = await self.proc.communicate()
        return self.proc.returncode or 0, "".join(self.lines) + out.decode(), err.decode()


STARTED: list[Cli] = []  # killed after each test, so a failed test leaves no CLI running


@pytest.fixture(autouse=True)
async def _no_cli_left() -> AsyncIterator[None]:
    yield
    while STARTED:
        cli = STARTED.pop()
        if cli.proc.returncode is None:
            cli.proc.kill()
            await cli.proc.communicate()


async def start_cli(tmp_path: Path, *args: str) -> Cli:
    """An interactive ``boss-agent`` the test reads line by line (``run_cli`` runs to completion)."""
    env = cli_env(tmp_path / "home", BOSS_STATE_DIR=str(tmp_path / "state"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "boss_agent", *args, cwd=tmp_path, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    STARTED.append(Cli(proc))
    return STARTED[-1]


class Terminal:
    """One ``boss-agent`` on a pseudo-terminal: what a person at a terminal sees, and their keys."""

    ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

    def __init__(self, proc: asyncio.subprocess.Process, master: int) -> None:
        self.proc = proc
        self.master = master
        self.screen = ""
        self._more = asyncio.Event()
        asyncio.get_running_loop().add_reader(master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the child closed the terminal
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
        self.screen += self.ANSI.sub("", data.decode(errors="replace"))
        self._more.set()

    async def until(self, needle: str) -> str:
        """Everything shown so far, once ``needle`` is on the screen (bounded)."""
        try:
            async with asyncio.timeout(LINE_TIMEOUT_S):
                while needle not in self.screen:
                    self._more.clear()
                    await self._more.wait()
        except TimeoutError:
            raise AssertionError(f"no {needle!r} on the terminal; it shows:\n{self.screen}") from None
        return self.screen

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    async def close(self) -> int:
        async with asyncio.timeout(LINE_TIMEOUT_S):
            code = await self.proc.wait()
        asyncio.get_running_loop().remove_reader(self.master)
        os.close(self.master)
        return code


async def start_terminal(tmp_path: Path, *args: str) -> Terminal:
    master, child = pty.openpty()
    env = cli_env(tmp_path / "home", BOSS_STATE_DIR=str(tmp_path / "state"), TERM="xterm-256color", COLUMNS="160")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "boss_agent", *args, cwd=tmp_path, env=env,
                                                stdin=child, stdout=child, stderr=child)
    os.close(child)
    STARTED.append(Cli(proc))  # killed after the test if it is still running
    return Terminal(proc, master)


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[ControlPlane]:
    (tmp_path / "home").mkdir()
    async with ControlPlane(tmp_path / "state" / "controlplane" / "controlplane.db") as cp:
        yield cp


@pytest.mark.codex
async def test_task_prints_each_change_steer_reaches_the_turn_and_thread_continues(
    tmp_path: Path, plane: ControlPlane, codex_bin: str, codex_home: Path, workdir: Path,
    scripted_model: sm.ScriptedModel,
) -> None:
    config = make_config(tmp_path, server_url=plane.url, workspace=tmp_path,
                         codex__bin=codex_bin, max_concurrent_tasks=1)
    scripted_model.enqueue(
        sm.turn(sm.update_plan([("Run the check", "in_progress")]),
                sm.shell_call("echo checked", sandbox_permissions="require_escalated",
                              justification="the test asks before it runs a command")),
        sm.hang(sm.message("still working")),
        sm.text_reply("steered answer"),
        sm.text_reply("second turn answer"))
    async with paired_daemon(config, plane.url, plane.create_pairing_code(), codex_home):
        task = await start_cli(tmp_path, "task", "a long job", "--workdir", str(workdir))
        first = (await task.line_with("task tsk_")).split()[1]
        await task.line_with("status: running")
        await task.line_with("step ▶ Run the check")
        # Printed while the task waits, not after it ended: the user learns where to answer.
        waiting = await task.line_with("approval waiting:")
        assert f"answer it on the page: {plane.url}/" in waiting and plane.secret not in waiting
        approval = plane.task(first)["approvals"][0]
        plane.decide(first, approval["approvalId"], "accept")
        await task.line_with("approval: ")
        await asyncio.to_thread(scripted_model.wait_for_requests, 2, LINE_TIMEOUT_S)
        await plane.wait_task(first, lambda v: v["turnId"] is not None, LINE_TIMEOUT_S)
        steer = await start_cli(tmp_path, "steer", first, "focus on the tests")
        steer_code, steer_out, steer_err = await steer.finish()
        code, out, err = await task.finish()
        thread = plane.task(first)["codexThreadRef"]
        assert f"thread: {thread} (continue it with --thread)" in out
        follow = await start_cli(tmp_path, "task", "and now?", "--workdir", str(workdir), "--thread", thread)
        follow_code, follow_out, follow_err = await follow.finish()
    assert steer_code == 0, steer_out + steer_err
    assert "result: steered answer" in steer_out
    assert code == 0 and "status: completed" in out, out + err
    steered, continued = scripted_model.requests[-2:]
    assert "focus on the tests" in steered.input_texts()
    assert follow_code == 0 and "result: second turn answer" in follow_out, follow_out + follow_err
    assert "a long job" in continued.input_texts() and "and now?" in continued.input_texts()


async def test_a_steer_of_a_task_without_a_running_turn_is_one_line_and_exit_1(
        tmp_path: Path, plane: ControlPlane) -> None:
    queued = plane.submit_task("nobody claims this")
    code, out, err = await (await start_cli(tmp_path, "steer", queued, "hello")).finish()
    assert code == 1 and "no running turn to steer" in err and len(err.strip().splitlines()) == 1, err
    assert len(plane.tasks()) == 1  # nothing was submitted


async def test_task_computer_use_submits_a_desktop_task(tmp_path: Path, plane: ControlPlane) -> None:
    code, out, err = await (await start_cli(tmp_path, "task", "open the editor", "--computer-use",
                                          "--no-follow")).finish()
    assert code == 0, err
    assert plane.task(out.strip())["task"]["intentCategory"] == "computer_use"


@pytest.mark.codex
async def test_task_at_a_terminal_shows_the_whole_command_and_a_visible_y_n_prompt(
    tmp_path: Path, plane: ControlPlane, codex_bin: str, codex_home: Path, workdir: Path,
    scripted_model: sm.ScriptedModel,
) -> None:
    """Issue 24: rich read the prompt's ``[y/n]`` as markup and printed nothing of it."""
    config = make_config(tmp_path, server_url=plane.url, workspace=tmp_path,
                         codex__bin=codex_bin, max_concurrent_tasks=1)
    script = "ls && rm -rf victim1 [bold]x[/bold]"
    scripted_model.enqueue(
        sm.turn(sm.shell_call(script, sandbox_permissions="require_escalated", justification="clean up")),
        sm.text_reply("left it alone"))
    async with paired_daemon(config, plane.url, plane.create_pairing_code(), codex_home):
        terminal = await start_terminal(tmp_path, "task", "clean up", "--workdir", str(workdir))
        screen = await terminal.until("[y/n]")
        terminal.type("n\n")
        final = await terminal.until("completed on app_server")
        code = await terminal.close()
    assert code == 0, final
    assert "Approve: Run 2 commands: ls, rm (outside the sandbox) (risk: high)" in screen, screen
    assert "! runs outside the sandbox" in screen and script in screen, screen  # markup shown as typed
    assert plane.task(plane.tasks()[0]["taskId"])["approvals"][0]["decision"] == "decline"
