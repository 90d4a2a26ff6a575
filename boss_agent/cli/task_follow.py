"""`boss-agent task`: submit a task to the local control plane and follow its card.

The card is redrawn in place (rich Live) on every change the control plane streams,
until the task is finished; the exit code says whether it completed. When a pending
approval appears and stdin is a terminal, the user can answer it right here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from boss_agent.controlplane import LocalClient
from boss_agent.cli import approval_prompt
from boss_agent.cli.terminal_card import render_card

def controlplane_dir(state_dir: Path) -> Path:
    """Where `up` and `devserver` keep the local control plane's database and secret."""
    return state_dir / "controlplane"


async def submit_and_follow(client: LocalClient, prompt: str, fields: dict[str, Any], *, follow: bool,
                            console: Console, interactive: bool | None = None) -> tuple[str, str]:
    """Submit; with ``follow`` draw the card until finished. Returns (task id, final status)."""
    task_id = await client.submit(prompt, **fields)
    if not follow:
        return task_id, "queued"
    interactive = sys.stdin.isatty() if interactive is None else interactive
    asked: set[str] = set()
    status = "queued"
    with Live(console=console, auto_refresh=False, transient=False) as live:
        async for view in client.follow(task_id):
            status = view["status"]
            live.update(render_card(view), refresh=True)
            pending = [a for a in view.get("approvals", []) if a.get("status") == "pending"
                       and a["approvalId"] not in asked]
            for approval in pending if interactive else []:
                asked.add(approval["approvalId"])
                live.stop()
                await approval_prompt.ask(client, task_id, approval, console)
                live.start()
    return task_id, status
