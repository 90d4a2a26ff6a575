"""``reduce_exec_event``: the same card from ``codex exec --json`` JSONL events.

The exec fallback prints snake_case items (``agent_message``, ``command_execution``,
``file_change``, ``todo_list``, …) without deltas. Each is translated to the app-server
item shape the item handlers already know, so both backends share one set of rules
about what may reach the card.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from boss_agent.jsonshape import mapping
from boss_agent.lifecycles import NOT_YET_RUNNING, TaskStatus
from boss_agent.progress import items as it
from boss_agent.progress.card import Card, Step, TokenUsage
from boss_agent.progress.notifications import add_warning

_STATUS = {"in_progress": "inProgress", "completed": "completed", "failed": "failed",
           "declined": "declined"}


def _status(item: Mapping[str, Any], done: bool) -> str:
    return _STATUS.get(str(item.get("status")), "completed" if done else "inProgress")


def _command(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    shaped = {"type": "commandExecution", "id": item.get("id"), "status": _status(item, done),
              "exitCode": item.get("exit_code")}
    return it.command_execution(card, shaped, done)


def _file_change(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    changes = [{"path": c.get("path"), "kind": {"type": c.get("kind")}}
               for c in item.get("changes") or () if isinstance(c, Mapping)]
    shaped = {"type": "fileChange", "id": item.get("id"), "status": _status(item, done),
              "changes": changes}
    return it.file_change(card, shaped, done)


def _todo(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    entries = [e for e in item.get("items") or () if isinstance(e, Mapping)]
    steps, current = [], False
    for entry in entries:
        if entry.get("completed"):
            status = "completed"
        elif not current and not done:
            status, current = "inProgress", True
        else:
            status = "pending"
        steps.append(Step(str(entry.get("text") or ""), status))
    return it.with_steps(card, steps)


def _mcp(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    shaped = {"type": "mcpToolCall", "id": item.get("id"), "server": item.get("server"),
              "tool": item.get("tool"), "status": _status(item, done)}
    return it.mcp_tool_call(card, shaped, done)


_EXEC_ITEMS: dict[str, Callable[[Card, Mapping[str, Any], bool], Card]] = {
    "agent_message": lambda c, i, d: it.agent_message(c, {"text": i.get("text")}, d),
    "reasoning": lambda c, i, d: it.reasoning(c, {"summary": [i.get("text") or ""]}, d),
    "command_execution": _command,
    "file_change": _file_change,
    "todo_list": _todo,
    "web_search": lambda c, i, d: it.web_search(c, {"type": "webSearch", "id": i.get("id")}, d),
    "mcp_tool_call": _mcp,
    "error": lambda c, i, d: add_warning(c, "error", i.get("message")),
}


def _turn_completed(card: Card, event: Mapping[str, Any]) -> Card:
    usage = mapping(event.get("usage"))
    numbers = {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}
    total = numbers.get("input_tokens", 0) + numbers.get("output_tokens", 0)
    card = card.evolve(tokenUsage=TokenUsage(
        numbers.get("input_tokens", 0), numbers.get("cached_input_tokens", 0),
        numbers.get("output_tokens", 0), numbers.get("reasoning_output_tokens", 0), total))
    return it.close_open_items(card, "interrupted")


def reduce_exec_event(card: Card, event: dict[str, Any]) -> Card:
    """The next card after one ``codex exec --json`` event; unknown events are counted."""
    try:
        return _reduce(card, event)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        # A line codex did not promise: that one event is dropped, never the card.
        return card.evolve(ignored_count=card.ignored_count + 1)


def _reduce(card: Card, event: Any) -> Card:
    kind = event.get("type") if isinstance(event, Mapping) else None
    if kind in ("item.started", "item.updated", "item.completed"):
        item = event.get("item") if isinstance(event.get("item"), Mapping) else {}
        handler = _EXEC_ITEMS.get(str(item.get("type")))
        if handler is None:
            return card.evolve(ignored_count=card.ignored_count + 1)
        return handler(card, item, kind == "item.completed")
    if kind == "thread.started":
        return card  # carries only the session id, which never goes on the card
    if kind == "turn.started":
        running = card.status in NOT_YET_RUNNING
        return card.evolve(status=TaskStatus.RUNNING) if running else card
    if kind == "turn.completed":
        return _turn_completed(card, event)
    if kind == "turn.failed":
        error = event.get("error") if isinstance(event.get("error"), Mapping) else {}
        return it.close_open_items(add_warning(card, "error", error.get("message")), "failed")
    if kind == "error":
        return add_warning(card, "error", event.get("message"))
    return card.evolve(ignored_count=card.ignored_count + 1)
