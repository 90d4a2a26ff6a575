"""Drawing an ``executionProgress`` card in a terminal, for `boss-agent task --follow`.

It reads only the allow-listed keys of docs/progress-card.md and prints them as the
Boss app would: status, steps, tools, approvals, files, branch, tokens, warnings and
the answer. The card is already sanitized by the daemon; this module only lays it out
(with rich, escaping every string so card text cannot inject markup).
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

STATUS_STYLE = {
    "queued": "dim", "running": "cyan", "waitingApproval": "yellow", "waitingInput": "yellow",
    "completed": "green", "failed": "red", "cancelled": "magenta", "abandoned": "red",
}
STEP_MARK = {"completed": "[green]✔[/]", "inProgress": "[cyan]▶[/]", "pending": "[dim]○[/]",
             "failed": "[red]✘[/]"}
MAX_LIST_ROWS = 8  # a card in a terminal is a glance, not a log


def _rows(items: list[Any] | None) -> list[Any]:
    items = list(items or [])
    return items[-MAX_LIST_ROWS:]


def _section(title: str, lines: list[str]) -> list[RenderableType]:
    if not lines:
        return []
    return [Text.from_markup(f"[bold]{title}[/]"), *(Text.from_markup("  " + line) for line in lines)]


def render_card(view: dict[str, Any]) -> RenderableType:
    """A task view (``status``, ``executionProgress``, ``result``) as one rich panel."""
    card: dict[str, Any] = view.get("executionProgress") or {}
    status = str(view.get("status") or card.get("status") or "queued")
    parts: list[RenderableType] = []
    parts += _section("Steps", [f"{STEP_MARK.get(s.get('status'), '·')} {escape(str(s.get('title', '')))}"
                                for s in _rows(card.get("steps"))])
    parts += _section("Tools", [f"{escape(str(t.get('summary') or t.get('name') or t.get('kind')))}"
                                f" [dim]{escape(str(t.get('status', '')))}[/]"
                                for t in _rows(card.get("toolActivities"))])
    parts += _section("Approvals", [f"{escape(str(a.get('summary', '')))} [yellow]{escape(str(a.get('status')))}[/]"
                                    for a in _rows(card.get("approvals"))])
    parts += _section("Files", [f"{escape(str(f.get('change', '')))} {escape(str(f.get('path', '')))}"
                                for f in _rows(card.get("fileChanges"))])
    branch = card.get("branch") or {}
    if branch:
        files = branch.get("changedFiles", 0)
        counts = (f"{files} file{'' if files == 1 else 's'} changed, "
                  f"+{branch.get('insertions', 0)} -{branch.get('deletions', 0)}")
        name = branch.get("name")
        parts += _section("Branch" if name else "Changes", [escape(f"{name}: {counts}" if name else counts)])
    parts += _section("Warnings", [escape(str(w.get("message", ""))) for w in _rows(card.get("warnings"))])
    usage = card.get("tokenUsage") or {}
    if usage.get("totalTokens"):
        parts.append(Text(f"tokens: {usage['totalTokens']}", style="dim"))
    answer = (view.get("result") or {}).get("resultText") or card.get("answerPreview")
    if answer:
        parts += [Text.from_markup("[bold]Answer[/]"), Text(str(answer))]
    error = (view.get("result") or {}).get("error")
    if error:
        parts.append(Text.from_markup(f"[red]{escape(str(error.get('code')))}: {escape(str(error.get('message')))}[/]"))
    title = f"[{STATUS_STYLE.get(status, 'white')}]{escape(status)}[/]"
    if card.get("backend"):
        title += f" [dim]on {escape(str(card['backend']))}[/]"
    waiting = str(view.get("waitReason") or "waiting for the device…")  # why a queued task has not started
    return Panel(Group(*parts) if parts else Text(waiting, style="dim"), title=title,
                 title_align="left")
