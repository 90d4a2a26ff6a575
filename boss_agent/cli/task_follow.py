"""`boss-agent task` and `steer`: submit a task to the local control plane and follow its card.

On a terminal the card is redrawn in place (rich Live) on every change the control
plane streams, until the task is finished; the exit code says whether it completed.
When a pending approval appears and stdin is a terminal, the user can answer it right
here. Without a terminal (a pipe, a log, CI) the card cannot be redrawn, so each
change is one plain line instead (``ChangeLines``), and the final card is printed once.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from boss_agent.cli import approval_prompt
from boss_agent.cli.support import tilde
from boss_agent.cli.terminal_card import render_card
from boss_agent.config import Config
from boss_agent.controlplane import LocalClient
from boss_agent.errors import ConfigError, ControlPlaneError

STEP_MARK = {"completed": "✔", "inProgress": "▶", "pending": "○", "failed": "✘"}


def workdir_field(workdir: Path | None, config: Config, *, thread: str | None) -> tuple[dict[str, Any], str]:
    """The task's ``workdir`` field and the line saying where it runs; a bad ``--workdir`` refused.

    No ``--workdir`` names none (not the shell's directory): the task runs where any task
    without one runs, the ``default_workdir`` or its thread's scratch directory.
    """
    if workdir is None:
        if config.default_workdir is not None:
            where = f"the configured default_workdir, {tilde(str(config.default_workdir))}"
        elif thread:
            where = "the thread's scratch directory under the state dir"
        else:
            where = "a new scratch directory under the state dir (--workdir DIR runs it in a project)"
        return {}, f"workdir: {where}"
    path = workdir.expanduser().resolve()
    if not path.is_dir():
        why = "not a directory" if path.exists() else "does not exist"
        raise ConfigError(f"--workdir {tilde(str(workdir))}: {why}")
    return {"workdir": str(path)}, f"workdir: {tilde(str(path))}"


def controlplane_dir(state_dir: Path) -> Path:
    """Where `up` and `devserver` keep the local control plane's database and secret."""
    return state_dir / "controlplane"


class ChangeLines:
    """One plain line per change of a task's view: status, thread, step, approval, result."""

    def __init__(self, page_url: str) -> None:
        self.page_url = page_url
        self._seen: dict[str, str] = {}

    def _changed(self, key: str, value: str) -> bool:
        if self._seen.get(key) == value:
            return False
        self._seen[key] = value
        return True

    def lines(self, view: dict[str, Any]) -> list[str]:
        out: list[str] = []
        card = view.get("executionProgress") or {}
        status = str(view.get("status") or "queued")
        if self._changed("status", status):
            out.append(f"status: {status}")
        reason = view.get("waitReason")
        if self._changed("wait", str(reason or "")) and reason:
            out.append(f"waiting: {reason}")  # every slot is held, and by what
        thread = view.get("codexThreadRef")
        if thread and self._changed("thread", str(thread)):
            out.append(f"thread: {thread} (continue it with --thread)")
        for index, step in enumerate(card.get("steps") or []):
            state = str(step.get("status", ""))
            if self._changed(f"step {index}", state):
                out.append(f"step {STEP_MARK.get(state, '·')} {step.get('title', '')}")
        for approval in view.get("approvals") or []:
            state = str(approval.get("status"))
            if not self._changed(f"approval {approval.get('approvalId')}", state):
                continue
            summary = approval.get("summary") or "a request"
            if state == "pending":
                out.append(f"approval waiting: {summary} (answer it on the page: {self.page_url})")
            else:
                out.append(f"approval: {summary} {approval.get('decision') or state}")
        result = view.get("result") or {}
        if result and self._changed("result", "shown"):
            error = result.get("error") or {}
            out.append(f"result: {result.get('resultText') or ''}" if result.get("status") == "completed"
                       else f"result: {result.get('status')} ({error.get('code')}: {error.get('message')})")
        return out


async def steer_fields(client: LocalClient, task_id: str) -> dict[str, Any]:
    """The fields of a steer of ``task_id``'s running turn; refused when it has none."""
    view = await client.task(task_id)
    if view["status"] != "running" or not view.get("turnId") or not view.get("codexThreadRef"):
        raise ControlPlaneError(409, "turn_not_active",
                                f"task {task_id} has no running turn to steer (it is {view['status']})")
    fields = {"codexThreadRef": view["codexThreadRef"], "targetCodexTurnId": view["turnId"]}
    workdir = (view.get("task") or {}).get("workdir")
    return {**fields, "workdir": workdir} if workdir else fields


async def submit_and_follow(client: LocalClient, prompt: str, fields: dict[str, Any], *, follow: bool,
                            console: Console, interactive: bool | None = None) -> tuple[str, str]:
    """Submit; with ``follow`` show the card until finished. Returns (task id, final status)."""
    task_id = await client.submit(prompt, **fields)
    if not follow:
        return task_id, "queued"
    interactive = sys.stdin.isatty() if interactive is None else interactive
    if not console.is_terminal:
        return task_id, await _print_changes(client, task_id, console, interactive)
    asked: set[str] = set()
    status = "queued"
    with Live(console=console, auto_refresh=False, transient=False) as live:
        async for view in client.follow(task_id):
            status = view["status"]
            live.update(render_card(view), refresh=True)
            for approval in _to_ask(view, asked) if interactive else []:
                live.stop()
                await approval_prompt.ask(client, task_id, approval, console)
                live.start()
    return task_id, status


def _to_ask(view: dict[str, Any], asked: set[str]) -> list[dict[str, Any]]:
    """The pending approvals not asked at this prompt yet (now marked asked)."""
    pending = [a for a in view.get("approvals", []) if a.get("status") == "pending"
               and a["approvalId"] not in asked]
    asked.update(a["approvalId"] for a in pending)
    return pending


async def _print_changes(client: LocalClient, task_id: str, console: Console, interactive: bool) -> str:
    changes = ChangeLines(client.url + "/")
    asked: set[str] = set()
    view: dict[str, Any] = {"status": "queued"}
    console.print(f"task {task_id}", highlight=False)
    async for view in client.follow(task_id):
        for line in changes.lines(view):
            # Printed as plain text: card strings must not be read as rich markup.
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        console.file.flush()
        for approval in _to_ask(view, asked) if interactive else []:
            await approval_prompt.ask(client, task_id, approval, console)
    console.print(render_card(view))
    return str(view["status"])
