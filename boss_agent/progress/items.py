"""ThreadItems (``item/started`` / ``item/completed``) onto the card.

``ITEMS`` names every ThreadItem type of the app-server protocol. A handler gets the
card, the item and whether it completed; ``None`` means the item is deliberately
ignored, with the reason beside it. Handlers copy labels, counts and statuses only:
the command text, its output, diffs, tool arguments and results, prompts and raw
reasoning are never read into the card.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from boss_agent.jsonshape import mapping
from boss_agent.progress import approval_card as approvals
from boss_agent.progress.artifacts import artifact_kind
from boss_agent.progress.bounds import (
    MAX_ARTIFACTS,
    MAX_BACKGROUND_AGENTS,
    MAX_FILE_CHANGES,
    MAX_STEPS,
    MAX_TOOL_ACTIVITIES,
    trim,
)
from boss_agent.progress.card import (
    Artifact,
    BackgroundAgent,
    Card,
    Collaboration,
    Compaction,
    FileChange,
    Reasoning,
    Step,
    ToolActivity,
    key_of,
)
from boss_agent.redact import StreamRedactor

ItemHandler = Callable[[Card, Mapping[str, Any], bool], Card]
MAX_ACTIVITIES = 50  # collaborations and MCP servers: a phone lists the recent ones
_CHANGE = {"add": "add", "delete": "delete", "update": "update"}
_WEB_ACTION = {"search": "web search", "openPage": "opened a web page",
               "findInPage": "searched in a web page"}


def upsert(records: tuple[Any, ...], key: int | None, record: Any, cap: int) -> tuple[Any, ...]:
    """Replace the record with ``key`` or append; keep at most ``cap`` (bounds.trim:
    the unresolved ones, then the newest)."""
    return upsert_counted(records, key, record, cap)[0]


def upsert_counted(records: tuple[Any, ...], key: int | None, record: Any,
                   cap: int) -> tuple[tuple[Any, ...], int]:
    """``upsert`` that keeps the unresolved entries first (bounds.trim), and says how
    many entries it left out."""
    if key is not None:
        for index, old in enumerate(records):
            if old.key == key:
                return records[:index] + (record,) + records[index + 1:], 0
    return trim(records + (record,), cap)


def put_activity(card: Card, key: int | None, record: ToolActivity) -> Card:
    kept, dropped = upsert_counted(card.toolActivities, key, record, MAX_TOOL_ACTIVITIES)
    return card.with_omitted("toolActivities", dropped, toolActivities=kept)


def put_agent(card: Card, key: int | None, agent: BackgroundAgent, **changes: Any) -> Card:
    kept, dropped = upsert_counted(card.backgroundAgents, key, agent, MAX_BACKGROUND_AGENTS)
    return card.with_omitted("backgroundAgents", dropped, backgroundAgents=kept, **changes)


def with_steps(card: Card, steps: list[Step]) -> Card:
    """A new plan replaces the old one: its count of left-out steps is its own."""
    kept, dropped = trim(steps, MAX_STEPS)
    counts = dict(card.omitted)
    counts["steps"] = dropped
    return card.evolve(steps=kept, omitted=tuple(counts.items()))


def _status(item: Mapping[str, Any], done: bool) -> str:
    status = item.get("status")
    if isinstance(status, str) and status:
        return status
    return "completed" if done else "inProgress"


def _activity(card: Card, item: Mapping[str, Any], name: str, status: str, summary: str) -> Card:
    key = key_of(item.get("id"))
    return put_activity(card, key, ToolActivity(key, str(item.get("type")), name, status, summary))


def command_execution(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    status = _status(item, done)
    exit_code = item.get("exitCode")
    if status == "declined":
        summary = "command declined"
    elif status == "inProgress":
        summary = "running a command"
    elif isinstance(exit_code, int):
        summary = f"ran a command (exit {exit_code})"
    else:
        summary = "ran a command"
    card = _activity(card, item, "shell", status, summary)
    return approvals.on_item_outcome(card, key_of(item.get("id")), status) if done else card


def file_change(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    key = key_of(item.get("id"))
    status = _status(item, done)
    if status in ("declined", "failed"):
        kept = tuple(c for c in card.fileChanges if c.item_key != key)
        card = card.evolve(fileChanges=kept)
    else:
        card = add_changes(card, item.get("changes") or (), key)
        if done:
            card = _artifacts_from_changes(card, item.get("changes") or ())
    return approvals.on_item_outcome(card, key, status) if done else card


def change_kind(kind: Any) -> str:
    kind = kind if isinstance(kind, Mapping) else {"type": kind}
    if kind.get("type") == "update" and kind.get("move_path"):
        return "rename"
    return _CHANGE.get(kind.get("type"), "update")


def add_changes(card: Card, changes: Any, item_key: int | None) -> Card:
    """Paths and change kinds only; the ``diff`` of each change is never read.

    A path seen again moves to the end (the newest); past ``MAX_FILE_CHANGES`` the
    oldest paths are left out, and counted.
    """
    records = {r.path: r for r in card.fileChanges}
    for change in changes if isinstance(changes, (list, tuple)) else ():
        if not isinstance(change, Mapping) or not isinstance(change.get("path"), str):
            continue
        kind = change.get("kind")
        records.pop(change["path"], None)
        records[change["path"]] = FileChange(change["path"], change_kind(kind), item_key)
    kept, dropped = trim(list(records.values()), MAX_FILE_CHANGES)
    return card.with_omitted("fileChanges", dropped, fileChanges=kept)


def add_artifact(card: Card, path: str, kind: str | None = None) -> Card:
    name = os.path.basename(path.rstrip("/\\")) or path
    record = Artifact(name, kind or artifact_kind(name) or "file")
    if record in card.artifacts:
        return card
    kept, dropped = trim(card.artifacts + (record,), MAX_ARTIFACTS)
    return card.with_omitted("artifacts", dropped, artifacts=kept)


def _artifacts_from_changes(card: Card, changes: Any) -> Card:
    for change in changes if isinstance(changes, (list, tuple)) else ():
        if isinstance(change, Mapping) and change_kind(change.get("kind")) == "add":
            path = change.get("path")
            if isinstance(path, str) and artifact_kind(path):
                card = add_artifact(card, path)
    return card


def agent_message(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    text: str = item["text"] if isinstance(item.get("text"), str) else ""
    if not done:  # a new message: a new stream
        return card.evolve(answer=text, answer_stream=StreamRedactor(card.workdir).feed(text))
    stream = card.answer_stream
    if stream is None or stream.done:
        stream = StreamRedactor(card.workdir)
    if len(text) > stream.fed:
        stream = stream.feed(text[stream.fed:])  # what the deltas did not bring (none, usually)
    stream = stream.finish()
    if item.get("phase") == "commentary":
        return card.evolve(answer=text, answer_stream=stream)
    return card.evolve(answer=text, final_text=text, answer_stream=stream)


def plan(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    """The proposed plan of Plan mode: its list lines become pending steps."""
    if not done:
        return card
    steps = []
    for line in str(item.get("text") or "").splitlines():
        stripped = line.strip()
        head, _, rest = stripped.partition(" ")
        if rest and (head in ("-", "*") or (head.endswith(".") and head[:-1].isdigit())):
            steps.append(Step(rest.strip(), "pending"))
    return with_steps(card, steps) if steps else card


def reasoning(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    """Only the summary; the raw ``content`` is never read."""
    summary = item.get("summary") or []
    text = "\n\n".join(s for s in summary if isinstance(s, str))
    if not done:
        return card.evolve(reasoningSummary=Reasoning(text, "inProgress"))
    return card.evolve(reasoningSummary=Reasoning(text, "completed"))


def mcp_tool_call(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    status = _status(item, done)
    name = f"{item.get('server') or 'mcp'}/{item.get('tool') or 'tool'}"
    summary = {"failed": "MCP tool failed", "inProgress": "calling an MCP tool"}.get(
        status, "called an MCP tool")
    return _activity(card, item, name, status, summary)


def dynamic_tool_call(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    status = _status(item, done)
    tool = str(item.get("tool") or "tool")
    name = f"{item['namespace']}.{tool}" if item.get("namespace") else tool
    summary = {"failed": "tool failed", "inProgress": "calling a tool"}.get(status, "called a tool")
    return _activity(card, item, name, status, summary)


def web_search(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    action = mapping(item.get("action"))
    summary = _WEB_ACTION.get(str(action.get("type")), "web search")
    return _activity(card, item, "web_search", "completed" if done else "inProgress", summary)


def image_view(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    return _activity(card, item, "view_image", "completed" if done else "inProgress", "viewed an image")


def image_generation(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    """Status and the saved file's name; ``revisedPrompt`` and ``result`` are never read."""
    status = _status(item, done)
    failed = bool(item.get("failure")) or status == "failed"
    summary = "image generation failed" if failed else (
        "generated an image" if done else "generating an image")
    card = _activity(card, item, "image_generation", "failed" if failed else status, summary)
    saved = item.get("savedPath")
    return add_artifact(card, saved, "image") if done and isinstance(saved, str) and saved else card


def review_mode(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    entered = item.get("type") == "enteredReviewMode"
    summary = "entered review mode" if entered else "exited review mode"
    return _activity(card, item, "review", "completed" if done else "inProgress", summary)


def sleep(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    return _activity(card, item, "sleep", "completed" if done else "inProgress", "waited")


def collab_agent_tool_call(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    """Tool, status and how many agents it targets; never thread ids or the prompt."""
    targets = item.get("receiverThreadIds") or []
    target_kind = "none" if not targets else ("agent" if len(targets) == 1 else "agents")
    states = item.get("agentsStates")
    statuses = [s.get("status") for s in states.values()
                if isinstance(s, Mapping)] if isinstance(states, Mapping) else []
    agent_status = str(statuses[0]) if len(set(statuses)) == 1 else ("mixed" if statuses else None)
    key = key_of(item.get("id"))
    record = Collaboration(key, str(item.get("tool") or "agent"), _status(item, done),
                           target_kind, agent_status)
    return card.evolve(threadCollaboration=upsert(card.threadCollaboration, key, record,
                                                  MAX_ACTIVITIES))


def sub_agent_activity(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    """A sub-agent's lifecycle: a collaboration entry and a background agent."""
    name = str(item.get("agentPath") or "sub-agent").replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    kind = str(item.get("kind") or "started")
    status = {"started": "running", "interacted": "running"}.get(kind, kind)
    agent_key = key_of(("agent", item.get("agentThreadId") or name))
    agent = BackgroundAgent(agent_key, name, status, "subAgent")
    key = key_of(item.get("id"))
    collab = Collaboration(key, "subAgent", kind, "agent", status)
    return put_agent(card, agent_key, agent,
                     threadCollaboration=upsert(card.threadCollaboration, key, collab, MAX_ACTIVITIES))


def count_compaction(card: Card, turn_key: int | None) -> Card:
    """One compaction per turn: ``thread/compacted`` and the item may both report it."""
    turn_key = turn_key if turn_key is not None else card.turn_key
    if turn_key is not None and turn_key in card.compacted_turns:
        return card
    count = card.compaction.count + 1 if card.compaction else 1
    seen = card.compacted_turns | {turn_key} if turn_key is not None else card.compacted_turns
    return card.evolve(compaction=Compaction(count, card.updatedAt), compacted_turns=seen)


def context_compaction(card: Card, item: Mapping[str, Any], done: bool) -> Card:
    return count_compaction(card, None) if done else card


def close_open_items(card: Card, status: str) -> Card:
    """Items that got ``item/started`` but never ``item/completed`` (interrupt, steer)."""
    if card.open_items or any(a.status == "inProgress" for a in card.toolActivities):
        activities = tuple(
            ToolActivity(a.key, a.kind, a.name, status, a.summary) if a.status == "inProgress" else a
            for a in card.toolActivities)
        card = card.evolve(toolActivities=activities, open_items=())
    if card.reasoningSummary is not None and card.reasoningSummary.status == "inProgress":
        card = card.evolve(reasoningSummary=Reasoning(card.reasoningSummary.text, "completed"))
    return card


# Every ThreadItem type of codex 0.171.0. ``None``: deliberately not on the card.
ITEMS: dict[str, tuple[ItemHandler | None, str]] = {
    "userMessage": (None, "the user's prompt never goes on the card"),
    "hookPrompt": (None, "hook-injected prompt text"),
    "agentMessage": (agent_message, "answerPreview and the final answer"),
    "functionCallOutput": (None, "raw tool output"),
    "plan": (plan, "steps (Plan mode's proposed plan)"),
    "reasoning": (reasoning, "reasoningSummary (summary only, never raw content)"),
    "commandExecution": (command_execution, "toolActivities; approval outcome"),
    "fileChange": (file_change, "fileChanges, artifacts; approval outcome"),
    "mcpToolCall": (mcp_tool_call, "toolActivities"),
    "dynamicToolCall": (dynamic_tool_call, "toolActivities"),
    "collabAgentToolCall": (collab_agent_tool_call, "threadCollaboration"),
    "subAgentActivity": (sub_agent_activity, "threadCollaboration, backgroundAgents"),
    "webSearch": (web_search, "toolActivities"),
    "imageView": (image_view, "toolActivities"),
    "sleep": (sleep, "toolActivities"),
    "imageGeneration": (image_generation, "toolActivities, artifacts"),
    "enteredReviewMode": (review_mode, "toolActivities"),
    "exitedReviewMode": (review_mode, "toolActivities"),
    "contextCompaction": (context_compaction, "compaction"),
}
